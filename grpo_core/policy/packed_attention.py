"""The attention of a shared-prompt packed row (grpo_core.policy.shared_prompts): which keys each query sees, and
the kernel that applies it.

A packed row is ``[prompt, completion_0, ..., completion_m-1]`` described by two ``[R, L]`` tensors: ``segment``
(-1 on the prompt, ``j`` on completion ``j``, -2 on row padding) and ``valid`` (the token is real). Query ``q``
sees key ``k`` when :func:`sees` says so: ``k`` is not after ``q``, is valid, and lies in the prompt or in ``q``'s
own segment (a masked token's query sees what it saw unpacked: the earlier real tokens, not itself). Every row
starts with a real prompt token, so no query is left without a key. This one rule is applied by two kernels:

- ``dense_mask``: the rule evaluated into a ``[R, L, L]`` boolean mask handed to sdpa or eager attention. Any
  model whose attention takes a 4-D mask runs it, but a custom mask takes sdpa off the flash and memory-efficient
  kernels on CUDA, and the scores of every masked pair are still computed.
- ``flex_attention``: the rule as a FlexAttention ``mask_mod`` compiled into a block mask
  (``torch.nn.attention.flex_attention.create_block_mask``): a fused kernel that skips every fully masked
  128 x 128 block (a completion's queries never visit another completion's keys). The model keeps
  ``attn_implementation = "sdpa"`` for everything else (generation, unpacked forwards, the static decode's
  masks): :func:`use_flex_packing` lets transformers' sdpa entry take a :class:`BlockMask` too, handing it to
  transformers' flex attention integration (``transformers.integrations.flex_attention``), which compiles the
  kernel; any other mask goes to sdpa unchanged. A model loaded with ``attn_implementation = "flex_attention"``
  takes the block mask as it is. Because the block mask is an argument of each layer's call, a checkpointed
  layer's recompute in backward runs the same kernel.

torch runs FlexAttention's backward on CUDA (and XPU/HPU), not on a CPU: there the dense mask is the only packing
that trains, and a no-grad flex forward runs eagerly (compiling it on a CPU takes tens of seconds per shape).
"""

from __future__ import annotations

import importlib.util
import warnings
from typing import Any

import torch

DENSE = "dense_mask"
FLEX = "flex_attention"
FLEX_FLAG = "_grpo_flex_packing"  # set on a base model whose packed rows run through FlexAttention


def sees(q: torch.Tensor, k: torch.Tensor, segment_q: torch.Tensor, segment_k: torch.Tensor,
         valid_k: torch.Tensor) -> torch.Tensor:
    """Whether query ``q`` attends to key ``k`` (elementwise, broadcasting): a valid key, not after ``q``, in the
    prompt or in ``q``'s own completion."""
    return (q >= k) & valid_k & ((segment_k == segment_q) | (segment_k == -1))


def dense_allowed(segment: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """``[R, L(query), L(key)]`` booleans of :func:`sees` for packed rows ``segment``/``valid`` (``[R, L]``)."""
    index = torch.arange(segment.size(1), device=segment.device)
    return sees(index.view(1, -1, 1), index.view(1, 1, -1), segment.unsqueeze(2), segment.unsqueeze(1),
                valid.unsqueeze(1))


def block_mask(segment: torch.Tensor, valid: torch.Tensor) -> Any:
    """The FlexAttention block mask of :func:`sees` over packed rows ``segment``/``valid`` (``[R, L]``), one mask
    for every head. Off a CPU its block table is built by a compiled kernel (no ``[R, L, L]`` tensor)."""
    from torch.nn.attention.flex_attention import create_block_mask

    rows, length = segment.shape

    def mask_mod(b: torch.Tensor, h: torch.Tensor, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return sees(q, k, segment[b, q], segment[b, k], valid[b, k])

    return create_block_mask(mask_mod, rows, None, length, length, device=segment.device,
                             _compile=segment.device.type != "cpu")


def flex_available() -> bool:
    """torch's FlexAttention and transformers' integration of it are both installed."""
    if importlib.util.find_spec("torch.nn.attention.flex_attention") is None:
        return False
    from transformers.utils import is_torch_flex_attn_available

    return bool(is_torch_flex_attn_available())


def _base(model: torch.nn.Module) -> torch.nn.Module:
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def packing_kernel(model: torch.nn.Module) -> str | None:
    """The kernel ``model``'s packed rows run through: ``flex_attention`` (loaded with it, or sdpa after
    :func:`use_flex_packing`), ``dense_mask`` (sdpa or eager), or None (an attention that takes neither)."""
    base = _base(model)
    impl = getattr(getattr(base, "config", None), "_attn_implementation", None)
    if impl == FLEX or (impl == "sdpa" and getattr(base, FLEX_FLAG, False)):
        return FLEX
    return DENSE if impl in ("sdpa", "eager") else None


def use_flex_packing(model: torch.nn.Module, enabled: bool = True) -> None:
    """Pack ``model``'s rows through FlexAttention block masks (``enabled``) or dense masks again. Lets
    transformers' sdpa entry take a block mask (once per process; every other mask still goes to sdpa)."""
    base = _base(model)
    if not enabled:
        base.__dict__.pop(FLEX_FLAG, None)
        return
    if not flex_available():
        raise RuntimeError("FlexAttention packing needs torch.nn.attention.flex_attention and a transformers "
                           "with its flex attention integration")
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    if ALL_ATTENTION_FUNCTIONS["sdpa"] is not _sdpa_or_flex:
        global _SDPA
        _SDPA = ALL_ATTENTION_FUNCTIONS["sdpa"]
        ALL_ATTENTION_FUNCTIONS["sdpa"] = _sdpa_or_flex
    setattr(base, FLEX_FLAG, True)


_SDPA: Any = None  # transformers' sdpa attention, which _sdpa_or_flex hands every mask but a block mask


def _sdpa_or_flex(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                  attention_mask: Any, **kwargs: Any) -> tuple[torch.Tensor, Any]:
    """transformers' sdpa attention, and FlexAttention for a block mask (which sdpa would refuse)."""
    from torch.nn.attention.flex_attention import BlockMask

    if not isinstance(attention_mask, BlockMask):
        return _SDPA(module, query, key, value, attention_mask, **kwargs)
    if query.device.type == "cpu":
        return _eager_flex(query, key, value, attention_mask, **kwargs)
    from transformers.integrations.flex_attention import flex_attention_forward

    return flex_attention_forward(module, query, key, value, attention_mask, **kwargs)


def _eager_flex(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: Any, *,
                scaling: float | None = None, softcap: float | None = None, s_aux: Any = None,
                **_: Any) -> tuple[torch.Tensor, None]:
    """FlexAttention uncompiled (a CPU), with transformers' arguments: grouped key/value heads, softcapping."""
    from torch.nn.attention.flex_attention import flex_attention

    if s_aux is not None:
        raise ValueError("attention sinks are not supported by FlexAttention on a CPU")
    if key.size(1) != query.size(1):
        repeat = query.size(1) // key.size(1)
        key, value = key.repeat_interleave(repeat, dim=1), value.repeat_interleave(repeat, dim=1)

    def capped(score: torch.Tensor, b: Any, h: Any, q: Any, k: Any) -> torch.Tensor:
        return softcap * torch.tanh(score / softcap)

    with warnings.catch_warnings():  # torch advises compiling: on a CPU that costs more than it saves
        warnings.filterwarnings("ignore", message=".*flex_attention.*", category=UserWarning)
        out = flex_attention(query, key, value, score_mod=capped if softcap is not None else None,
                             block_mask=mask, scale=scaling)
    return out.transpose(1, 2).contiguous(), None
