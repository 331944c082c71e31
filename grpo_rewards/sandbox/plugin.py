"""Registers the sandbox backends and the code rewards (import-light: heavy work inside); ``grpo sandbox`` is
a plugin of its own, :mod:`grpo_rewards.sandbox.cli`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from grpo_rewards.hookspecs import hookimpl
from grpo_rewards.specs import RewardSpec

_EXAMPLE = """
[rewards.tests]
use = "{name}"
tests_column = "verification_info"   # open-r1 / SandboxFusion / MBPP / HumanEval formats
cpu_seconds = 5.0                    # per test
wall_seconds = 10.0
memory_mb = 1024
backend = "local"                    # or "sandboxfusion" / "piston" with url = "http://host:port"
"""


def _factories() -> tuple[Callable[..., Any], Callable[..., Any]]:
    """The real factories (their signatures are the TOML parameters); imported only when registering."""
    from grpo_rewards.sandbox import reward  # registration only: plugin load stays light

    return reward.make_code_execution, reward.make_code_execution_binary


@hookimpl
def grpo_register_rewards(register: Callable[..., None]) -> None:
    fraction, binary = _factories()
    register(RewardSpec(name="code_execution", factory=fraction, columns=("verification_info",),
                        description="fraction of a code completion's tests that pass, run in the sandbox",
                        example=_EXAMPLE.format(name="code_execution")))
    register(RewardSpec(name="code_execution_binary", factory=binary, columns=("verification_info",),
                        description="1 when every test of a code completion passes in the sandbox, else 0",
                        example=_EXAMPLE.format(name="code_execution_binary")))


def _local(**options: Any) -> Any:
    # a plugin factory: its module (processes, HTTP clients) loads when a sandbox is made, not at plugin load
    from grpo_rewards.sandbox.backends.local import make_local

    return make_local(**options)


def _sandboxfusion(**options: Any) -> Any:
    # a plugin factory: its module (processes, HTTP clients) loads when a sandbox is made, not at plugin load
    from grpo_rewards.sandbox.backends.sandboxfusion import make_sandboxfusion

    return make_sandboxfusion(**options)


def _piston(**options: Any) -> Any:
    # a plugin factory: its module (processes, HTTP clients) loads when a sandbox is made, not at plugin load
    from grpo_rewards.sandbox.backends.piston import make_piston

    return make_piston(**options)


@hookimpl
def grpo_register_sandbox_backends(register: Callable[..., None]) -> None:
    register("local", _local)
    register("sandboxfusion", _sandboxfusion)
    register("piston", _piston)

