"""The built-in rewards and verifiers: a plugin registering the ``REWARD_SPECS`` / ``VERIFIER_SPECS`` (and the
judge backends, ``JUDGE_BACKENDS``) of each module in :data:`MODULES`, through the ``grpo`` entry point
(``builtin_rewards``) like any plugin."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from grpo_rewards.hookspecs import hookimpl

# One module per reward family; each is imported when this plugin registers (llm's DEFAULT_PLUGINS).
MODULES: tuple[str, ...] = tuple(f"grpo_rewards.builtins.{name}" for name in (
    "exact_match", "integer_format", "xml_count", "xml_format", "formats", "numeric_proximity", "math_equivalence",
    "email_rules", "majority_vote", "llm_judge", "tool_use"))


def _collect(attr: str) -> list[Any]:
    return [spec for name in MODULES for spec in getattr(importlib.import_module(name), attr, ())]


@hookimpl
def grpo_register_rewards(register: Callable[..., None]) -> None:
    for spec in _collect("REWARD_SPECS"):
        register(spec)


@hookimpl
def grpo_register_judge_backends(register: Callable[..., None]) -> None:
    for name in MODULES:
        for backend, factory in getattr(importlib.import_module(name), "JUDGE_BACKENDS", {}).items():
            register(backend, factory)


@hookimpl
def grpo_register_verifiers(register: Callable[..., None]) -> None:
    for spec in _collect("VERIFIER_SPECS"):
        register(spec)
