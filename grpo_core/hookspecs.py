"""Hook specifications of ``grpo_core``: the trainer's extension points and training events.

Added to the plugin manager by the trainer's plugin (:mod:`grpo_core.plugin`, through
``grpo_add_hookspecs``), as pytest plugins add theirs, so that ``grpo_rewards`` specifies only its
own hooks and imports without the trainer. A plugin implements these exactly as the rewards'
hooks, marked ``@grpo_rewards.hookimpl`` and found through the ``grpo`` entry-point group.

Training-event hooks (``grpo_on_*``) are called by the trainers (the built-in one and the TRL
backend) on the main process; every implementation is called, return values are ignored, and one
that raises is logged and skipped (``--strict-plugins`` makes it fatal). Each receives
``context``, a :class:`grpo_core.context.TrainingContext`: the run's backend, step, max_steps,
run_dir, config and last metrics. ``trainer``, the trainer object itself, is still passed so that
plugins written against it load unchanged, but it is no stable interface: read ``context``.
Imports nothing heavy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from grpo_rewards.hookspecs import hookspec

if TYPE_CHECKING:
    from grpo_core.context import TrainingContext

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
def grpo_register_engines(register: Callable[..., None]) -> None:
    """Register parallel engines (``ddp``, ``fsdp2``, ``deepspeed``, ...).

    Call ``register(name, factory)``; ``factory()`` returns a subclass of
    :class:`grpo_core.parallel.engine.Engine`. ``[distributed] engine = "<name>"`` picks one.
    """


@hookspec
def grpo_register_loss_types(register: Callable[..., None]) -> None:
    """Register policy loss types (``grpo``, ``bnpo``, ``dr_grpo``, ``dapo``, ...).

    Call ``register(name, factory)``; ``factory(config)`` (the run config) returns a
    :class:`grpo_core.algorithm.loss_types.LossType`, usually the subclass itself. ``[grpo] loss_type = "<name>"``
    picks one; ``factory.config_problems(sections) -> [(key, message)]``, when given, are its config checks.
    """


@hookspec
def grpo_register_dataset_sources(register: Callable[..., None]) -> None:
    """Register dataset sources by scheme.

    Call ``register(scheme, loader)``; ``loader(spec: dict) -> list[dict]`` (or an
    iterable of rows) for a ``[data] source = "<scheme>:..."`` entry.
    """


@hookspec
def grpo_register_tools(register: Callable[..., None]) -> None:
    """Register tools a model may call during its rollouts (``calculator``, ``python``, ...).

    Call ``register(name, function)``: a Python function with type hints and a Google-style docstring (its
    JSON schema is ``transformers.utils.get_json_schema``'s), called with the arguments the model wrote and
    returning the text the model reads. ``[tools] names = ["<name>", ...]`` picks them (``docs/tools.md``).
    """


# ----------------------------------------------------------- trainer events ----


@hookspec
def grpo_on_train_start(context: TrainingContext, trainer: Any) -> None:
    """Called once before the first step, after the model, the data and a resumed checkpoint are loaded."""


@hookspec
def grpo_on_rewards_scored(context: TrainingContext, step: int, rows: list[dict[str, Any]], trainer: Any) -> None:
    """Called after a generation batch is scored; ``rows`` hold completions and per-reward scores."""


@hookspec
def grpo_on_step_end(context: TrainingContext, step: int, metrics: dict[str, float], trainer: Any) -> None:
    """Called after each optimizer step with that step's metrics."""


@hookspec
def grpo_on_checkpoint(context: TrainingContext, step: int, path: str, trainer: Any) -> None:
    """Called after a checkpoint has been written (atomically) to ``path``."""


@hookspec
def grpo_on_train_end(context: TrainingContext, metrics: dict[str, float], trainer: Any) -> None:
    """Called once when training finishes or is interrupted cleanly."""
