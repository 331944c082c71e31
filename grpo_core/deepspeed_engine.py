"""``[distributed] engine = "deepspeed"``: the run config mapped onto DeepSpeed's JSON config, and the refusal to
train with it.

:func:`deepspeed_config` turns a :class:`~grpo_core.config.RunConfig` into the dict ``deepspeed.initialize``
takes (micro-batch, gradient accumulation, clipping, bf16/fp16, ZeRO stage, optimizer offload, AdamW). A user's
own JSON (``deepspeed_config``) is laid over it; a key it sets that contradicts the run config is refused with
one line naming the key (ConfigError, exit 2). Training with the engine is refused by :func:`check_trainable`:
DeepSpeed's engine is not wired into the trainer yet (ZeRO-2 with CPU optimizer offload does run on
CPU with 2 gloo processes, DS_ACCELERATOR=cpu, DeepSpeed 0.19.8; the trainer integration is what is missing).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from grpo_rewards.errors import ConfigError, Problem

WHY_NOT_TRAINABLE = ("'deepspeed' cannot train yet: DeepSpeed's engine is not wired into the grpo_core trainer "
                     "(only its config mapping is, grpo_core.deepspeed_engine); use engine = \"ddp\" or \"fsdp2\"")


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
    dtype = cfg.model.dtype
    out: dict[str, Any] = {
        "train_micro_batch_size_per_gpu": micro,
        "gradient_accumulation_steps": g.gradient_accumulation_steps,
        "train_batch_size": micro * g.gradient_accumulation_steps * world_size,
        "gradient_clipping": g.max_grad_norm,
        "bf16": {"enabled": dtype == "bfloat16"},
        "fp16": {"enabled": dtype == "float16"},
        "optimizer": {"type": "AdamW", "params": {"lr": g.learning_rate, "betas": [g.adam_beta1, g.adam_beta2],
                                                  "weight_decay": g.weight_decay}},
        "zero_optimization": {"stage": ds.zero_stage},
    }
    if ds.offload_optimizer != "none":
        if ds.zero_stage == 0:
            raise _refuse(cfg, "distributed.offload_optimizer", "needs zero_stage 1, 2 or 3 (stage 0 shards "
                                                                "nothing and offloads nothing)")
        out["zero_optimization"]["offload_optimizer"] = {"device": ds.offload_optimizer, "pin_memory": True}
    if ds.deepspeed_config:
        _overlay(cfg, out, _read_json(cfg, ds.deepspeed_config))
    return out


# the mapped keys a user's JSON may not contradict: they come from the run config's own keys
PINNED = {"train_micro_batch_size_per_gpu": "grpo.prompts_per_step / generation.num_generations",
          "gradient_accumulation_steps": "grpo.gradient_accumulation_steps", "train_batch_size": "grpo.prompts_per_step",
          "gradient_clipping": "grpo.max_grad_norm"}


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
        if key in PINNED and value != "auto" and value != out[key]:
            raise _refuse(cfg, "distributed.deepspeed_config",
                          f"{key} = {value!r} contradicts {out[key]!r} from {PINNED[key]}; leave it out or set \"auto\"")
        if key in PINNED:
            continue
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = {**out[key], **value}
        else:
            out[key] = value


def check_trainable(cfg: Any) -> None:
    """Raise the one-line ConfigError saying why ``engine = "deepspeed"`` cannot train (nothing for others)."""
    if cfg.distributed.engine == "deepspeed":
        raise _refuse(cfg, "distributed.engine", WHY_NOT_TRAINABLE)
