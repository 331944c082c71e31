"""Moving the KL reference towards the policy during training: ``[grpo] sync_ref_model`` (TRL's
``SyncRefModelCallback``, from TR-DPO, 2404.09656).

Every ``ref_model_sync_steps`` optimizer steps the reference becomes ``alpha * policy + (1 - alpha) * reference``
(``alpha`` = ``ref_model_mixup_alpha``), parameter by parameter, in place. The reference is the frozen copy
:func:`grpo_core.policy.models.reference_model` holds for a full fine-tune; with LoRA there is no separate
reference (it is the base, adapter disabled), and with ``beta = 0`` no reference at all: both are refused when the
run config is read, as TRL raises on them. The trainer builds :func:`reference_sync` once and calls what it
returns after each optimizer step; with the option off it returns None and the trainer calls nothing.

On resume the reference restarts from the starting model, as TRL's does (neither checkpoint holds the reference).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from grpo_core.policy.models import is_peft, reference_model
from grpo_rewards.errors import ConfigError

if TYPE_CHECKING:
    from grpo_core.config import RunConfig


def mix_into(reference: torch.nn.Module, policy: torch.nn.Module, alpha: float) -> None:
    """``reference = alpha * policy + (1 - alpha) * reference``, every parameter in place (matched by name)."""
    ours = dict(policy.named_parameters())
    for name, target in reference.named_parameters():
        target.data.mul_(1.0 - alpha).add_(ours[name].data.to(target.dtype), alpha=alpha)


def reference_sync(cfg: RunConfig, model: Any, whole_model: Callable[[], Any] | None = None
                   ) -> Callable[[int], None] | None:
    """What to call after optimizer step ``n`` (counted over the run, from 1): the mix every ``ref_model_sync_steps``
    steps; None when ``sync_ref_model`` is off. ``whole_model`` gathers a sharded policy's weights around it."""
    g = cfg.grpo
    if not g.sync_ref_model:
        return None
    if is_peft(model):  # a model handed over with its adapter (the Python API): the run config could not tell
        raise ConfigError(f"{cfg.path}: grpo.sync_ref_model: the policy is a LoRA (PEFT) model, whose reference is "
                          "its base with the adapter disabled: there is no separate reference to move")
    every, alpha = g.ref_model_sync_steps, g.ref_model_mixup_alpha

    def after_optimizer_step(n: int) -> None:
        if n % every:
            return
        with torch.no_grad(), (whole_model or contextlib.nullcontext)(), reference_model(model, cfg) as ref:
            mix_into(ref, model, alpha)

    return after_optimizer_step
