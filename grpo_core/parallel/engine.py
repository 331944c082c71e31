"""The :class:`Engine` interface: how the policy update runs on this process and its peers.

The trainer's loop (:mod:`grpo_core.trainer`) is the same for every engine; an engine owns what differs:

``setup``              wrap the log-prob module (DDP, FSDP2's sharding, DeepSpeed's engine), build the optimizer
                       and the learning-rate schedule
``forward``            the training log-probs through the wrapped module (the one that reduces the gradients)
``whole_model``        a block where ranks may run different numbers of forwards (generation, no-grad passes)
``accumulating``       the context of one forward/backward (``last``: the optimizer step's last backward)
``backward``           one backward
``optimizer_step``     clip, step, schedule, zero the gradients; returns the gradient norm before clipping
``idle_passes``        how many forward/backwards that contribute nothing this rank adds (a collective each)
``checkpoint_state``   the full model / optimizer state a checkpoint holds, when not the model's own
``state_loader``       how a checkpoint's state goes back in, when not as ``restore`` puts it by default
``plain_model``        the model to save (whole weights; None on ranks that save nothing)
``close``              destroy the process group this engine created

This base class is the single-process engine: the model as it is, torch's AdamW, loss scaling for fp16.
Engines are registered by name through the ``grpo_register_engines`` hook (:mod:`grpo_core.plugin` registers
``ddp``, ``fsdp2`` and ``deepspeed``) and picked with ``[distributed] engine``; an engine with
``needs_processes`` (DDP, FSDP2) gives way to this one when the run has a single process.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from typing import Any, ClassVar

import torch

from grpo_core.parallel.distributed import World, destroy_process_group
from grpo_core.policy.models import uses_fp16


def learning_rate_schedule(optimizer: torch.optim.Optimizer, config: Any) -> Any:
    """The run's learning-rate schedule of ``optimizer`` over its optimizer steps (``config``: a RunConfig)."""
    from transformers import get_scheduler  # heavy: transformers loads on first use

    g = config.grpo
    total = g.max_steps * config.optimizer_steps_per_step
    return get_scheduler(g.lr_scheduler, optimizer, num_warmup_steps=math.ceil(g.warmup_ratio * total),
                         num_training_steps=total)


class Engine:
    """One process, the model as it is (the other engines refine it; see the module docs)."""

    #: with a single process, the base engine runs in this one's place (nothing to wrap or reduce)
    needs_processes: ClassVar[bool] = False
    holds_whole_model: ClassVar[bool] = True  # every rank's model has all the weights (FSDP2: shards only)

    def __init__(self, config: Any, world: World, owns_group: bool = False):
        self.config, self.world, self.owns_group = config, world, owns_group
        self.model: Any = None
        self.module: Any = None
        self.params: list[torch.nn.Parameter] = []

    @staticmethod
    def check(config: Any) -> None:
        """Refuse, before anything loads, what this engine cannot run (a ConfigError naming the key)."""
    def setup(self, model: torch.nn.Module, module: torch.nn.Module,
              trainable: Callable[[torch.nn.Module], list[torch.nn.Parameter]]) -> None:
        """Wrap ``module`` (the log-prob module around ``model``), then build the optimizer over
        ``trainable(model)`` (taken after wrapping: FSDP2 replaces the parameters) and its schedule."""
        self.model = model
        self.module = self.wrap(module)
        self.params = trainable(model)
        self.optimizer, self.scheduler = self.build_optimizer(self.params)
        # fp16 gradients underflow without loss scaling (bf16 and fp32 need none)
        self.scaler = torch.amp.GradScaler(next(model.parameters()).device.type, enabled=uses_fp16(model))

    def wrap(self, module: torch.nn.Module) -> torch.nn.Module:
        return module

    def build_optimizer(self, params: list[torch.nn.Parameter]) -> tuple[Any, Any]:
        g = self.config.grpo
        optimizer = torch.optim.AdamW(params, lr=g.learning_rate, betas=(g.adam_beta1, g.adam_beta2),
                                      weight_decay=g.weight_decay)
        return optimizer, learning_rate_schedule(optimizer, self.config)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.module(*args, **kwargs)

    def whole_model(self) -> Any:
        return contextlib.nullcontext()

    def accumulating(self, last: bool) -> Any:
        return contextlib.nullcontext()

    def backward(self, loss: torch.Tensor) -> None:
        self.scaler.scale(loss).backward()

    def optimizer_step(self) -> float:
        self.scaler.unscale_(self.optimizer)
        grad_norm = torch.nn.utils.clip_grad_norm_(self.params, self.config.grpo.max_grad_norm)
        self.scaler.step(self.optimizer)  # skipped (and the scale lowered) on inf/NaN gradients
        self.scaler.update()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return float(self.full_value(grad_norm))

    def full_value(self, value: Any) -> Any:
        return value

    def idle_passes(self, passes: int) -> int:
        return 0

    def checkpoint_state(self) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        return None, None

    def state_loader(self) -> Callable[..., None] | None:
        return None

    def plain_model(self) -> torch.nn.Module | None:
        return self.model

    def close(self) -> None:
        if self.owns_group:
            destroy_process_group()
            self.owns_group = False


def engine_class(config: Any, world: World, registry: Any) -> type[Engine]:
    """The engine ``[distributed] engine`` names (registered through ``grpo_register_engines``), or the base
    engine for a single process when that one needs several."""
    name = config.distributed.engine
    engines = getattr(registry, "engines", {}) if registry is not None else {}
    if name not in engines:
        raise ValueError(f"distributed.engine: no engine {name!r} registered (registered: "
                         f"{', '.join(sorted(engines)) or 'none'})")
    cls = engines[name]()  # registered as a factory returning the class, so that nothing heavy loads early
    return Engine if cls.needs_processes and not world.enabled else cls
