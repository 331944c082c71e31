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

Tiled MLP (ALST's and Unsloth's "tiled MLP", on by default with ``mlp_chunk_tokens``): the MLP is
token-wise, so each decoder layer's MLP runs over ``mlp_chunk_tokens`` tokens at a time, each tile
checkpointed. Under layer checkpointing the recompute would otherwise hold the whole layer's
``tokens x intermediate`` activations (4 of them, 5.4x the hidden size for Qwen2) at once; tiled, it
holds one tile's. The price is one more forward of the MLP per tile in backward. Inputs no longer than
one tile run untouched. ``"auto"`` tiles by the model's hidden size in tokens, the rule of DeepSpeed's
ALST ``TiledMLP`` (``num_shards = ceil(seqlen / hidden_size)``), but never under
:data:`MIN_AUTO_MLP_TILE` tokens, the trainer's default token budget per pass: passes within the budget
(``grpo.micro_batch_tokens`` already bounds their activations) run untiled, since the extra MLP forward
costs 20-35% of a training pass (SmolLM2-135M, LoRA, 612 tokens: 4.6 s untiled against 6.5 s in 576-token
tiles); the tiles cut the peak of longer passes, a row longer than the budget or a budget raised.
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
MIN_AUTO_MLP_TILE = 4096  # tokens: the default grpo.micro_batch_tokens


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


def mlp_tile_tokens(model_config: Any, mlp_chunk_tokens: int | str | None = "auto") -> int | None:
    """Tokens per MLP tile: ``"auto"`` is the model's hidden size (ALST's rule), at least
    :data:`MIN_AUTO_MLP_TILE`; None or 0 is no tiling."""
    if mlp_chunk_tokens == "auto":
        text = model_config.get_text_config() if hasattr(model_config, "get_text_config") else model_config
        return max(int(text.hidden_size), MIN_AUTO_MLP_TILE)
    if isinstance(mlp_chunk_tokens, str):
        raise ValueError(f"mlp_chunk_tokens must be an integer, 'auto' or None, got {mlp_chunk_tokens!r}")
    return mlp_chunk_tokens or None


def enable_gradient_checkpointing(
    model: Any, *, offload_to_cpu: bool = False, mlp_chunk_tokens: int | str | None = "auto"
) -> None:
    """Checkpoint every decoder layer of ``model`` (a HF causal LM, peft-wrapped or not).

    Non-reentrant checkpointing; ``offload_to_cpu`` keeps the checkpointed layer inputs in host RAM;
    ``mlp_chunk_tokens`` tiles the layers' MLPs (:func:`tile_mlp`; ``"auto"``: the hidden size in
    tokens; None or 0 turns it off).
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
    tile = mlp_tile_tokens(hf.config, mlp_chunk_tokens)
    if tile:
        tile_mlp(model, tile)


def _tiled(forward: Any, chunk: int) -> Any:
    @functools.wraps(forward)
    def tiled_forward(x: torch.Tensor) -> torch.Tensor:
        n = x.shape[:-1].numel()
        if n <= chunk:
            return forward(x)
        flat = x.reshape(n, x.shape[-1])
        if torch.is_grad_enabled():
            parts = [checkpoint(forward, part, use_reentrant=False) for part in flat.split(chunk)]
        else:
            parts = [forward(part) for part in flat.split(chunk)]
        out = torch.cat(parts)
        return out.view(*x.shape[:-1], out.shape[-1])

    tiled_forward._grpo_tiled = chunk  # type: ignore[attr-defined]
    return tiled_forward


def tile_mlp(model: Any, chunk_tokens: int) -> int:
    """Make every decoder layer's ``mlp`` run ``chunk_tokens`` tokens at a time (each tile checkpointed
    when gradients are on). Idempotent; returns how many MLPs are tiled."""
    if chunk_tokens < 1:
        raise ValueError(f"mlp_chunk_tokens must be >= 1, got {chunk_tokens}")
    from transformers.modeling_layers import GradientCheckpointingLayer

    count = 0
    for layer in _hf_model(model).modules():
        mlp = getattr(layer, "mlp", None)
        if not isinstance(layer, GradientCheckpointingLayer) or not type(mlp).__name__.endswith("MLP"):
            continue  # dense token-wise MLPs only (MoE blocks return router logits too)
        forward = getattr(mlp.forward, "__wrapped__", mlp.forward) if _tile_of(mlp) else mlp.forward
        mlp.forward = _tiled(forward, chunk_tokens)
        count += 1
    return count


def _tile_of(mlp: torch.nn.Module) -> int | None:
    return getattr(mlp.__dict__.get("forward"), "_grpo_tiled", None)


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


def untile_mlp(model: Any) -> int:
    """Undo :func:`tile_mlp`: every tiled MLP runs whole again; returns how many were tiled."""
    count = 0
    for module in _hf_model(model).modules():
        mlp = getattr(module, "mlp", None)
        if isinstance(mlp, torch.nn.Module) and _tile_of(mlp):
            del mlp.forward  # the instance attribute: the class's forward again
            count += 1
    return count


def disable_gradient_checkpointing(model: Any) -> None:
    """Turn off what :func:`enable_gradient_checkpointing` turned on (the layers' checkpointing, the MLP tiles)."""
    hf = _hf_model(model)
    disable = getattr(hf, "activation_checkpointing_disable", None) or hf.gradient_checkpointing_disable
    disable()
    untile_mlp(model)
