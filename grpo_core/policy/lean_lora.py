"""Sampling through LoRA layers without peft's per-call bookkeeping.

``with lean_lora(model): ...`` gives each plain LoRA linear layer of ``model`` a forward that computes what
peft's own computes in eval mode, ``base(x) + lora_B(lora_A(x)) * scaling`` (the adapter's input cast to its
weights' dtype, the sum cast back to the base result's), as ``F.linear`` calls on the layers' current weights:
the same operations in the same order, so the same bits (tests/core/test_lean_lora.py), without peft's argument
checks, adapter loop, dropout and sub-module calls. Decoding runs a few rows at a time, where that bookkeeping
is a visible share of each step (about 8% of SmolLM2-135M's sampling time with LoRA on every linear layer).

Only layers in eval mode with one active adapter, no variant (DoRA, ...), not merged, input casting on, over a
plain ``nn.Linear`` base (not a 4-bit one) are touched; any other layer keeps peft's forward. The weights are
read at each call, so a sharded model gathered for sampling (FSDP2) is read as gathered. On exit every layer
has peft's forward again.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F


def _plain_lora_layers(model: torch.nn.Module) -> list[tuple[Any, str]]:
    try:
        from peft.tuners.lora import Linear as LoraLinear
    except ImportError:
        return []
    out = []
    for layer in model.modules():
        if not isinstance(layer, LoraLinear) or layer.training or layer.merged or layer.disable_adapters:
            continue
        active = [name for name in layer.active_adapters if name in layer.lora_A]
        if (len(active) != 1 or active[0] in layer.lora_variant or type(layer.base_layer) is not torch.nn.Linear
                or not getattr(layer, "cast_input_dtype_enabled", True)):
            continue
        out.append((layer, active[0]))
    return out


def _forward(layer: Any, name: str) -> Any:
    base, lora_a, lora_b, scaling = layer.base_layer, layer.lora_A[name], layer.lora_B[name], layer.scaling[name]

    def forward(x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        result = F.linear(x, base.weight, base.bias)
        a = lora_a.weight
        x = x if x.dtype == a.dtype else x.to(a.dtype)
        return (result + F.linear(F.linear(x, a, lora_a.bias), lora_b.weight, lora_b.bias) * scaling).to(result.dtype)

    return forward


@contextlib.contextmanager
def lean_lora(model: torch.nn.Module) -> Iterator[int]:
    """Within the block, the plain LoRA layers of ``model`` run the lean forward; yields how many."""
    layers = _plain_lora_layers(model)
    for layer, name in layers:
        layer.forward = _forward(layer, name)
    try:
        yield len(layers)
    finally:
        for layer, _ in layers:
            del layer.forward  # the class's (peft's) forward again
