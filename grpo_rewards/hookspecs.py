"""Hook specifications: every way a plugin can extend the toolkit.

A plugin is a module (or object) with functions marked ``@grpo_rewards.hookimpl``
whose names match the specifications below. It is found through the Python
entry-point group ``grpo``::

    # the plugin author's pyproject.toml
    [project.entry-points.grpo]
    my_rewards = "my_package.plugin"

The built-in rewards are registered through that same group in our own
pyproject, exactly as a third party's would be.

Registration hooks (``grpo_register_*``) receive a ``register`` callable and call
it once per thing they add; the plugin manager records which distribution
registered what, so that ``grpo plugins`` can list it and two plugins claiming
one name is an error naming both.

Lifecycle hooks (``grpo_on_*``) are called by trainers at fixed points of a run;
every implementation is called and return values are ignored.

Every hook is called through :attr:`grpo_rewards.plugins.Registry.hook`, one
implementation at a time: one that raises is logged once with its file:line and
skipped, and the others still run (``--strict-plugins`` makes it fatal). A registration
hook that raises, or registers something malformed, makes its plugin fail as a whole
(none of its registrations are kept). Hook wrappers are not supported.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pluggy

PROJECT_NAME = "grpo"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


# ---------------------------------------------------------------- rewards ----


@hookspec
def grpo_register_rewards(register: Callable[..., None]) -> None:
    """Register reward functions.

    Call ``register(RewardSpec(...))`` once per reward. A reward spec names a
    factory: ``factory(**params)`` returns a batch callable with TRL's reward
    signature ``fn(completions, **columns) -> list[float | None]`` (``None``: the
    reward does not apply to that row). Return a module-level class instance or
    function, not a closure, so the reward pickles and runs in a killable worker.
    The factory's parameters may not be named like the config's own keys (``use``,
    ``weight``, ``on_error``, ``timeout``, ``max_consecutive_failures``).

    Example::

        @hookimpl
        def grpo_register_rewards(register):
            register(RewardSpec(name="length_penalty", factory=make_length_penalty))
    """


@hookspec
def grpo_register_verifiers(register: Callable[..., None]) -> None:
    """Register verifiers.

    Call ``register(VerifierSpec(...))`` once per verifier. A verifier factory
    returns ``verify(answer, reference) -> Verdict``; every registered verifier
    can be used as a reward with ``use = "verify:<name>"`` in a config.
    """


# --------------------------------------------------------------- command line ----


@hookspec
def grpo_register_commands(subparsers: Any) -> None:
    """Add sub-commands to the ``grpo`` command line.

    ``subparsers`` is the ``argparse`` sub-parser action of the top-level parser.
    Each command sets ``func=<callable(args) -> int>`` as its default. Import
    heavy modules inside the command function, never at plugin import time.
    """


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


@hookspec
def grpo_register_sandbox_backends(register: Callable[..., None]) -> None:
    """Register code-execution backends (``local``, ``sandboxfusion``, ``piston``, ...).

    Call ``register(name, factory)``; ``factory(**options)`` returns a backend
    with ``run(programs) -> list[RunResult]``.
    """


# ----------------------------------------------------------- trainer events ----


@hookspec
def grpo_on_train_start(trainer: Any) -> None:
    """Called once before the first step, after the model and data are loaded."""


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
