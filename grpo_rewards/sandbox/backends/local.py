"""The ``local`` backend: the fork-server pool of :mod:`grpo_rewards.sandbox.pool`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from grpo_rewards.sandbox.program import Limits


def make_local(
    *,
    slots: int = 0,
    limits: Limits | None = None,
    allow_unsafe_execution: bool = False,
    profile: str = "auto",
    packages: Sequence[str] = (),
    **_: Any,
) -> Any:
    """A :class:`~grpo_rewards.sandbox.pool.LocalSandbox` (``slots=0``: two per CPU core; ``packages``: what
    programs may import beside the standard library)."""
    from grpo_rewards.sandbox.pool import LocalSandbox  # the pool loads when a sandbox is made

    return LocalSandbox(slots=slots or None, limits=limits, allow_unsafe=allow_unsafe_execution, profile=profile,
                        packages=packages)
