"""Gradient (activation) checkpointing of the decoder layers, optionally offloading what it keeps to host RAM.

``enable_gradient_checkpointing(model, *, offload_to_cpu=False)`` turns on transformers' per-layer
checkpointing (non-reentrant, so frozen LoRA bases need no input-grad hooks), and with ``offload_to_cpu``
swaps the per-layer checkpoint function for :func:`offloaded_checkpoint`.

Offloading is Unsloth's "smart gradient checkpointing": a checkpointed layer keeps only its inputs (the
residual stream, ``tokens x hidden``) for the recompute; those are moved to (pinned) host memory in the
forward and brought back, asynchronously, in the backward. It is done with a ``saved_tensors_hooks``
around ``torch.utils.checkpoint``: the checkpoint saves its inputs through autograd's saved-tensor
mechanism outside its own inner hooks, so the outer hooks see exactly the layer inputs and nothing the
layer computes. Tensors already on the host are kept as they are (no copy), so on a CPU-only machine the
offload is a no-op apart from the bookkeeping in :data:`OFFLOAD_STATS`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.checkpoint import checkpoint


@dataclass
class OffloadStats:
    """What the offload hooks handled since the last :meth:`reset` (tensors seen, bytes moved off device)."""

    tensors: int = 0
    bytes_seen: int = 0
    bytes_moved: int = 0

    def reset(self) -> None:
        self.tensors = self.bytes_seen = self.bytes_moved = 0


OFFLOAD_STATS = OffloadStats()


def _pack_to_host(tensor: torch.Tensor) -> tuple[torch.device | None, torch.Tensor]:
    nbytes = tensor.numel() * tensor.element_size()
    OFFLOAD_STATS.tensors += 1
    OFFLOAD_STATS.bytes_seen += nbytes
    if tensor.device.type == "cpu":
        return None, tensor
    pin = torch.cuda.is_available() and not tensor.is_sparse
    host = torch.empty(tensor.size(), dtype=tensor.dtype, layout=tensor.layout, pin_memory=pin)
    host.copy_(tensor, non_blocking=pin)
    OFFLOAD_STATS.bytes_moved += nbytes
    return tensor.device, host


def _unpack_from_host(packed: tuple[torch.device | None, torch.Tensor]) -> torch.Tensor:
    device, tensor = packed
    return tensor if device is None else tensor.to(device, non_blocking=True)


def offloaded_checkpoint(function: Any, *args: Any, **kwargs: Any) -> Any:
    """``torch.utils.checkpoint.checkpoint`` whose saved inputs live in host memory until the backward."""
    kwargs.setdefault("use_reentrant", False)
    if kwargs["use_reentrant"]:
        raise ValueError("offloaded_checkpoint needs use_reentrant=False (the reentrant variant bypasses the hooks)")
    with torch.autograd.graph.saved_tensors_hooks(_pack_to_host, _unpack_from_host):
        return checkpoint(function, *args, **kwargs)


def _hf_model(model: Any) -> Any:
    """The transformers ``PreTrainedModel`` inside a peft wrapper (or the model itself)."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def enable_gradient_checkpointing(model: Any, *, offload_to_cpu: bool = False) -> None:
    """Checkpoint every decoder layer of ``model`` (a HF causal LM, peft-wrapped or not).

    Non-reentrant checkpointing; ``offload_to_cpu`` keeps the checkpointed layer inputs in host RAM.
    Also turns the KV cache off for training forwards (generation passes ``use_cache`` itself).
    Raises ``ValueError`` naming the model class when it has no checkpointable layers.
    """
    hf = _hf_model(model)
    if not getattr(hf, "supports_gradient_checkpointing", False):
        raise ValueError(f"{type(hf).__name__} does not support gradient checkpointing")
    kwargs = {"use_reentrant": False}
    enable = getattr(hf, "activation_checkpointing_enable", None)  # transformers >= 5.x name
    if enable is not None:
        enable(activation_checkpointing_kwargs=kwargs)
    else:
        hf.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    if offload_to_cpu:
        func = functools.partial(offloaded_checkpoint, **kwargs)
        layers = [m for m in hf.modules() if hasattr(m, "_gradient_checkpointing_func")]
        if not layers:
            raise ValueError(f"{type(hf).__name__}: no checkpointed layers found to offload")
        for module in layers:
            module._gradient_checkpointing_func = func
    if getattr(hf, "config", None) is not None and hasattr(hf.config, "use_cache"):
        hf.config.use_cache = False


def is_checkpointing(model: Any) -> bool:
    """Whether any layer of ``model`` is checkpointed."""
    return any(getattr(m, "gradient_checkpointing", False) is True for m in _hf_model(model).modules())


def is_offloading(model: Any) -> bool:
    """Whether the checkpointed layers of ``model`` offload their inputs to host memory."""
    for m in _hf_model(model).modules():
        func = getattr(m, "_gradient_checkpointing_func", None)
        if getattr(m, "gradient_checkpointing", False) is True and func is not None:
            return getattr(func, "func", func) is offloaded_checkpoint
    return False
