"""Hook specifications of ``grpo_core``: the trainer's extension points and training events.

Added to the plugin manager by the trainer's plugin (:mod:`grpo_core.plugin`, through
``grpo_add_hookspecs``), as pytest plugins add theirs, so that ``grpo_rewards`` specifies only its
own hooks and imports without the trainer. A plugin implements these exactly as the rewards'
hooks, marked ``@grpo_rewards.hookimpl`` and found through the ``grpo`` entry-point group.

Training-event hooks (``grpo_on_*``) are called by the trainers (the built-in one and the TRL
backend) on the main process; every implementation is called, return values are ignored, and one
that raises is logged and skipped (``--strict-plugins`` makes it fatal).
Imports nothing heavy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from grpo_rewards.hookspecs import hookspec

# ------------------------------------------------------- trainer extensions ----


@hookspec
def grpo_register_generation_backends(register: Callable[..., None]) -> None:
    """Register generation backends (``transformers``, ``vllm``, ...).

    Call ``register(name, factory)``; ``factory(config, model, tokenizer)``
    returns an object with ``generate(prompts, num_generations) -> Generation``.
    """


@hookspec
def grpo_register_trainer_backends(register: Callable[..., None]) -> None:
    """Register trainer backends (the built-in lean trainer, TRL, ...).

    Call ``register(name, factory)``; ``factory(config, resume=False)`` returns an object
    with ``train() -> dict``. ``[trainer] backend = "<name>"`` in a run config picks one.
    """


@hookspec
def grpo_register_dataset_sources(register: Callable[..., None]) -> None:
    """Register dataset sources by scheme.

    Call ``register(scheme, loader)``; ``loader(spec: dict) -> list[dict]`` (or an
    iterable of rows) for a ``[data] source = "<scheme>:..."`` entry.
    """


# ----------------------------------------------------------- trainer events ----


@hookspec
def grpo_on_train_start(trainer: Any) -> None:
    """Called once before the first step, after the model, the data and a resumed checkpoint are loaded."""


@hookspec
def grpo_on_rewards_scored(trainer: Any, step: int, rows: list[dict[str, Any]]) -> None:
    """Called after a generation batch is scored; ``rows`` hold completions and per-reward scores."""


@hookspec
def grpo_on_step_end(trainer: Any, step: int, metrics: dict[str, float]) -> None:
    """Called after each optimizer step with that step's metrics."""


@hookspec
def grpo_on_checkpoint(trainer: Any, step: int, path: str) -> None:
    """Called after a checkpoint has been written (atomically) to ``path``."""


@hookspec
def grpo_on_train_end(trainer: Any, metrics: dict[str, float]) -> None:
    """Called once when training finishes or is interrupted cleanly."""
