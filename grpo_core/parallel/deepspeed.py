"""``[distributed] engine = "deepspeed"``: DeepSpeed's ZeRO engine under the trainer, and the run config mapped
onto DeepSpeed's JSON config.

:func:`deepspeed_config` turns a :class:`~grpo_core.config.RunConfig` into the dict ``deepspeed.initialize``
takes (micro-batch, gradient accumulation, clipping, ZeRO stage, optimizer offload, AdamW). A user's own JSON
(``deepspeed_config``) is laid over it; a key it sets that contradicts the run config is refused with one line
naming the key (ConfigError, exit 2).

What DeepSpeed owns and what the trainer keeps (grpo_core.trainer):

- DeepSpeed: the optimizer (AdamW; DeepSpeedCPUAdam when its state is offloaded to the CPU), its state and the
  gradients partitioned over the ranks (ZeRO 1-2), gradient clipping and the learning-rate schedule's steps
  (:func:`initialize`). The trainer marks the last backward of each optimizer step
  (``set_gradient_accumulation_boundary``) and multiplies each loss by the number of processes: DeepSpeed
  averages the ranks' gradients, and the trainer's per-row losses are already shares of the whole step's
  (gradients summed, as under DDP).
- The trainer: precision (``model.dtype``, its fp32 master weights and autocast; DeepSpeed's own bf16/fp16
  sections stay off), generation and the no-grad passes on the model itself (ZeRO 1-2 keep the weights whole on
  every rank; stage 3 shards them and is refused), checkpoints (:func:`optimizer_states` gathers each rank's
  partition of the optimizer on rank 0; :func:`load_state` puts them back).

One process uses the engine too (the 8-GB-GPU recipe: ZeRO-2 with the optimizer on the CPU); it joins a
process group of one (grpo_core.parallel.distributed.init_process_group).
"""

from __future__ import annotations

import contextlib
import enum
import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from grpo_core.parallel.distributed import all_gather_objects, group_of_one, passes_to_add
from grpo_core.parallel.engine import Engine, learning_rate_schedule
from grpo_core.policy.models import trainable_parameters, uses_fp16
from grpo_core.run_folder.checkpoints import CheckpointError
from grpo_rewards.errors import ConfigError, Problem

INSTALL = "pip install '.[deepspeed]' (DeepSpeed builds from source: DS_BUILD_OPS=0 pip install --no-build-isolation)"


def _refuse(cfg: Any, key: str, why: str) -> ConfigError:
    return ConfigError([Problem(str(getattr(cfg, "path", "<config>")), None, key, why)])


def micro_batch_per_rank(cfg: Any, world_size: int) -> int:
    """Sequences per micro-batch on one rank: the rank's share of a step's sequences over the accumulation."""
    g = cfg.grpo
    if g.prompts_per_step % world_size:
        raise _refuse(cfg, "grpo.prompts_per_step", f"must be a multiple of the number of processes ({world_size}), "
                                                    f"got {g.prompts_per_step}")
    per_rank = g.prompts_per_step // world_size * cfg.generation.num_generations
    if per_rank % g.gradient_accumulation_steps:
        raise _refuse(cfg, "grpo.gradient_accumulation_steps",
                      f"must divide each process's {per_rank} sequences, got {g.gradient_accumulation_steps}")
    return per_rank // g.gradient_accumulation_steps


def deepspeed_config(cfg: Any, world_size: int = 1) -> dict[str, Any]:
    """The DeepSpeed config dict of the run config ``cfg`` on ``world_size`` processes."""
    g, ds = cfg.grpo, cfg.distributed
    micro = micro_batch_per_rank(cfg, world_size)
    adamw: dict[str, Any] = {"lr": g.learning_rate, "betas": [g.adam_beta1, g.adam_beta2],
                             "weight_decay": g.weight_decay}
    out: dict[str, Any] = {
        "train_micro_batch_size_per_gpu": micro,
        "gradient_accumulation_steps": g.gradient_accumulation_steps,
        "train_batch_size": micro * g.gradient_accumulation_steps * world_size,
        "gradient_clipping": g.max_grad_norm,
        "bf16": {"enabled": False},  # precision is the trainer's (model.dtype): see the module docs
        "fp16": {"enabled": False},
        "optimizer": {"type": "AdamW", "params": adamw},
        "zero_optimization": {"stage": ds.zero_stage},
        "steps_per_print": 2**31 - 1,  # the trainer logs its own metrics
    }
    if ds.offload_optimizer != "none":
        if ds.zero_stage == 0:
            raise _refuse(cfg, "distributed.offload_optimizer", "needs zero_stage 1 or 2 (stage 0 shards "
                                                                "nothing and offloads nothing)")
        out["zero_optimization"]["offload_optimizer"] = {"device": ds.offload_optimizer, "pin_memory": True}
    else:
        adamw["torch_adam"] = True  # torch's AdamW (DeepSpeed's fused one needs a CUDA build)
    if ds.deepspeed_config:
        _overlay(cfg, out, _read_json(cfg, ds.deepspeed_config))
    if not isinstance(out["zero_optimization"], dict):
        raise _refuse(cfg, "distributed.deepspeed_config", "zero_optimization must be a JSON object, got "
                                                           f"{out['zero_optimization']!r}")
    if out["zero_optimization"].get("stage") == 3:
        raise _refuse(cfg, "distributed.deepspeed_config", "zero_optimization.stage 3 shards the weights, which "
                                                           "generation needs whole on every rank; use 0-2, or engine = "
                                                           "\"fsdp2\" to shard them")
    return out


# the mapped keys a user's JSON may not contradict: they come from the run config's own keys
PINNED = {"train_micro_batch_size_per_gpu": "grpo.prompts_per_step / generation.num_generations",
          "gradient_accumulation_steps": "grpo.gradient_accumulation_steps", "train_batch_size": "grpo.prompts_per_step",
          "gradient_clipping": "grpo.max_grad_norm", "bf16": "model.dtype (the trainer's own mixed precision)",
          "fp16": "model.dtype (the trainer's own mixed precision)", "scheduler": "grpo.lr_scheduler"}


def _read_json(cfg: Any, path: str) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).expanduser().read_text())
    except OSError as exc:
        raise _refuse(cfg, "distributed.deepspeed_config", f"cannot read {path}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise _refuse(cfg, "distributed.deepspeed_config", f"{path} is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise _refuse(cfg, "distributed.deepspeed_config", f"{path} must hold a JSON object")
    return data


def _overlay(cfg: Any, out: dict[str, Any], user: dict[str, Any]) -> None:
    for key, value in user.items():
        if key in PINNED and value != "auto" and value != out.get(key):
            mapped = f"{out[key]!r} from {PINNED[key]}" if key in out else f"the trainer's own ({PINNED[key]})"
            raise _refuse(cfg, "distributed.deepspeed_config",
                          f"{key} = {value!r} contradicts {mapped}; leave it out or set \"auto\"")
        if key in PINNED:
            continue
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = {**out[key], **value}
        else:
            out[key] = value


def check_trainable(cfg: Any) -> None:
    """Raise the one-line ConfigError saying why ``engine = "deepspeed"`` cannot train here (nothing otherwise):
    DeepSpeed not installed, or 4-bit weights."""
    if cfg.distributed.engine != "deepspeed":
        return
    import importlib.util

    if importlib.util.find_spec("deepspeed") is None:
        raise _refuse(cfg, "distributed.engine", f"\"deepspeed\" needs the deepspeed package: {INSTALL}")
    if cfg.quantization.load_in_4bit:
        raise _refuse(cfg, "quantization.load_in_4bit", "4-bit weights do not go through DeepSpeed's engine; use "
                                                        "engine = \"ddp\" or 16-bit weights")


def check_precision(model: torch.nn.Module, cfg: Any) -> None:
    """Refuse (``ConfigError`` naming ``model.dtype``) gradients through fp16: the trainer's loss scaling
    cannot see DeepSpeed's partitioned gradients."""
    if uses_fp16(model):
        raise _refuse(cfg, "model.dtype", "float16 training needs loss scaling, which the trainer does not run "
                                          "inside engine = \"deepspeed\"; use bfloat16 or float32")


def initialize(module: torch.nn.Module, params: list[torch.nn.Parameter], cfg: Any, world_size: int,
               schedule: Any) -> Any:
    """DeepSpeed's engine over ``module`` (the log-prob module) training ``params``; ``schedule(optimizer)``
    builds the learning-rate schedule, which the engine steps with the optimizer."""
    import os

    import deepspeed

    # a process group of one (not torchrun's): DeepSpeed still checks for a local rank in the environment; set it
    # for the call only (left set, it would tell other libraries, accelerate's for one, that torchrun started us)
    lent = world_size == 1 and "LOCAL_RANK" not in os.environ
    if lent:
        os.environ["LOCAL_RANK"] = "0"
    try:
        engine, *_ = deepspeed.initialize(model=module, model_parameters=params, lr_scheduler=schedule,
                                          config=deepspeed_config(cfg, world_size), dist_init_required=False)
    finally:
        if lent:
            del os.environ["LOCAL_RANK"]
    return engine


def _plain(value: Any) -> Any:
    """``value`` with what ``torch.load(weights_only=True)`` cannot read left out (DeepSpeed's loss-scaler and
    fragment objects, rebuilt on load) and enums as their values; ``_DROP`` for an object left out."""
    if isinstance(value, enum.Enum):
        return value.value
    if value is None or isinstance(value, (torch.Tensor, bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [item for item in map(_plain, value) if item is not _DROP]
    if isinstance(value, dict):
        return {key: item for key, item in ((k, _plain(v)) for k, v in value.items()) if item is not _DROP}
    return _DROP


_DROP = object()


def optimizer_states(engine: Any, world: Any) -> dict[str, Any]:
    """Every rank's partition of the ZeRO optimizer (its AdamW state and fp32 weights), gathered on every rank
    (a collective): what a checkpoint's ``optimizer.pt`` holds."""
    mine = _plain(engine.optimizer.state_dict())
    return {"deepspeed_partitions": all_gather_objects(mine, world) if world.enabled else [mine]}


def load_state(engine: Any, model: torch.nn.Module, rank: int, weights: dict[str, torch.Tensor],
               optimizer_state: dict[str, Any] | None) -> None:
    """Put a checkpoint's trainable weights into ``model`` and its optimizer partitions into the engine
    (``rank``'s own where the optimizer is not partitioned: ZeRO stage 0)."""
    with torch.no_grad():
        for name, param in model.named_parameters():
            if not param.requires_grad:
                continue
            param.copy_(weights[name].to(param.device, param.dtype))
    if optimizer_state is None:
        return
    parts = optimizer_state.get("deepspeed_partitions")
    if parts is None:
        raise CheckpointError("the checkpoint's optimizer state was not written by engine = \"deepspeed\"; resume "
                              "it with the engine that wrote it")
    optimizer = engine.optimizer
    if not hasattr(optimizer, "loss_scaler"):  # stage 0: DeepSpeed's AdamW as it is, the same on every rank
        optimizer.load_state_dict(parts[rank])
        return
    for part in parts:  # the objects left out when saved: this engine's own
        part.setdefault("loss_scaler", optimizer.loss_scaler)
    optimizer.load_state_dict(parts, load_optimizer_states=True, load_from_fp32_weights=True)


class DeepSpeedEngine(Engine):
    """``[distributed] engine = "deepspeed"``, one process or several: the module docs."""

    @staticmethod
    def check(config: Any) -> None:
        check_trainable(config)

    def wrap(self, module: torch.nn.Module) -> torch.nn.Module:
        check_precision(self.model, self.config)
        if not self.world.enabled:  # DeepSpeed needs a process group: one of this process alone
            self.owns_group = group_of_one(self.config.distributed.backend)
        try:
            return initialize(module, trainable_parameters(self.model), self.config, self.world.size,
                              functools.partial(learning_rate_schedule, config=self.config))
        except BaseException:
            self.close()
            raise

    def build_optimizer(self, params: list[torch.nn.Parameter]) -> tuple[Any, Any]:
        return self.module.optimizer, self.module.lr_scheduler  # partitioned; the engine steps the schedule

    def accumulating(self, last: bool) -> Any:
        self.module.set_gradient_accumulation_boundary(last)
        return contextlib.nullcontext()

    def backward(self, loss: torch.Tensor) -> None:
        """DeepSpeed averages the ranks' gradients (and would divide by the accumulation): the loss times the
        number of processes makes them the sum, as each rank's loss is its share of the step's."""
        self.module.backward(loss * self.world.size, scale_wrt_gas=False)

    def optimizer_step(self) -> float:
        """DeepSpeed clips, steps the optimizer and the schedule and clears the gradients in its own step."""
        engine, norm = self.module, None
        if not engine.zero_optimization():  # stage 0 clips without reporting the norm: the summed gradients'
            norm = torch.nn.utils.get_total_norm([p.grad for p in self.params if p.grad is not None])
        engine.step()
        norm = engine.get_global_grad_norm() if norm is None else norm
        return float("nan") if norm is None else float(norm)

    def idle_passes(self, passes: int) -> int:
        return passes_to_add(passes, self.world)  # ZeRO reduces on each backward: as many on every rank

    def checkpoint_state(self) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        return None, optimizer_states(self.module, self.world)  # weights whole on every rank; partitions gathered

    def state_loader(self) -> Callable[..., None] | None:
        return functools.partial(load_state, self.module, self.model, self.world.rank)
