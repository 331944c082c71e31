"""grpo_core: a lean, memory-optimized GRPO trainer.

Public API (imported lazily so that ``import grpo_core`` stays cheap)::

    from grpo_core import Trainer, load_config
    Trainer(load_config("examples/quickstart.toml")).train()      # = grpo train examples/quickstart.toml
    GRPOTrainer(model=model, reward_funcs=[fn, "xml_count"], train_dataset=ds, args="run.toml").train()

``GRPOTrainer`` (TRL's signature: model, tokenizer, peft config, dataset and reward objects; grpo_core.api),
``compose_reward_funcs``, ``TrainerState`` (what a reward gets as ``trainer_state``), ``Trainer``, ``load_config``, ``config_from_dict`` (the same sections as a dict, for notebooks),
``RunConfig``, ``group_advantages``, ``grpo_loss``, ``run_demo`` (= ``grpo demo``), ``TrainingContext`` (what
the training-event hooks receive).
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "Trainer": "grpo_core.trainer",
    "GRPOTrainer": "grpo_core.api",
    "compose_reward_funcs": "grpo_core.api",
    "TrainerState": "grpo_core.context",
    "load_config": "grpo_core.config",
    "config_from_dict": "grpo_core.config",
    "RunConfig": "grpo_core.config",
    "group_advantages": "grpo_core.algorithm.advantages",
    "grpo_loss": "grpo_core.algorithm.loss",
    "run_demo": "grpo_core.demo.run",
    "TrainingContext": "grpo_core.context",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'grpo_core' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(_EXPORTS[name]), name)
