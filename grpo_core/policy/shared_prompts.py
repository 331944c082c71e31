"""One copy of a group's prompt in the training forward: its completions packed behind it, each seeing only it.

A GRPO batch holds every prompt once per completion of its group, and an unpacked forward runs the prompt's
tokens through every layer G times. Here the rows that share a prompt (adjacent rows with equal prompt ids and
mask, as the trainer lays out its groups) become packed rows ``[prompt, completion_1, ..., completion_m]`` with

- a block attention pattern: the prompt is causal on itself; completion ``j`` sees the whole prompt and is causal
  on its own tokens (its masked tokens hidden from it, as the unpacked mask hides them); nothing else
  (grpo_core.policy.packed_attention owns the rule and the kernels that apply it);
- position ids that restart for each completion where its prompt ended (``cumsum(mask) - 1`` of the unpacked
  row), so rotary and learned positions see what the sampler saw.

Each completion token's log-prob comes from the same attention over the same keys as in the unpacked row, so
the log-probs equal the unpacked ones up to floating-point summation order (about 1e-6 in fp32), and their
gradients too (the prompt's contributions from its completions add up in one pass). Padding of short prompts
disappears as well.

What it costs depends on the kernel (:func:`grpo_core.policy.packed_attention.packing_kernel`). Through a dense
``[R, L, L]`` mask (sdpa or eager; the CPU's) every one of a packed row's ``L^2`` score pairs is computed, most of
them masked; through a FlexAttention block mask (a fused kernel, the planner's choice on CUDA) only the blocks a
query sees: the prompt's causal triangle and each completion's prompt columns and own triangle. :func:`plan`
packs ``m`` completions per row only where the estimated cost, ``L * (weights per layer) + 2 * hidden * (score
pairs)`` per layer summed over the rows, beats the unpacked batch; long completions or large groups end up with
several packed rows per group, or none. Under eager attention, which holds every score, the packed rows must
also hold no more scores than the unpacked ones. Only models whose every layer is causal attention that takes
the packed row's mask are packed (sdpa, eager, or flex attention; sliding windows only where the unpacked rows
fit in the window);
:func:`grpo_core.policy.logprobs.check_shared_prompts` compares packed with unpacked log-probs once at load and turns packing off for a
model that differs, with a warning.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from grpo_core.policy.packed_attention import DENSE, FLEX, block_mask, dense_allowed, packing_kernel

OFF_FLAG = "_grpo_unshared_prompts"  # set on a model whose packed log-probs failed check_shared_prompts
# the longest packed row, by kernel: a dense mask is L x L booleans per row; a block mask (L / 128)^2 block indices
MAX_PACKED_LENGTH = {DENSE: 4096, FLEX: 32768}


@dataclass
class Packing:
    """Packed rows, what each of their tokens is, and where each unpacked row's completion-predicting states lie
    in them."""

    input_ids: torch.Tensor  # [R, L]
    position_ids: torch.Tensor  # [R, L]
    segment: torch.Tensor  # [R, L]: -1 prompt, j completion j, -2 row padding
    valid: torch.Tensor  # [R, L] bool: a real token
    rows: torch.Tensor  # [B, K] packed row of the state that predicts each completion token
    cols: torch.Tensor  # [B, K] its column
    kernel: str = DENSE  # how the rows' attention runs (grpo_core.policy.packed_attention)

    @property
    def allowed(self) -> torch.Tensor:
        """``[R, L, L]`` bool: query may attend key (the dense mask)."""
        return dense_allowed(self.segment, self.valid)


def base_model(model: torch.nn.Module) -> torch.nn.Module:
    """The transformers model inside a peft wrapper (or the model itself): where the flags and config live."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def _text_config(model: torch.nn.Module) -> Any:
    config = getattr(model, "config", None)
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def packable(model: torch.nn.Module, width: int | None = None) -> bool:
    """Whether ``model``'s attention takes a packed row's mask as given: causal attention in every layer through
    a packing kernel (sdpa, eager or flex attention), and no failed :func:`check_shared_prompts`. Sliding-window
    layers qualify only for rows of at most ``width`` tokens that fit in the window (each completion then sees
    what it saw unpacked)."""
    base = base_model(model)
    if getattr(base, OFF_FLAG, False):
        return False
    config = getattr(base, "config", None)
    text = _text_config(base)
    if config is None or text is None:
        return False
    if packing_kernel(base) is None:
        return False
    kinds = set(getattr(text, "layer_types", None) or ())
    if kinds - {"full_attention", "sliding_attention"}:
        return False
    window = getattr(text, "sliding_window", None)
    windowed = "sliding_attention" in kinds or (bool(window) and getattr(text, "use_sliding_window", True) is not False)
    return not windowed or (bool(window) and width is not None and width <= int(window))


def layer_cost(text: Any) -> tuple[float, float]:
    """(weights per layer, hidden size) of a backbone's text config, for the cost estimate (0, 0 if unknown)."""
    hidden = float(getattr(text, "hidden_size", 0) or 0)
    layers = int(getattr(text, "num_hidden_layers", 0) or 0)
    if not hidden or not layers:
        return 0.0, 0.0
    inter = float(getattr(text, "intermediate_size", 4 * hidden) or 4 * hidden)
    return 4 * hidden * hidden + 3 * hidden * inter, hidden


def _cost(length: int, weights: float, hidden: float, pairs: float | None = None) -> float:
    """Per-layer cost of a row of ``length`` tokens attending ``pairs`` score pairs (default: all, dense)."""
    return length * weights + 2.0 * hidden * (length * length if pairs is None else pairs)


def completions_per_row(kernel: str, group: int, prompt: int, k: int, weights: float, hidden: float) -> int:
    """Completions of a group packed per row behind its ``prompt``: the count whose rows cost least (at most
    what fits in :data:`MAX_PACKED_LENGTH`); 1 when the model's shape is unknown."""
    fits = max(1, min(group, (MAX_PACKED_LENGTH[kernel] - prompt) // k))
    if not weights:
        return 1
    return min(range(1, fits + 1), key=lambda m: math.ceil(group / m) * _cost(
        prompt + m * k, weights, hidden, _pairs(kernel, prompt, m, k)))


def _pairs(kernel: str, prompt: int, count: int, k: int) -> float | None:
    """Score pairs a packed row of ``count`` completions behind a ``prompt`` computes: all of them through a
    dense mask (None), the seen ones through a block mask (the prompt's triangle, each completion's prompt
    columns and own triangle)."""
    if kernel != FLEX:
        return None
    return prompt * (prompt + 1) / 2 + count * k * (prompt + (k + 1) / 2)


def plan(model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor, logits_to_keep: int,
         *, per_row: int | None = None) -> Packing | None:
    """The packing of ``input_ids`` (``[B, P + K]``: left-padded prompts, then ``K = logits_to_keep`` completion
    columns) that the cost estimate prefers, or None where no packing beats the unpacked batch (or the model is
    not :func:`packable`). ``per_row`` forces that many completions per packed row (tests, the load check)."""
    if not packable(model, input_ids.size(1)):
        return None
    kernel = packing_kernel(model) or DENSE
    k = logits_to_keep
    rows, width = input_ids.shape
    prompt_width = width - k
    if rows < 2 or prompt_width < 1:
        return None
    prompts, prompt_mask = input_ids[:, :prompt_width], attention_mask[:, :prompt_width]
    new_prompt = torch.ones(rows, dtype=torch.bool, device=input_ids.device)
    new_prompt[1:] = ((prompts[1:] != prompts[:-1]) | (prompt_mask[1:] != prompt_mask[:-1])).any(1)
    starts = new_prompt.nonzero().flatten().tolist() + [rows]
    lengths = prompt_mask.sum(1).tolist()
    weights, hidden = layer_cost(_text_config(model))
    segments: list[tuple[int, int]] = []  # (first unpacked row, completions) per packed row
    for first, end in zip(starts, starts[1:]):
        group, prompt_len = end - first, int(lengths[first])
        if prompt_len < 1:
            return None
        if per_row is not None:
            per = max(1, min(per_row, group))
        else:
            per = completions_per_row(kernel, group, prompt_len, k, weights, hidden)
        segments += [(row, min(per, end - row)) for row in range(first, end, per)]
    packed_len = max(int(lengths[first]) + count * k for first, count in segments)
    packed_cost = sum(_cost(packed_len, weights, hidden, _pairs(kernel, int(lengths[first]), count, k))
                      for first, count in segments)
    if per_row is None and (not weights or packed_cost >= rows * _cost(width, weights, hidden)):
        return None
    eager = getattr(base_model(model).config, "_attn_implementation", None) == "eager"
    if per_row is None and eager and len(segments) * packed_len**2 > rows * width**2:
        return None  # eager attention holds every score: no more of them than unpacked
    return _build(input_ids, attention_mask, k, segments, [int(v) for v in lengths], packed_len, kernel)


def position_ids_from_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """``cumsum(mask) - 1`` (0 on left padding): each row's real tokens at positions 0, 1, ... as the
    sampler saw them, whatever padding precedes them (a model given no position ids uses the column)."""
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)


def _build(input_ids: torch.Tensor, attention_mask: torch.Tensor, k: int, segments: list[tuple[int, int]],
           lengths: list[int], packed_len: int, kernel: str) -> Packing:
    device = input_ids.device
    prompt_width = input_ids.size(1) - k
    positions = position_ids_from_mask(attention_mask)[:, prompt_width:]
    count = len(segments)
    ids = torch.zeros(count, packed_len, dtype=input_ids.dtype, device=device)
    pos = torch.zeros(count, packed_len, dtype=torch.long, device=device)
    segment = torch.full((count, packed_len), -2, dtype=torch.long, device=device)  # -1 prompt, j completion j
    valid = torch.zeros(count, packed_len, dtype=torch.bool, device=device)
    rows = torch.empty(input_ids.size(0), k, dtype=torch.long, device=device)
    cols = torch.empty(input_ids.size(0), k, dtype=torch.long, device=device)
    offsets = torch.arange(k, device=device)
    for r, (first, n) in enumerate(segments):
        lp = lengths[first]
        end = lp + n * k
        ids[r, :lp] = input_ids[first, :prompt_width][attention_mask[first, :prompt_width].bool()]
        ids[r, lp:end] = input_ids[first:first + n, prompt_width:].reshape(-1)
        pos[r, :lp] = torch.arange(lp, device=device)
        pos[r, lp:end] = positions[first:first + n].reshape(-1)
        segment[r, :lp] = -1
        segment[r, lp:end] = torch.arange(n, device=device).repeat_interleave(k)
        valid[r, :lp] = True
        valid[r, lp:end] = attention_mask[first:first + n, prompt_width:].reshape(-1).bool()
        starts = lp + torch.arange(n, device=device).unsqueeze(1) * k  # [n, 1]
        # token t of completion j is predicted by the state before it: the prompt's last for t = 0
        cols[first:first + n] = torch.where(offsets == 0, lp - 1, starts + offsets - 1)
        rows[first:first + n] = r
    return Packing(ids, pos, segment, valid, rows, cols, kernel)


def attention_mask_4d(model: torch.nn.Module, allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``allowed`` as the model's attention takes a custom mask: booleans for sdpa, additive for eager."""
    base = base_model(model)
    mask = allowed.unsqueeze(1)
    if getattr(base.config, "_attn_implementation", None) == "sdpa":
        return mask
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(~mask, torch.finfo(dtype).min)


def packed_hidden(model: torch.nn.Module, backbone: torch.nn.Module, packing: Packing) -> torch.Tensor:
    """``[B, K, H]``: the backbone's final states that predict each completion token, from the packed rows."""
    if packing.kernel == FLEX:
        mask = block_mask(packing.segment, packing.valid)
    else:
        dtype = next(backbone.parameters()).dtype
        mask = attention_mask_4d(model, packing.allowed, dtype if dtype.is_floating_point else torch.float32)
    hidden = backbone(input_ids=packing.input_ids, attention_mask=mask, position_ids=packing.position_ids,
                      use_cache=False).last_hidden_state
    return hidden[packing.rows, packing.cols]
