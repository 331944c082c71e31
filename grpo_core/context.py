"""What a training-event hook (``grpo_on_*``) is told about the run: :class:`TrainingContext`.

A small, frozen, documented view of a run, so that a plugin listening to training events depends on
these fields and not on a trainer's internals (the built-in trainer and the TRL backend give the
same fields); and :class:`TrainerState`, what a reward is told as ``trainer_state``. Imports nothing heavy.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any


@dataclass(frozen=True)
class TrainingContext:
    """The run as a training-event hook sees it (read-only).

    Attributes:
        backend: the trainer backend running: ``"grpo_core"`` (the built-in trainer) or ``"trl"``.
        step: the steps finished so far (0 before the first; in ``grpo_on_rewards_scored``, the
            step being taken minus one). A step is one generation batch with the built-in trainer,
            one optimizer step with TRL.
        max_steps: the step the run stops at (``[grpo] max_steps``; TRL's count with TRL).
        run_dir: the run's output folder (``[logging] output_dir``): ``metrics.jsonl``,
            ``checkpoints/``, ``model/``.
        config: the run's configuration (``grpo_core.config.RunConfig``), the sections of the
            run's TOML file; read it, do not change it.
        metrics: the metrics of the last step logged (empty before the first), as in
            ``metrics.jsonl``; a read-only mapping.
    """

    backend: str
    step: int
    max_steps: int
    run_dir: Path
    config: Any
    metrics: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "run_dir", Path(self.run_dir))
        object.__setattr__(self, "metrics", MappingProxyType(dict(self.metrics)))


@dataclass(frozen=True)
class TrainerState:
    """What a reward receives as ``trainer_state`` (named as in ``transformers.TrainerState``, which TRL
    passes): ``global_step`` (steps finished so far), ``max_steps`` and ``epoch``. Small and picklable, so
    a reward running in its own worker process receives it too."""

    global_step: int
    max_steps: int
    epoch: float = 0
