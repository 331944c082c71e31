"""The vLLM generation backend, and its colocated engine (a ``vllm.LLM`` in the training process).

``VLLMBackend(config, model, tokenizer).generate(prompts, n)`` returns the same :class:`Generation`
as the transformers backend, plus ``sampling_logps`` (the sampler's log-prob of every sampled
token, vLLM's ``processed_logprobs``: after temperature, top-k/top-p/min-p), which the trainer's
importance-sampling correction compares with its own.

Sampling parameters map one to one: ``n = num_generations``, ``temperature``, ``top_p``,
``top_k`` (0: off), ``min_p``, ``max_tokens = max_completion_length``, ``repetition_penalty``,
``stop`` strings, ``stop_token_ids`` = every EOS id the transformers backend stops at, and one
``seed`` per prompt drawn from torch's RNG (so a seeded run, and a resumed one, samples the same).
Greedy calls use ``temperature = 0`` with one request per completion (vLLM's greedy ``n`` is 1).

Given ``on_groups`` (:data:`grpo_core.generation.backend.OnGroups`) and an engine that passes each prompt's
completions on as they finish (the colocated one: ``LLM.enqueue``, then the engine stepped here, as
``LLM.generate`` steps it; the server one: each request's answer as it arrives), requests finishing in any
order are collected and each run of groups complete in order is handed over (:class:`_GroupRuns`), so the
trainer scores them while the rest generates.

Before every call the engine gets the policy's changed tensors in place (``weights.WeightSync``:
full fine-tuning, or LoRA merged on the fly), then its prefix cache is reset; nothing goes through
disk after the engine's first load. With ``vllm_lora_push = "adapter"`` the engine is started with LoRA
on and keeps the checkpoint's base weights; what changes is the adapter, written as a new version to
shared memory (``adapter_files.AdapterFiles``) and loaded as a ``LoRARequest`` that every request of
the call names (a new name per version, so no cached prefix of an older version is reused). With ``vllm_sleep_level`` 1 or 2 (CUDA only) the engine
sleeps between calls, releasing its KV cache (level 2 also its weights, which the next call pushes
again) while the trainer runs.

The backend talks to an engine through four calls (five with ``load_adapter``, a folder holding the
adapter to use from now on): ``load_weights`` (``(name, tensor)`` pairs),
``generate`` (prompt token ids and one sampling dict per request, vLLM's ``SamplingParams`` names ->
:class:`Completion` lists), ``wake`` and ``sleep``. ``vllm_mode = "colocate"``: :class:`ColocatedEngine`,
in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``, set here unless the caller set it), sharing the
policy's memory, no ``__main__`` guard needed; ``"server"``: :class:`grpo_core.generation.vllm.server.ServerEngine`,
a ``vllm serve`` server over HTTP.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import torch

from grpo_core.generation.backend import Generation, OnGroups
from grpo_core.generation.tool_rollouts import ToolRolloutBackend
from grpo_core.generation.vllm.adapter_files import AdapterFiles, peft_config_dict
from grpo_core.generation.vllm.completion import Completion
from grpo_core.generation.vllm.quiet_reload import quiet_partial_reload
from grpo_core.generation.vllm.server import ServerEngine
from grpo_core.generation.vllm.support import engine_lora_rank, unservable_adapter
from grpo_core.generation.vllm.weights import WeightSync
from grpo_core.policy.models import compute_dtype, is_peft
from grpo_rewards.errors import ConfigError

if TYPE_CHECKING:
    from grpo_core.config import RunConfig

_SEED_RANGE = 2**31 - 1


def _prepare_environment() -> None:
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    if os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] != "0":
        raise ValueError("generation.backend: the colocated vLLM engine needs VLLM_ENABLE_V1_MULTIPROCESSING=0 "
                         f"(the environment sets {os.environ['VLLM_ENABLE_V1_MULTIPROCESSING']!r})")


def _dtype_name(model: Any) -> str:
    """The dtype the policy's forwards run in (its autocast dtype, else its weights')."""
    return str(compute_dtype(model) or next(model.parameters()).dtype).removeprefix("torch.")


def cpu_kv_cache_bytes(model: Any, sequences: int, max_len: int | None) -> int:
    """KV cache bytes for ``2 * sequences`` full-length sequences (at least 64 MiB): keys and values of
    every layer, in the policy's dtype."""
    c = getattr(model, "config", None)
    layers = getattr(c, "num_hidden_layers", 32)
    heads = getattr(c, "num_attention_heads", 32)
    kv_heads = getattr(c, "num_key_value_heads", None) or heads
    head_dim = getattr(c, "head_dim", None) or getattr(c, "hidden_size", 4096) // heads
    length = max_len or getattr(c, "max_position_embeddings", 4096)
    size = next(model.parameters()).element_size()
    return max(64 << 20, 2 * sequences * length * 2 * layers * kv_heads * head_dim * size)


def refresh_tied_head(model: Any) -> None:
    """A head tied to the embeddings receives no weights of its own in a reload, but vLLM's CPU build keeps
    a repacked copy of it for the logits: build that again from the (shared, reloaded) weight."""
    head = getattr(model, "lm_head", None)
    method = getattr(head, "quant_method", None)
    if method is not None and getattr(getattr(model, "config", None), "tie_word_embeddings", False):
        method.process_weights_after_loading(head)


class ColocatedEngine:
    """A ``vllm.LLM`` in this process, loaded once from ``[model] name_or_path``; with ``lora_rank``, started
    with LoRA on for adapters up to that rank (``load_adapter``)."""

    def __init__(self, config: RunConfig, model: Any, lora_rank: int | None = None):
        _prepare_environment()
        from vllm import LLM

        g, m = config.generation, config.model
        self.sleep_level = g.vllm_sleep_level
        if self.sleep_level and not torch.cuda.is_available():
            raise ValueError("generation.vllm_sleep_level: sleep mode needs a CUDA GPU (vLLM's CPU build has none); "
                             "set it to 0")
        max_len = g.vllm_max_model_len
        if max_len is None and config.data.max_prompt_length:
            max_len = config.data.max_prompt_length + g.max_completion_length
        extra: dict[str, Any] = {}
        if not torch.cuda.is_available() and not os.environ.get("VLLM_CPU_KVCACHE_SPACE"):
            # vLLM's CPU build counts this whole process (the policy, its optimizer) against its memory
            # share; a colocated engine gets an explicit KV cache instead, sized for one step's sequences
            extra["kv_cache_memory_bytes"] = cpu_kv_cache_bytes(model, config.sequences_per_step, max_len)
        if lora_rank:  # one adapter in use at a time; the previous version stays cached while the next loads
            extra.update(enable_lora=True, max_lora_rank=lora_rank, max_loras=1, max_cpu_loras=2)
        self.llm = LLM(
            model=m.name_or_path, revision=m.revision, trust_remote_code=m.trust_remote_code,
            dtype=_dtype_name(model), seed=config.grpo.seed, max_model_len=max_len,
            gpu_memory_utilization=g.vllm_gpu_memory_utilization, enable_sleep_mode=bool(self.sleep_level),
            logprobs_mode="processed_logprobs", enable_prefix_caching=True,
            enforce_eager=os.environ.get("GRPO_VLLM_EAGER", "") == "1", **extra,
        )
        self.asleep = False
        self.lora_request: Any = None
        self.hands_over = True  # generate takes on_finished
        if self.sleep_level:
            self.sleep()

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> int:
        """Copy ``(hf_name, tensor)`` pairs into the engine's model in place; returns how many."""
        batch = list(weights)
        if batch:  # vLLM's in-place reload: its fused and repacked layers are rebuilt from these
            with quiet_partial_reload():
                self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": batch,
                                                                  "is_checkpoint_format": True})
            if any(name.endswith("embed_tokens.weight") for name, _ in batch):
                self.llm.apply_model(refresh_tied_head)
            self.llm.reset_prefix_cache()
        return len(batch)

    def load_adapter(self, folder: str | os.PathLike[str]) -> None:
        """Load the adapter in ``folder`` (peft's layout) and use it for every later request, in place of the
        one used so far (which is dropped)."""
        from vllm.lora.request import LoRARequest

        previous = self.lora_request
        number = previous.lora_int_id + 1 if previous else 1
        request = LoRARequest(f"policy-{number}", number, os.fspath(folder))
        self.llm.llm_engine.add_lora(request)  # loads it now: a refused adapter fails here, not mid-generation
        self.lora_request = request
        if previous is not None:
            self.llm.llm_engine.remove_lora(previous.lora_int_id)

    def generate(self, prompts: list[list[int]], params: list[dict[str, Any]],
                 on_finished: Callable[[int, list[Completion]], None] | None = None) -> list[list[Completion]]:
        """One list of completions (in index order) per prompt, sampled with its ``SamplingParams`` fields; with
        ``on_finished``, each prompt's list is also passed to it (with the prompt's index) as soon as all its
        completions are done, on this thread, while the engine goes on with the others."""
        from vllm import SamplingParams

        sampling = [SamplingParams(**p, flat_logprobs=True, detokenize=bool(p.get("stop"))) for p in params]
        inputs = [{"prompt_token_ids": ids} for ids in prompts]
        if on_finished is None:
            outputs = self.llm.generate(inputs, sampling, use_tqdm=False, lora_request=self.lora_request)
            return [_completions(out) for out in outputs]
        # what LLM.generate does (enqueue, then step the engine until nothing is left), each finished prompt
        # passed on when it finishes
        # enqueue answers the engine's internal ids ("<id>-<8 random characters>"); outputs carry the id given
        internal = [str(r) for r in self.llm.enqueue(inputs, sampling, use_tqdm=False,
                                                     lora_request=self.lora_request)]
        request_ids = [_external_id(r) for r in internal]
        index = {r: i for i, r in enumerate(request_ids)}
        results: list[list[Completion] | None] = [None] * len(prompts)
        engine = self.llm.llm_engine
        try:
            while engine.has_unfinished_requests():
                for out in engine.step():
                    if out.finished:
                        i = index[str(out.request_id)]
                        results[i] = _completions(out)
                        on_finished(i, results[i])
        except BaseException:
            engine.abort_request([r for r, done in zip(request_ids, results, strict=True) if done is None])
            raise
        return results  # type: ignore[return-value]

    def wake(self) -> bool:
        """Wake a sleeping engine; True when its weights were dropped (level 2) and must be pushed again."""
        if not self.asleep:
            return False
        self.llm.wake_up()
        self.asleep = False
        return self.sleep_level == 2

    def sleep(self) -> None:
        if self.sleep_level and not self.asleep:
            self.llm.sleep(level=self.sleep_level)
            self.asleep = True


class VLLMBackend(ToolRolloutBackend):
    """The ``vllm`` generation backend (see the module docs)."""

    def __init__(self, config: RunConfig, model: Any, tokenizer: Any, engine: Any = None):
        super().__init__(config, model, tokenizer)
        self.config_path = config.path
        self.weights = WeightSync(model)
        self.adapter = self._adapter_files(config, model) if self.gen.vllm_lora_push == "adapter" else None
        self._served: Any = None  # the adapter folder the engine reads now
        if engine is None:
            if self.gen.vllm_mode == "server":
                engine = ServerEngine(config, dtype=_dtype_name(model))
            else:
                rank = engine_lora_rank(_largest_rank(self.adapter.config)) if self.adapter else None
                engine = ColocatedEngine(config, model, lora_rank=rank)
        self.engine = engine
        # the colocated engine passes each prompt's completions on as they finish: runs of finished groups are
        # handed over (grpo_core.generation.backend.OnGroups) and scored while the rest generates
        self.streams_groups = bool(getattr(engine, "hands_over", False))
        self.pushed = 0  # tensors sent to the engine so far (a metric for tests and logs)
        self.set_tools([])

    def tool_sampling_problem(self) -> str | None:
        """A model turn ends at its end-of-turn token: a stop string would end it as if truncated."""
        if self.gen.stop:
            return "tool rollouts end each model turn at its end-of-turn token: leave generation.stop empty"
        return None

    @staticmethod
    def _adapter_files(config: RunConfig, model: Any) -> AdapterFiles:
        """The adapter export of ``vllm_lora_push = "adapter"``, or a ConfigError naming the key when the policy
        has no adapter vLLM can serve (a model object or peft config from the Python API gets here unchecked)."""
        key = "generation.vllm_lora_push"
        if not is_peft(model):
            raise ConfigError('"adapter" serves a LoRA adapter, and the policy has none: set it to "merged"',
                              file=config.path, key=key)
        why = unservable_adapter(peft_config_dict(model))
        if why:
            raise ConfigError(f'"adapter": vLLM cannot serve this adapter ({"; ".join(why)}); set it to "merged"',
                              file=config.path, key=key)
        return AdapterFiles(model)

    def sync_weights(self) -> int:
        """Send what changed in the policy since the last sync; returns how many tensors went."""
        if self.adapter is not None:
            return self._sync_adapter()
        sent = self.engine.load_weights(self.weights.changed())
        self.pushed += sent
        return sent

    def _sync_adapter(self) -> int:
        """A new version of the adapter when a LoRA tensor changed (the base weights never do)."""
        if not self.adapter.changed():
            return 0
        folder = self.adapter.write()
        try:
            self.engine.load_adapter(folder)
        except (ValueError, RuntimeError) as exc:  # vLLM's refusal of an adapter (a module it cannot adapt)
            self.adapter.remove(folder)
            raise ConfigError(f'"adapter": vLLM refused the adapter: {str(exc).splitlines()[0]}; set it to '
                              '"merged"', file=self.config_path, key="generation.vllm_lora_push") from None
        if self._served is not None:
            self.adapter.remove(self._served)
        self._served = folder
        self.pushed += len(self.adapter.tensors)
        return len(self.adapter.tensors)

    def _prompt_token_lists(self, prompts: list[str]) -> tuple[list[list[int]], torch.Tensor, torch.Tensor]:
        self.tokenizer.padding_side = "left"
        enc = self.tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=self.add_special_tokens)
        ids, mask = enc["input_ids"], enc["attention_mask"]
        if self.max_prompt_length and ids.size(1) > self.max_prompt_length:  # keep the end, as the HF path
            ids, mask = ids[:, -self.max_prompt_length:], mask[:, -self.max_prompt_length:]
        return [row[m.bool()].tolist() for row, m in zip(ids, mask, strict=True)], ids, mask

    def _params(self, prompts: int, num_generations: int, greedy: bool, max_tokens: int | None = None
                ) -> tuple[list[dict[str, Any]], int]:
        """The ``SamplingParams`` fields of each request (at most ``max_tokens`` tokens each, default
        ``max_completion_length``), and how many requests each prompt becomes."""
        g = self.gen
        common = dict(max_tokens=max_tokens or g.max_completion_length, stop_token_ids=list(self.eos_ids),
                      stop=list(g.stop) or None, include_stop_str_in_output=True, logprobs=0,
                      skip_special_tokens=True)
        if greedy:  # vLLM's greedy sampling takes n = 1: one request per completion; every field set, so a
            # server's defaults (a checkpoint's generation_config.json) decide nothing
            one = dict(n=1, temperature=0.0, top_p=1.0, top_k=-1, min_p=0.0, repetition_penalty=1.0, **common)
            return [one] * (prompts * num_generations), num_generations
        seeds = torch.randint(0, _SEED_RANGE, (prompts,)).tolist()
        return [dict(n=num_generations, temperature=g.temperature, top_p=g.top_p, top_k=g.top_k or -1,
                     min_p=g.min_p, repetition_penalty=g.repetition_penalty, seed=seed, **common)
                for seed in seeds], 1

    @torch.no_grad()
    def generate(self, prompts: list[str], num_generations: int, *, greedy: bool = False,
                 on_groups: OnGroups | None = None) -> Generation:
        if self.engine.wake():
            self.weights.reset()  # the engine dropped its weights: everything goes again
            if self.adapter is not None:
                self.adapter.reset()
        self.sync_weights()
        token_lists, prompt_ids, prompt_mask = self._prompt_token_lists(prompts)
        if self.tools is not None:
            try:
                return self._multi_turn(token_lists, prompt_ids, prompt_mask, num_generations, greedy)
            finally:
                self.engine.sleep()
        params, copies = self._params(len(prompts), num_generations, greedy)
        requests = [ids for ids in token_lists for _ in range(copies)]
        try:
            if on_groups is not None and self.hands_over_groups:
                def hand_over(first: int, end: int, done: list[Completion]) -> None:
                    on_groups(first, self._batch(prompt_ids[first:end], prompt_mask[first:end], num_generations,
                                                 done))

                groups = _GroupRuns(len(prompts), copies, hand_over)
                outputs = self.engine.generate(requests, params, on_finished=groups.finished)
            else:
                outputs = self.engine.generate(requests, params)
        finally:
            self.engine.sleep()
        completions = [c for out in outputs for c in out]
        if len(completions) != len(prompts) * num_generations:
            raise RuntimeError(f"vLLM returned {len(completions)} completions for {len(prompts)} prompts x "
                               f"{num_generations}")
        return self._batch(prompt_ids, prompt_mask, num_generations, completions)

    def _multi_turn(self, token_lists: list[list[int]], prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, k: int,
                    greedy: bool) -> Generation:
        """Model and tool turns until each row answers or hits a limit (grpo_core.generation.tool_rollouts), each
        turn one engine call: the first asks ``k`` completions of each prompt, the later ones one of each running
        row's context, sent as the token ids carried so far; the batch holds vLLM's log-prob of each model token,
        which the trainer corrects for."""
        fill = self.tokenizer.pad_token_id
        if fill in self.eos_ids:  # a turn padded with an end-of-turn id would read as ended
            fill = min(set(range(len(self.eos_ids) + 1)) - set(self.eos_ids))

        hf = getattr(self.model, "get_base_model", lambda: self.model)()
        max_context = self.gen.vllm_max_model_len or getattr(hf.config, "max_position_embeddings", None) or 1 << 62
        limit = self.gen.max_completion_length

        def room(context: list[int], prompt: int, max_new: int) -> int:
            """What a row has room for (the rollout cuts a row at its room anyway: no token asked beyond it)."""
            return max(1, min(max_new, limit - len(context) + prompt, max_context - len(context)))

        def sample(turn: int, rows: list[int], contexts: list[list[int]], max_new: int
                   ) -> tuple[torch.Tensor, torch.Tensor]:
            if turn == 0:
                params, copies = self._params(len(token_lists), k, greedy, max_new)
                requests = [ids for ids in token_lists for _ in range(copies)]
                params = [{**p, "max_tokens": room(ids, len(ids), max_new)}
                          for p, ids in zip(params, requests, strict=True)]
            else:
                params, _ = self._params(len(contexts), 1, greedy, max_new)
                requests = contexts
                params = [{**p, "max_tokens": room(ids, len(token_lists[r // k]), max_new)}
                          for p, ids, r in zip(params, contexts, rows, strict=True)]
            done = [c for out in self.engine.generate(requests, params) for c in out]
            if len(done) != len(rows):
                raise RuntimeError(f"vLLM returned {len(done)} completions for {len(rows)} rows")
            ids = [torch.tensor(c.token_ids, dtype=torch.long) for c in done]
            logps = [torch.tensor(c.logprobs, dtype=torch.float32) for c in done]
            return (torch.nn.utils.rnn.pad_sequence(ids, batch_first=True, padding_value=fill),
                    torch.nn.utils.rnn.pad_sequence(logps, batch_first=True, padding_value=0.0))

        device = next(self.model.parameters()).device
        return self.rollout(prompt_ids.to(device), prompt_mask.to(device), k, sample, max_context=max_context,
                            sampler_is_policy=False)

    def _batch(self, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, num_generations: int,
               completions: list[Completion]) -> Generation:
        """The :class:`Generation` of ``completions``, ``num_generations`` per row of ``prompt_ids``, in order."""
        pad = self.tokenizer.pad_token_id
        ids = [torch.tensor(c.token_ids, dtype=torch.long) for c in completions]
        logps = [torch.tensor(c.logprobs, dtype=torch.float32) for c in completions]
        completion_ids = torch.nn.utils.rnn.pad_sequence(ids, batch_first=True, padding_value=pad)
        sampling_logps = torch.nn.utils.rnn.pad_sequence(logps, batch_first=True, padding_value=0.0)
        lengths = torch.tensor([len(c.token_ids) for c in completions])
        completion_mask = (torch.arange(completion_ids.size(1))[None, :] < lengths[:, None]).long()
        truncated = torch.tensor([c.finish_reason == "length" for c in completions])
        texts = self.tokenizer.batch_decode(completion_ids, skip_special_tokens=True)
        device = next(self.model.parameters()).device
        prompt_ids = prompt_ids.repeat_interleave(num_generations, dim=0)
        prompt_mask = prompt_mask.repeat_interleave(num_generations, dim=0)
        return Generation(prompt_ids.to(device), prompt_mask.to(device), completion_ids.to(device),
                          completion_mask.to(device), texts, truncated.to(device),
                          sampling_logps=sampling_logps.to(device))


class _GroupRuns:
    """Requests finish in any order; ``finished(i, completions)`` collects them and calls
    ``hand_over(first, end, completions)`` for each run of groups ``first .. end - 1`` complete in order (a group:
    ``copies`` consecutive requests, the completions of one prompt), so the trainer scores groups while the rest
    generates."""

    def __init__(self, groups: int, copies: int, hand_over: Callable[[int, int, list[Completion]], None]):
        self.copies, self.hand_over = copies, hand_over
        self.results: list[list[Completion] | None] = [None] * (groups * copies)
        self.next = 0  # the first group not handed over yet

    def finished(self, index: int, completions: list[Completion]) -> None:
        self.results[index] = completions
        first, end = self.next, self.next
        while end * self.copies < len(self.results) and all(
                r is not None for r in self.results[end * self.copies:(end + 1) * self.copies]):
            end += 1
        if end > first:
            self.next = end
            self.hand_over(first, end, [c for out in self.results[first * self.copies:end * self.copies]
                                        for c in out])  # type: ignore[union-attr]


def _largest_rank(peft: dict[str, Any]) -> int:
    return max([int(peft.get("r", 1)), *(peft.get("rank_pattern") or {}).values()])


def _external_id(internal: str) -> str:
    """The id a request was given (``LLM``'s counter: digits), from the one ``LLM.enqueue`` answers: vLLM
    appends ``-`` and 8 random characters to make it unique (unless told not to: then the two are the same)."""
    head, _, tail = internal.rpartition("-")
    return head if head and len(tail) == 8 else internal


def _completions(output: Any) -> list[Completion]:
    """The completions of one vLLM ``RequestOutput``, in index order."""
    return [Completion(list(c.token_ids), _sampled_logprobs(c), c.finish_reason)
            for c in sorted(output.outputs, key=lambda c: c.index)]


def _sampled_logprobs(completion: Any) -> list[float]:
    """The sampled tokens' log-probs of one vLLM ``CompletionOutput`` (``logprobs=0``: one entry per position)."""
    flat = completion.logprobs
    values = getattr(flat, "logprobs", None)
    if values is not None and len(values) == len(completion.token_ids):
        return [float(v) for v in values]
    return [pos[tok].logprob for pos, tok in zip(flat, completion.token_ids, strict=True)]


def make_vllm_backend(config: RunConfig, model: Any, tokenizer: Any) -> VLLMBackend:
    """Factory registered as the ``vllm`` generation backend."""
    return VLLMBackend(config, model, tokenizer)
