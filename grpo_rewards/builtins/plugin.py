"""Registers the built-in rewards and verifiers, through the ``grpo`` entry point like any plugin."""

from __future__ import annotations

from collections.abc import Callable

from grpo_rewards.hookspecs import hookimpl


@hookimpl
def grpo_register_rewards(register: Callable[..., None]) -> None:
    from grpo_rewards.builtins import catalogue

    for spec in catalogue.reward_specs():
        register(spec)


@hookimpl
def grpo_register_verifiers(register: Callable[..., None]) -> None:
    from grpo_rewards.builtins import catalogue

    for spec in catalogue.verifier_specs():
        register(spec)
