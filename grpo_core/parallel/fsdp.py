"""Sharded data-parallel training with torch's FSDP2 (``torch.distributed.fsdp.fully_shard``):
``[distributed] engine = "fsdp2"``.

:func:`shard` applies ``fully_shard`` to each decoder layer (the classes the model names in
``_no_split_modules``), then to the :class:`~grpo_core.parallel.distributed.LogProbModule` around the model, so that the
root whose forward runs is the log-prob computation itself: the embedding, final norm and LM head (the root's
own parameters) stay gathered for the whole forward, which the chunked head needs (it reads the head weight
directly, not through ``model.forward``). Each layer is gathered in its forward and again in its backward
(activation checkpointing re-runs the forward there), and each backward reduce-scatters the gradients as a
*sum* (gradient divide factor 1: each rank's loss is already its exact share of the single-process loss, as
with DDP). Frozen parameters (LoRA's base) are sharded like the others and get no gradient.

Every rank must run the same sequence of sharded forwards and backwards (each one is a collective). What can
differ across ranks runs on the whole model instead, gathered once (:func:`gathered`): generation (rows end
at different times), the held-out evaluation, the old-policy and reference log-probs (each rank's slice count
depends on its own completion length), and the optimizer step's forward/backward passes are padded to the
largest count over the ranks with passes that contribute nothing (:func:`~grpo_core.parallel.distributed.passes_to_add`).

Checkpoints hold full, unsharded state dicts (``torch.distributed.checkpoint.state_dict``; :func:`full_state`
gathers them on rank 0, :func:`load_full_state` loads them back on every rank), so a checkpoint looks the same
as one written by one process or by DDP, and resumes with the same number of processes.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import torch

from grpo_core.parallel.distributed import passes_to_add
from grpo_core.parallel.engine import Engine
from grpo_core.policy.models import load_model_and_tokenizer, uses_fp16
from grpo_rewards.errors import ConfigError, Problem


def decoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The model's repeated blocks: the modules whose class the (base) model names in ``_no_split_modules``."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    names = set(getattr(base, "_no_split_modules", None) or ())
    return [m for m in model.modules() if type(m).__name__ in names]


def fsdp_modules(root: torch.nn.Module) -> list[Any]:
    from torch.distributed.fsdp import FSDPModule

    return [m for m in root.modules() if isinstance(m, FSDPModule)]


def check_precision(model: torch.nn.Module, cfg: Any) -> None:
    """Refuse (``ConfigError`` naming ``model.dtype``) gradients through fp16: their loss scaling would skip or
    take a step on each rank's own shard of the gradients, not on all of them."""
    if uses_fp16(model):
        raise ConfigError([Problem(cfg.path, None, "model.dtype", "float16 training needs loss scaling, which "
                                   "engine = \"fsdp2\" does not shard; use bfloat16 or float32, or engine = \"ddp\"")])


def shard(module: torch.nn.Module, world: Any) -> Any:
    """``fully_shard`` each decoder layer of ``module.model``, then ``module`` (the root); gradients summed
    across ranks. Returns ``module`` (now an ``FSDPModule``). Parameters are replaced by sharded ones: build the
    optimizer from the model's parameters after this."""
    from torch.distributed.fsdp import fully_shard

    for layer in decoder_layers(module.model):
        fully_shard(layer)
    root = fully_shard(module)
    for m in fsdp_modules(root):  # a sum, not FSDP's mean over the ranks, reduced with ReduceOp.SUM (gloo has no
        m.set_gradient_divide_factor(1.0)  # PREMUL_SUM, which a divide factor selects otherwise)
        m.set_force_sum_reduction_for_comms(True)
    # settle which module is the root now: the first forward may be a layer's, inside gathered()
    root._get_fsdp_state()._lazy_init()
    return root


def _default_resharding(root: Any) -> None:
    """``fully_shard``'s defaults: every layer reshards after its forward, the root does not."""
    root.set_reshard_after_forward(True)
    root.set_reshard_after_forward(False, recurse=False)


@contextlib.contextmanager
def gathered(root: Any) -> Iterator[None]:
    """The whole model unsharded on every rank for the block (one all-gather per sharded module on entry):
    forwards inside it, through the root or any part of the model, run no collective, so ranks may run
    different numbers of them. Every rank must enter and leave it together."""
    modules = fsdp_modules(root)
    root.set_reshard_after_forward(False)
    for m in modules:
        m.unshard()
    try:
        yield
    finally:
        for m in modules:
            m.reshard()
        _default_resharding(root)



def full_value(value: Any) -> Any:
    """A DTensor's full value (a collective), anything else as it is."""
    return value.full_tensor() if hasattr(value, "full_tensor") else value


def full_state(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> tuple[dict[str, Any], dict[str, Any]]:
    """The model's and the optimizer's full state dicts, on the host, on rank 0 (empty elsewhere); every rank
    must call it. Keys are ``model``'s parameter names (the optimizer's state is keyed by them too)."""
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        get_model_state_dict,
        get_optimizer_state_dict,
    )

    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    return (get_model_state_dict(model, options=options),
            get_optimizer_state_dict(model, optimizer, options=options))


def load_full_state(model: torch.nn.Module, optimizer: torch.optim.Optimizer | None, weights: dict[str, Any],
                    optimizer_state: dict[str, Any] | None) -> None:
    """Load full state dicts (as :func:`full_state` gives them; ``weights`` may hold only the trainable
    parameters) into the sharded ``model`` and its ``optimizer``, on every rank."""
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        set_model_state_dict,
        set_optimizer_state_dict,
    )

    set_model_state_dict(model, weights, options=StateDictOptions(full_state_dict=True, strict=False))
    if optimizer is not None and optimizer_state is not None:
        set_optimizer_state_dict(model, optimizer, optimizer_state, options=StateDictOptions(full_state_dict=True))


def plain_model(model: torch.nn.Module, cfg: Any, world: Any) -> torch.nn.Module | None:
    """Rank 0: the run's model loaded afresh (``cfg``) with the sharded ``model``'s full weights, a plain
    model to save (merging LoRA included); other ranks: None. Every rank must call it."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    if not world.is_main:
        return None
    with torch.random.fork_rng():  # a fresh LoRA initialisation, overwritten below
        plain, _ = load_model_and_tokenizer(cfg)
    plain.load_state_dict(state)
    return plain


class FSDP2Engine(Engine):
    """``[distributed] engine = "fsdp2"`` with several processes: the module docs."""

    needs_processes: ClassVar[bool] = True
    holds_whole_model: ClassVar[bool] = False

    def wrap(self, module: torch.nn.Module) -> torch.nn.Module:
        check_precision(self.model, self.config)
        return shard(module, self.world)

    def whole_model(self) -> Any:
        return gathered(self.module)

    def full_value(self, value: Any) -> Any:
        return full_value(value)

    def idle_passes(self, passes: int) -> int:
        return passes_to_add(passes, self.world)

    def checkpoint_state(self) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        return full_state(self.model, self.optimizer)  # full state dicts, gathered on rank 0

    def state_loader(self) -> Callable[..., None] | None:
        return functools.partial(load_full_state, self.model, self.optimizer)

    def plain_model(self) -> torch.nn.Module | None:
        return plain_model(self.model, self.config, self.world)  # rank 0: a plain copy with the full weights
