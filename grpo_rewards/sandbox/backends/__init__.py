"""Code-execution backends behind one interface: ``run(programs) -> list[RunResult]``.

``local`` (the fork-server pool), ``sandboxfusion`` (a ``/run_code`` client) and
``piston`` (an ``/api/v2/execute`` client) are registered by the built-in sandbox
plugin; a third-party plugin registers more through ``grpo_register_sandbox_backends``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from grpo_rewards.sandbox.program import Program, RunResult


class Backend(Protocol):
    name: str

    def run(self, programs: Sequence[Program]) -> list[RunResult]: ...

    def metrics(self) -> dict[str, Any]: ...

    def close(self) -> None: ...
