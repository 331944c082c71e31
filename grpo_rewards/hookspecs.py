"""Hook specifications of ``grpo_rewards``: rewards, verifiers, commands and code-execution backends.

Each package owns its hooks: the trainer's (generation and trainer backends, dataset sources,
training events) are specified in ``grpo_core.hookspecs`` and added to the plugin manager by the
trainer's plugin through :func:`grpo_add_hookspecs`, as pytest plugins add theirs, so this package
imports without the trainer installed.

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

Every hook is called through :attr:`grpo_rewards.plugins.Registry.hook` (pluggy's relay, each
implementation wrapped when its plugin registers): one that raises is logged once with its
file:line and skipped, and the others still run (``--strict-plugins`` makes it fatal). A registration
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


# ---------------------------------------------------------- code execution ----


@hookspec
def grpo_register_sandbox_backends(register: Callable[..., None]) -> None:
    """Register code-execution backends (``local``, ``sandboxfusion``, ``piston``, ...).

    Call ``register(name, factory)``; ``factory(**options)`` returns a backend
    with ``run(programs) -> list[RunResult]``.
    """


# ------------------------------------------------------------------- judges ----


@hookspec
def grpo_register_judge_backends(register: Callable[..., None]) -> None:
    """Register the judges ``llm_judge`` can ask (``openai``: an OpenAI-compatible endpoint; ``transformers``: a
    local model, registered by the trainer's plugin).

    Call ``register(name, factory)``; ``factory(model, **options)`` returns a judge with
    ``complete(messages, sampling, json_schema) -> str`` (the reply's text) and an ``identity`` string (what the
    verdict cache keys on), and optionally ``worst_case() -> float`` (the seconds one request can take with
    its retries). ``options`` are the reward's ``base_url``, ``timeout``, ``retries``, ``backoff``,
    ``api_key_env`` and ``device``.
    """


# ------------------------------------------------------------- more hooks ----


@hookspec(historic=True)
def grpo_add_hookspecs(pluginmanager: pluggy.PluginManager) -> None:
    """Add hook specifications of your own, for other plugins to implement (pytest's ``pytest_addhooks``).

    Call ``pluginmanager.add_hookspecs(module_or_class)`` with the specifications (functions marked
    ``@grpo_rewards.hookspec``). Called once when the plugin registers, before any plugin's hooks
    are checked, so an implementation of the added hooks loads whatever the plugin order. The
    trainer's own hooks (``grpo_core.hookspecs``) are added this way. Call the added hooks through
    ``registry.hook.<name>(...)``; a specification named ``grpo_register_<kind>(register)`` is a
    registration hook: what it registers is found with ``registry.get("<kind>", name)``.
    """
