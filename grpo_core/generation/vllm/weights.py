"""The policy's weights under the names vLLM loads (Hugging Face checkpoint names), changed ones only.

Full fine-tuning: every parameter as it is. LoRA: each adapted layer's base weight plus the
adapter's delta (``W + scale * B @ A``, peft's ``get_delta_weight``), computed out of place, so the
policy is never merged or unmerged (no drift of the base weights from repeated merge/unmerge) and
nothing goes through disk. The LoRA tensors themselves are not sent: vLLM knows no such layers.

Change tracking uses the tensors' version counters (every in-place write, such as an optimizer
step or a checkpoint restore, bumps them), so a sync after a step sends what that step changed:
all trained tensors for full fine-tuning, the adapted blocks for LoRA (the frozen rest only once).
vLLM fuses sibling projections (``q/k/v_proj`` into ``qkv_proj``, ``gate/up_proj`` into
``gate_up_proj``) and reloads a fused layer only from all of its parts, so a change sends the
whole block it sits in (every tensor sharing the name's parent module's parent: one attention or
MLP block, or one decoder layer's norms). The first sync sends everything (the engine's copy then
equals the policy whatever it loaded).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch

_WRAPPERS = ("_checkpoint_wrapped_module.", "_orig_mod.")


def clean_name(name: str) -> str:
    """``name`` without the wrappers' parts (activation checkpointing, ``torch.compile``)."""
    for wrapper in _WRAPPERS:
        name = name.replace(wrapper, "")
    return name


def _lora_layers(model: Any) -> dict[str, Any]:
    """``{module path: peft LoraLayer}`` of a peft model ({} for a plain model)."""
    try:
        from peft.tuners.lora import LoraLayer
    except ImportError:
        return {}
    return {name: m for name, m in model.named_modules() if isinstance(m, LoraLayer)}


class WeightSync:
    """``changed()``: ``(vllm_name, tensor)`` pairs for what changed since the last call (see the module docs)."""

    def __init__(self, model: Any):
        self.model = model
        self.peft = hasattr(model, "peft_config") and hasattr(model, "get_base_model")
        self._seen: dict[str, int] = {}

    def _version(self, tensors: list[torch.Tensor]) -> int:
        return sum(t._version for t in tensors)

    def _entries(self) -> Iterator[tuple[str, list[torch.Tensor], Any]]:
        """``(vllm name, tensors whose versions decide "changed", producer of the value)``."""
        if not self.peft:
            for name, p in self.model.named_parameters():
                yield clean_name(name), [p], p.detach
            return
        base = self.model.get_base_model()
        layers = _lora_layers(base)
        inside = {f"{path}.{sub}" for path in layers for sub, _ in layers[path].named_parameters()}
        for path, layer in layers.items():
            adapter = layer.active_adapters[0] if layer.active_adapters else None
            weight = layer.get_base_layer().weight
            if adapter is None or adapter not in layer.lora_A or layer.merged:
                yield clean_name(f"{path}.weight"), [weight], weight.detach
                continue
            lora = [layer.lora_A[adapter].weight, layer.lora_B[adapter].weight]
            yield clean_name(f"{path}.weight"), [weight, *lora], _merged(layer, adapter, weight)
            bias = getattr(layer.get_base_layer(), "bias", None)
            if bias is not None:
                yield clean_name(f"{path}.bias"), [bias], bias.detach
        for name, p in base.named_parameters():
            if name not in inside:
                yield clean_name(name), [p], p.detach

    @torch.no_grad()
    def changed(self) -> list[tuple[str, torch.Tensor]]:
        """``(vllm name, value)`` of every tensor in a block where something changed since the last call."""
        entries = list(self._entries())
        versions = {name: self._version(tensors) for name, tensors, _ in entries}
        dirty = {block(name) for name, version in versions.items() if self._seen.get(name) != version}
        self._seen.update(versions)
        return [(name, value()) for name, _, value in entries if block(name) in dirty]

    def reset(self) -> None:
        """Forget what was sent: the next ``changed()`` yields every tensor."""
        self._seen.clear()


def block(name: str) -> str:
    """The unit vLLM reloads together: ``model.layers.3.self_attn.q_proj.weight`` -> ``model.layers.3.self_attn``."""
    return name.rsplit(".", 2)[0] if name.count(".") >= 2 else name


def _merged(layer: Any, adapter: str, weight: torch.Tensor) -> Any:
    def value() -> torch.Tensor:
        delta = layer.get_delta_weight(adapter)
        return (weight.float() + delta.float()).to(weight.dtype)

    return value
