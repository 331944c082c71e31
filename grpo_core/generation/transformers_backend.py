"""The ``transformers`` generation backend: sampling from the policy itself (``[generation] backend =
"transformers"``, registered in :mod:`grpo_core.plugin`; the protocol and :class:`Generation` are
:mod:`grpo_core.generation.backend`'s). Its batches set ``sampler_is_policy``: its log-probs are the trainer's to
1e-4, so the trainer runs no importance correction and no old-policy pass for them.

The ``transformers`` backend samples plain temperature sampling with :mod:`grpo_core.generation.group_sampling`
(each prompt prefilled once for its whole group where the model's cache can be shared); with top-p, top-k or a
repetition penalty it calls ``model.generate``. ``[generation] decode`` picks the sampler's decode steps
(:func:`resolve_decode`): on CUDA by default a static cache and a CUDA-graph replay of each step, elsewhere
the dynamic cache with finished rows dropped.

Given ``on_groups`` (the trainer's, :data:`grpo_core.generation.backend.OnGroups`), the shared-prefill sampler
hands over each run of groups whose completions have all ended while the others still decode: the
:class:`Generation` of those groups alone, equal to their rows of the batch it returns at the end (the
``model.generate`` path hands over nothing: the trainer scores its batch afterwards).

A completion ends at any of the checkpoint's EOS ids or the chat template's end-of-turn token
(:func:`eos_token_ids`); a pad token equal to EOS is fine (the mask comes from the first EOS, not from
the pad id). Sampling uses only what ``[generation]`` says: the checkpoint's ``generation_config.json``
(``min_p``, ``no_repeat_ngram_size``, ...) is set aside while sampling, so the completions are drawn from
the policy at ``temperature``; ``top_p < 1``, ``top_k > 0`` and ``repetition_penalty != 1`` are allowed
but warned about, since they sample from a distribution other than the one the trainer scores.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import torch

from grpo_core.generation.backend import (  # the protocol's names, importable from here as before
    Generation,
    GenerationBackend,
    OnGroups,
    build_backend,
    completion_mask_from_eos,
    end_of_turn_ids,
    eos_token_ids,
)
from grpo_core.generation.group_sampling import sample_groups
from grpo_core.generation.multi_turn import left_pad
from grpo_core.generation.tool_rollouts import ToolRolloutBackend
from grpo_core.policy.lean_lora import lean_lora
from grpo_core.policy.models import compute_dtype
from grpo_rewards.errors import UserError

if TYPE_CHECKING:
    from grpo_core.config import RunConfig


def off_policy_warnings(gen: Any) -> list[str]:
    """Why sampling with ``[generation]`` ``gen`` draws from a distribution other than the policy at
    ``temperature`` (which the trainer's log-probs are): one line per setting."""
    lines = []
    if gen.top_p < 1:
        lines.append(f"generation.top_p = {gen.top_p}")
    if gen.top_k > 0:
        lines.append(f"generation.top_k = {gen.top_k}")
    if gen.repetition_penalty != 1:
        lines.append(f"generation.repetition_penalty = {gen.repetition_penalty}")
    return [f"{line}: completions are sampled from a truncated/penalised distribution while the loss uses the "
            "policy's own log-probs (off-policy)" for line in lines]


def _hf_model(model: Any) -> Any:
    return model.get_base_model() if hasattr(model, "get_base_model") else model


@contextlib.contextmanager
def clean_generation_config(model: Any, eos_ids: list[int], pad_id: int) -> Iterator[Any]:
    """Set the checkpoint's ``generation_config`` aside (restored after): yields a bare one holding only the
    special token ids, so nothing of ``generation_config.json`` reaches the sampler."""
    from transformers import GenerationConfig

    hf = _hf_model(model)
    saved = hf.generation_config
    bare = GenerationConfig(bos_token_id=getattr(saved, "bos_token_id", None), eos_token_id=eos_ids,
                            pad_token_id=pad_id)
    hf.generation_config = bare
    try:
        yield bare
    finally:
        hf.generation_config = saved


def resolve_decode(decode: str, model: Any) -> tuple[str, bool]:
    """``(mode, strict)``: the group sampler's decode mode for ``[generation] decode`` on the device ``model``
    sits on (``auto``: ``cuda_graph`` on CUDA, ``dynamic`` elsewhere), and whether a model it cannot serve is
    an error (a mode asked for by name) rather than a notice and the dynamic mode (``auto``)."""
    device = next(model.parameters()).device.type
    if decode == "auto":
        return ("cuda_graph" if device == "cuda" else "dynamic"), False
    if decode == "cuda_graph" and device != "cuda":
        raise UserError(f'generation.decode = "cuda_graph" needs a CUDA device; the policy is on {device!r} '
                        '(use "static" or "dynamic", or "auto")')
    return decode, True


def sampling_autocast(model: Any) -> Any:
    """The autocast the policy's forwards run under (``models.compute_dtype``), or a null context."""
    dtype = compute_dtype(model)
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(next(model.parameters()).device.type, dtype=dtype)


class TransformersBackend(ToolRolloutBackend):
    """Sampling with ``model.generate`` (the policy itself, in eval mode, no gradients)."""

    def __init__(self, config: RunConfig, model: Any, tokenizer: Any):
        for line in off_policy_warnings(config.generation):
            warnings.warn(line, stacklevel=2)
        super().__init__(config, model, tokenizer)
        self.shared_prefill = True  # grpo_core.generation.group_sampling for plain temperature sampling
        self.decode, self.decode_strict = resolve_decode(config.generation.decode, self.model)
        self.streams_groups = True  # generate takes on_groups (grpo_core.generation.backend.OnGroups)
        # more keywords for model.generate (TRL's GRPOConfig.generation_kwargs, set by grpo_core.api); any makes
        # every call model.generate's, with them on top of the sampling settings
        self.generation_kwargs: dict[str, Any] = {}
        self.set_tools([])

    def tool_sampling_problem(self) -> str | None:
        """Its rollouts' log-probs are the policy's (no correction): only plain temperature sampling."""
        if off_policy_warnings(self.gen) or self.generation_kwargs:
            return ("tool rollouts sample at generation.temperature alone: leave top_p, top_k, "
                    "repetition_penalty and generation_kwargs at their defaults")
        return None

    def _tokenize(self, prompts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        self.tokenizer.padding_side = "left"
        enc = self.tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=self.add_special_tokens)
        ids, mask = enc["input_ids"], enc["attention_mask"]
        # the trainer drops or refuses over-long prompts at load (data.overlong_prompts); "truncate" keeps the end
        if self.max_prompt_length and ids.size(1) > self.max_prompt_length:
            ids, mask = ids[:, -self.max_prompt_length:], mask[:, -self.max_prompt_length:]
        device = next(self.model.parameters()).device
        return ids.to(device), mask.to(device)

    @torch.no_grad()
    def generate(self, prompts: list[str], num_generations: int, *, greedy: bool = False,
                 on_groups: OnGroups | None = None) -> Generation:
        prompt_ids, prompt_mask = self._tokenize(prompts)
        if self.tools is not None:
            return self._multi_turn(prompt_ids, prompt_mask, num_generations, greedy)
        plain = greedy or (self.gen.top_p == 1 and self.gen.top_k == 0 and self.gen.repetition_penalty == 1)
        if plain and self.shared_prefill and not self.generation_kwargs:
            return self._sample_groups(prompt_ids, prompt_mask, num_generations, greedy, on_groups)
        prompt_ids = prompt_ids.repeat_interleave(num_generations, dim=0)
        prompt_mask = prompt_mask.repeat_interleave(num_generations, dim=0)
        sampling: dict[str, Any] = {"do_sample": False, "repetition_penalty": 1.0}
        if not greedy:
            sampling = {"do_sample": True, "temperature": self.gen.temperature, "top_p": self.gen.top_p,
                        "top_k": self.gen.top_k, "repetition_penalty": self.gen.repetition_penalty}
        was_training = self.model.training
        self.model.eval()
        try:
            with clean_generation_config(self.model, self.eos_ids, self.tokenizer.pad_token_id) as gen_cfg, \
                    sampling_autocast(self.model), lean_lora(self.model):
                gen_cfg.update(**{"max_new_tokens": self.gen.max_completion_length, "use_cache": True, **sampling,
                                  **self.generation_kwargs})
                out = self.model.generate(input_ids=prompt_ids, attention_mask=prompt_mask, generation_config=gen_cfg)
        finally:
            self.model.train(was_training)
        return self._finish(prompt_ids, prompt_mask, out[:, prompt_ids.size(1):])

    def _sample_groups(self, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, k: int,
                       greedy: bool, on_groups: OnGroups | None = None) -> Generation:
        hand_over = None
        if on_groups is not None:
            def hand_over(ids: torch.Tensor, logps: torch.Tensor, first: int, end: int, steps: int) -> None:
                a, b = first * k, end * k
                on_groups(first, self._finish(prompt_ids[first:end].repeat_interleave(k, dim=0),
                                              prompt_mask[first:end].repeat_interleave(k, dim=0),
                                              ids[a:b, :steps].clone(), logps[a:b, :steps].clone()))
        was_training = self.model.training
        self.model.eval()
        try:
            with sampling_autocast(self.model), lean_lora(self.model):  # the same bits, less per-call work
                out = sample_groups(self.model, prompt_ids, prompt_mask, k,
                                    max_new_tokens=self.gen.max_completion_length, eos_ids=self.eos_ids,
                                    pad_id=self.tokenizer.pad_token_id, temperature=self.gen.temperature,
                                    greedy=greedy, on_groups=hand_over, decode=self.decode,
                                    strict=self.decode_strict, check_every=self.gen.decode_check_every)
        finally:
            self.model.train(was_training)
        ids, logps = out
        return self._finish(prompt_ids.repeat_interleave(k, dim=0), prompt_mask.repeat_interleave(k, dim=0), ids, logps)

    def _turn(self, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, k: int, greedy: bool,
              max_new_tokens: int) -> tuple[torch.Tensor, torch.Tensor]:
        """One model turn of each row: ``k`` completions of each of the left-padded contexts and their log-probs."""
        was_training = self.model.training
        self.model.eval()
        try:
            with sampling_autocast(self.model), lean_lora(self.model):
                return sample_groups(self.model, prompt_ids, prompt_mask, k, max_new_tokens=max_new_tokens,
                                     eos_ids=self.eos_ids, pad_id=self.tokenizer.pad_token_id,
                                     temperature=self.gen.temperature, greedy=greedy, decode=self.decode,
                                     strict=self.decode_strict, check_every=self.gen.decode_check_every)
        finally:
            self.model.train(was_training)

    def _multi_turn(self, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, k: int, greedy: bool) -> Generation:
        """Model and tool turns until each row answers or hits a limit (grpo_core.generation.tool_rollouts): the
        first turn samples each prompt's group with its prefill shared, the later ones the rows still running."""
        pad = self.tokenizer.pad_token_id

        def sample(turn: int, rows: list[int], contexts: list[list[int]], max_new: int
                   ) -> tuple[torch.Tensor, torch.Tensor]:
            if turn == 0:
                return self._turn(prompt_ids, prompt_mask, k, greedy, max_new)
            ids, mask = left_pad(contexts, pad, prompt_ids.device)
            return self._turn(ids, mask, 1, greedy, max_new)

        max_context = getattr(_hf_model(self.model).config, "max_position_embeddings", None) or 1 << 62
        return self.rollout(prompt_ids, prompt_mask, k, sample, max_context=max_context, sampler_is_policy=True)

    def _finish(self, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, completion_ids: torch.Tensor,
                logps: torch.Tensor | None = None) -> Generation:
        completion_mask, truncated = completion_mask_from_eos(completion_ids, self.eos_ids)
        completion_ids = completion_ids.masked_fill(completion_mask == 0, self.tokenizer.pad_token_id)
        texts = self.tokenizer.batch_decode(completion_ids, skip_special_tokens=True)
        if logps is not None:
            logps = logps * completion_mask
        return Generation(prompt_ids, prompt_mask, completion_ids, completion_mask, texts, truncated, logps,
                          sampler_is_policy=True)


def make_transformers_backend(config: RunConfig, model: Any, tokenizer: Any) -> TransformersBackend:
    """Factory registered as the ``transformers`` generation backend."""
    return TransformersBackend(config, model, tokenizer)


__all__ = ["Generation", "GenerationBackend", "TransformersBackend", "build_backend", "clean_generation_config",
           "completion_mask_from_eos", "end_of_turn_ids", "eos_token_ids", "make_transformers_backend",
           "off_policy_warnings", "sampling_autocast"]
