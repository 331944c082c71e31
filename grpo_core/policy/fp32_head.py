"""``[model] cast_lm_head_to_fp32`` (TRL's name, the ScaleRL recipe, 2510.13786): the language-model head in float32.

:func:`cast_head_to_fp32` casts the head's weights to float32 and makes its forward take float32 inputs with
autocast off, so the logits of generation, of the full-logits path and of the chunked head
(:func:`grpo_core.policy.logprobs.completion_logprobs`, which reads :data:`FP32_HEAD` on the head) are float32
products of float32 operands. With tied embeddings the input embeddings share those float32 weights; their output
is cast back to the model's dtype, as TRL does. A LoRA adapter on the head is refused when the config is read
(TRL refuses it too). Applied to the policy and to a full fine-tune's separate reference model.
"""

from __future__ import annotations

import types
from typing import Any

import torch

FP32_HEAD = "_grpo_fp32_head"  # set on a head cast by cast_head_to_fp32


def _fp32_forward(head: torch.nn.Linear, hidden: torch.Tensor) -> torch.Tensor:
    """The head's forward: float32 inputs and weights, autocast off."""
    with torch.autocast(head.weight.device.type, enabled=False):
        bias = None if head.bias is None else head.bias.float()
        return torch.nn.functional.linear(hidden.float(), head.weight.float(), bias)


def cast_head_to_fp32(model: Any) -> None:
    """Cast ``model``'s output embeddings (a plain transformers causal LM) to float32, in place (module docs)."""
    head = model.get_output_embeddings()
    if getattr(head, FP32_HEAD, False):
        return
    original = head.weight.dtype
    head.float()
    head.forward = types.MethodType(_fp32_forward, head)  # bound: a deep copy of the model rebinds it to its copy
    setattr(head, FP32_HEAD, True)
    tied = getattr(model.config, "tie_word_embeddings", False)
    if tied and original != torch.float32:
        model.get_input_embeddings().register_forward_hook(lambda module, args, output: output.to(original))
