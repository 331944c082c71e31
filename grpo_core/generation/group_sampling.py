"""Sampling a group of completions per prompt: each prompt prefilled once, its KV cache shared by the group.

``sample_groups(model, prompt_ids, prompt_mask, k, ...) -> (completion_ids [P*k, K], logps [P*k, K])``

Plain temperature sampling (no top-p/top-k/penalty: those go through ``generate``): every step samples each
row's next token from ``softmax(logits / T)`` (``argmax`` when greedy). What changes from ``model.generate``
is the work done:

* the prompts are prefilled once per prompt, not once per completion: the cache of the ``P`` prompt rows is
  repeated ``k`` times (``batch_repeat_interleave``) after the prefill. A cache that cannot be repeated (a
  hybrid model's linear-attention layers) is noticed once, and each row is prefilled instead;
* ``decode = "dynamic"``: rows that ended (an EOS id) leave the batch (``batch_select_indices``), so the decode
  steps run on the rows still going, not on padding (a cache that cannot drop rows keeps them all, as below);
* ``decode = "static"`` / ``"cuda_graph"``: every row stays in the batch, over a preallocated cache with a
  fixed-address step, eager or replayed as a CUDA graph (:mod:`grpo_core.generation.static_decode`); a model
  that cannot decode that way is noticed once and decodes dynamically (``strict=True`` raises instead);
* position ids follow the attention mask (``cumsum(mask) - 1``), as in ``generate`` and the trainer.

The draw is the exponential race: ``argmax(p / E)`` with ``E ~ Exp(1)`` per row and vocabulary entry, which picks
token ``i`` with probability ``p_i`` (what ``torch.multinomial`` draws, on the device, without a host sync). The
noise comes from a generator seeded once per call from torch's global one, a full ``[P*k, vocabulary]`` draw
per step whatever rows are still going: the three decode modes draw the same tokens for the same seed (and
leave the global generator in the same state), which is what lets the tests hold them to each other.

In a fixed batch a finished row goes on decoding padding (its ids stay ``pad_id``, its log-probs 0); whether
all rows have finished is read back every ``check_every`` steps (one small device-to-host copy), so the
rollout runs at most ``check_every - 1`` steps past its end. The dynamic mode reads it every step.

It also returns each sampled token's log-probability under the sampler (fp32, at temperature T): the
numbers the trainer's log-probs must equal when training is on-policy.
Completion rows are right-padded with ``pad_id`` after their EOS; a row without EOS runs to
``max_new_tokens``.

``on_groups(ids, logps, first, end, steps)``, when given, is called as soon as groups ``first .. end - 1`` have
all their rows finished (seen finished, in a fixed batch), in order (a group finishing before an earlier one
waits for it): their rows of ``ids[:, :steps]`` and ``logps[:, :steps]`` are final then. ``ids`` and ``logps`` are
the buffers the sampler goes on writing (other rows only), so it must copy what it keeps; it must draw no
random numbers.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch

from grpo_core.config.sections import DECODE_MODES
from grpo_core.generation.static_decode import (
    StaticStep,
    cache_layers,
    static_decode_problem,
    static_kv_cache,
)
from grpo_rewards.errors import UserError

UNSHARED_FLAG = "_grpo_cache_not_shared"  # set on a model whose prefill cache cannot be repeated per group
_noticed: set[str] = set()


def notice_once(key: str, message: str) -> None:
    """One warning line per ``key`` for the life of the process."""
    if key not in _noticed:
        _noticed.add(key)
        warnings.warn(message, stacklevel=3)


def cache_argument(output: Any) -> str:
    """The name the installed transformers gives the KV cache, on a model output and as a forward argument:
    ``cache`` (newer releases, where ``past_key_values`` is deprecated) or ``past_key_values``."""
    return "cache" if "cache" in getattr(output, "__dataclass_fields__", {}) else "past_key_values"


def _has_everywhere(cache: Any, method: str) -> bool:
    """Whether the cache, and each of its layers when it has them, implements ``method``."""
    return hasattr(cache, method) and all(hasattr(layer, method) for layer in getattr(cache, "layers", None) or ())


def supports_shared_prefill(cache: Any) -> bool:
    """Whether a KV cache object can be repeated per group (every layer of it)."""
    return _has_everywhere(cache, "batch_repeat_interleave")


def supports_dropping_rows(cache: Any) -> bool:
    """Whether rows can leave a KV cache object as they finish (every layer of it)."""
    return _has_everywhere(cache, "batch_select_indices")


def _prefill(model: Any, ids: torch.Tensor, mask: torch.Tensor) -> tuple[Any, str, torch.Tensor, torch.Tensor]:
    """``(cache, its argument name, last logits [rows, V] fp32, positions [rows, L])`` of one prefill."""
    position = (mask.long().cumsum(-1) - 1).clamp(min=0)
    out = model(input_ids=ids, attention_mask=mask, position_ids=position, use_cache=True, logits_to_keep=1)
    cache_arg = cache_argument(out)
    return getattr(out, cache_arg), cache_arg, out.logits[:, -1].float(), position


def _shared_prefill(model: Any, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor,
                    k: int) -> tuple[Any, str, torch.Tensor, torch.Tensor]:
    """The prefill of the ``P*k`` rows: each prompt once, its cache repeated for its group; each row when the
    model's cache cannot be repeated (noticed once, and remembered on the model)."""
    if not getattr(model, UNSHARED_FLAG, False):
        cache, cache_arg, logits, position = _prefill(model, prompt_ids, prompt_mask)
        reason = None if supports_shared_prefill(cache) else "it has no batch_repeat_interleave on every layer"
        if reason is None:
            try:
                cache.batch_repeat_interleave(k)
            except (AttributeError, NotImplementedError, TypeError) as error:  # may have repeated some layers
                reason = str(error)
        if reason is None:
            return cache, cache_arg, logits.repeat_interleave(k, dim=0), position.repeat_interleave(k, dim=0)
        setattr(model, UNSHARED_FLAG, True)
        notice_once(f"unshared:{type(cache).__name__}", f"the model's KV cache cannot be shared by a group ({reason}): "
                    "each completion's prompt is prefilled on its own")
    return _prefill(model, prompt_ids.repeat_interleave(k, dim=0), prompt_mask.repeat_interleave(k, dim=0))


class _DynamicStep:
    """A decode step over the prefill's own cache (growing mask; rows may leave it)."""

    def __init__(self, model: Any, cache: Any, cache_arg: str, mask: torch.Tensor, next_position: torch.Tensor):
        self.model, self.cache, self.cache_arg, self.mask, self.position = model, cache, cache_arg, mask, next_position
        self.token: torch.Tensor | None = None

    def feed(self, token: torch.Tensor) -> None:
        self.token = token

    def select(self, keep: torch.Tensor) -> None:
        self.cache.batch_select_indices(keep)
        self.mask, self.position = self.mask[keep], self.position[keep]

    def step(self) -> torch.Tensor:
        self.mask = torch.cat([self.mask, self.mask.new_ones(self.mask.size(0), 1)], dim=1)
        out = self.model(input_ids=self.token.unsqueeze(1), attention_mask=self.mask,
                         position_ids=self.position.unsqueeze(1), use_cache=True, **{self.cache_arg: self.cache})
        self.position = self.position + 1
        return out.logits[:, -1].float()


def _draw(logits: torch.Tensor, temperature: float, greedy: bool,
          noise: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's token and its log-prob at ``temperature``: ``argmax`` when greedy, else the exponential
    race ``argmax(p / noise)`` (module docs)."""
    logp = torch.log_softmax(logits / temperature, dim=-1)
    token = logp.argmax(-1) if greedy else (logp.exp() / noise).argmax(-1)
    return token, logp.gather(1, token.unsqueeze(1)).squeeze(1)


@torch.no_grad()
def sample_groups(
    model: Any,
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor,
    k: int,
    *,
    max_new_tokens: int,
    eos_ids: list[int],
    pad_id: int,
    temperature: float = 1.0,
    greedy: bool = False,
    on_groups: Callable[[torch.Tensor, torch.Tensor, int, int, int], None] | None = None,
    decode: str = "dynamic",
    strict: bool = False,
    check_every: int = 8,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``k`` completions of each of the ``P`` left-padded prompts (rows ``i*k .. i*k+k-1`` for prompt ``i``)
    and the sampler's log-prob of each token (module docs)."""
    if decode not in DECODE_MODES or decode == "auto":  # "auto" is the backend's to resolve
        raise ValueError(f"decode must be one of {DECODE_MODES[1:]}, got {decode!r}")
    device = prompt_ids.device
    n = prompt_ids.size(0) * k
    noise_gen = None  # greedy draws no random numbers (evaluating leaves the training run's draws alone)
    if not greedy:  # one draw of the global generator per call, whatever the mode and the rollout's length
        noise_gen = torch.Generator(device=device).manual_seed(int(torch.randint(0, 2**62, (), dtype=torch.long)))
    cache, cache_arg, logits, position = _shared_prefill(model, prompt_ids, prompt_mask, k)
    mask = prompt_mask.repeat_interleave(k, dim=0)
    next_pos = position[:, -1] + 1
    run = _Rollout(n, k, max_new_tokens, eos_ids, pad_id, temperature, greedy, noise_gen, on_groups, device)
    if decode != "dynamic":
        length = mask.size(1) + max_new_tokens
        problem = static_decode_problem(model, cache, length)
        if problem is None:
            static = static_kv_cache(cache_layers(cache), length)
            del cache
            step = StaticStep(model, static, cache_arg, mask, next_pos, length, graph=decode == "cuda_graph",
                              strict=strict)
            out = run.fixed(step, logits, check_every)
            if step.capture_error is not None:
                notice_once(f"capture:{type(step.capture_error).__name__}",
                            f"the decode step could not be captured as a CUDA graph ({step.capture_error}): "
                            "it ran without one")
            return out
        if strict:
            raise UserError(f'generation.decode = "{decode}" cannot serve this model: {problem} (use "auto" or '
                            '"dynamic")')
        notice_once(f"static:{problem}", f'decode = "{decode}" cannot serve this model ({problem}): it decodes '
                    "with the model's own cache")
    step = _DynamicStep(model, cache, cache_arg, mask, next_pos)
    return run.shrinking(step, logits) if supports_dropping_rows(cache) else run.fixed(step, logits, check_every)


class _Rollout:
    """The sampling loop over a decode step: the output buffers, the draw, the hand-over of finished groups."""

    def __init__(self, n: int, k: int, max_new_tokens: int, eos_ids: list[int], pad_id: int, temperature: float,
                 greedy: bool, noise_gen: torch.Generator | None, on_groups: Callable[..., None] | None,
                 device: torch.device):
        self.n, self.k, self.steps_max, self.pad_id = n, k, max_new_tokens, pad_id
        self.temperature, self.greedy, self.noise_gen, self.on_groups = temperature, greedy, noise_gen, on_groups
        self.eos = torch.tensor(eos_ids, device=device)
        self.ids = torch.full((n, max_new_tokens), pad_id, dtype=torch.long, device=device)
        self.logps = torch.zeros(n, max_new_tokens, dtype=torch.float32, device=device)
        self.noise: torch.Tensor | None = None

    def _noise(self, logits: torch.Tensor) -> torch.Tensor | None:
        """This step's ``[n, V]`` noise (drawn for every row, going or not, into the same buffer each step)."""
        if self.noise_gen is None:
            return None
        if self.noise is None:
            self.noise = torch.empty(self.n, logits.size(-1), dtype=torch.float32, device=logits.device)
        return self.noise.exponential_(generator=self.noise_gen)

    def shrinking(self, step: _DynamicStep, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Rows leave the batch (and the cache) as they end; whether any ended is read every step."""
        rows = torch.arange(self.n, device=logits.device)  # original row of each row still in the batch
        going_per_group = torch.full((self.n // self.k,), self.k, dtype=torch.long, device=logits.device)
        handed = steps = 0
        for t in range(self.steps_max):
            steps = t + 1
            noise = self._noise(logits)
            if noise is not None and rows.numel() < self.n:
                noise = noise[rows]
            token, logp = _draw(logits, self.temperature, self.greedy, noise)
            self.ids[rows, t] = token
            self.logps[rows, t] = logp
            going = ~torch.isin(token, self.eos)
            last = t == self.steps_max - 1 or not going.any()
            if self.on_groups is not None:
                handed = _hand_over(self.on_groups, self.ids, self.logps, going_per_group, rows, going, last,
                                    handed, self.k, steps)
            if last:
                break
            if not going.all():  # finished rows leave the batch and the cache
                keep = going.nonzero().squeeze(1)
                step.select(keep)
                rows, token = rows[keep], token[keep]
            step.feed(token)
            logits = step.step()
        return self.ids[:, :steps], self.logps[:, :steps]

    def fixed(self, step: Any, logits: torch.Tensor, check_every: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Every row decodes to the end of the rollout; finished rows' outputs are padding. Whether all have
        finished (and which groups to hand over) is read every ``check_every`` steps: one sync each."""
        device = logits.device
        done = torch.zeros(self.n, dtype=torch.bool, device=device)
        finish = torch.full((self.n,), self.steps_max - 1, dtype=torch.long, device=device)  # last step of a row
        handed = 0
        all_done = False
        for t in range(self.steps_max):
            token, logp = _draw(logits, self.temperature, self.greedy, self._noise(logits))
            token = token.masked_fill(done, self.pad_id)
            self.ids[:, t] = token
            self.logps[:, t] = logp.masked_fill(done, 0.0)
            ended = torch.isin(token, self.eos) & ~done
            finish.masked_fill_(ended, t)
            done |= ended
            last = t == self.steps_max - 1
            if last or (t + 1) % check_every == 0:
                state = torch.cat([done.long(), finish]).cpu()  # the one host sync of these steps
                done_host, finish_host = state[:self.n].bool(), state[self.n:]
                all_done = bool(done_host.all())
                if self.on_groups is not None:
                    handed = self._hand_over_fixed(done_host | last, finish_host, handed)
                if all_done:
                    break
            if last:
                break
            step.feed(token)
            logits = step.step()
        steps = int(finish.max()) + 1 if all_done else self.steps_max
        return self.ids[:, :steps], self.logps[:, :steps]

    def _hand_over_fixed(self, done: torch.Tensor, finish: torch.Tensor, handed: int) -> int:
        """Hand the groups now finished, in order from ``handed``, with the width their rows need."""
        groups_done = done.view(-1, self.k).all(1)
        unfinished = (~groups_done[handed:]).nonzero()
        end = groups_done.numel() if unfinished.numel() == 0 else handed + int(unfinished[0, 0])
        if end > handed:
            width = int(finish[handed * self.k:end * self.k].max()) + 1
            self.on_groups(self.ids, self.logps, handed, end, width)
        return max(end, handed)


def _hand_over(on_groups: Callable[..., None], ids: torch.Tensor, logps: torch.Tensor, going_per_group: torch.Tensor,
               rows: torch.Tensor, going: torch.Tensor, last: bool, handed: int, k: int, steps: int) -> int:
    """Count the rows that ended this step against their groups and hand the groups now finished, in order,
    to ``on_groups(ids, logps, first, end, steps)``; returns how many groups have been handed over."""
    ended = rows if last else rows[~going]
    if ended.numel() == 0:
        return handed
    going_per_group.index_add_(0, ended // k, torch.full_like(ended, -1))
    unfinished = going_per_group[handed:].nonzero()
    end = going_per_group.numel() if unfinished.numel() == 0 else handed + int(unfinished[0, 0])
    if end > handed:
        on_groups(ids, logps, handed, end, steps)
    return max(end, handed)
