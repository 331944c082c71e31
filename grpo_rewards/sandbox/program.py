"""What a sandbox backend runs and returns: programs, limits, run results and their statuses."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

# statuses of one run (``wrong`` is the judge's, never a backend's). Every one but ``sandbox_error`` is the
# program's own failure and scores as one; ``sandbox_error`` is an infrastructure failure no program could cause
OK, WRONG, RUNTIME_ERROR, TIMEOUT, MEMORY, OUTPUT_LIMIT, COMPILE_ERROR, SANDBOX_ERROR = (
    "ok", "wrong", "runtime_error", "timeout", "memory", "output_limit", "compile_error", "sandbox_error")
RUN_STATUSES = (OK, RUNTIME_ERROR, TIMEOUT, MEMORY, OUTPUT_LIMIT, COMPILE_ERROR, SANDBOX_ERROR)
STATUSES = (OK, WRONG, RUNTIME_ERROR, TIMEOUT, MEMORY, OUTPUT_LIMIT, COMPILE_ERROR, SANDBOX_ERROR)
COMPILED = ("c", "cpp")  # the built-in compiled languages; grpo_rewards.sandbox.languages has every registered one


@dataclass(frozen=True)
class Limits:
    """Per-program limits; ``wall_seconds`` also bounds sleeping code, which burns no CPU."""

    cpu_seconds: float = 5.0
    wall_seconds: float = 10.0
    memory_mb: int = 1024
    output_bytes: int = 1 << 20
    file_size_mb: int = 16
    open_files: int = 64
    processes: int = 64  # threads count: the slot uid runs nothing else
    stack_mb: int = 0  # 0 keeps the zygote's stack limit

    def __post_init__(self) -> None:
        for name in ("cpu_seconds", "wall_seconds", "memory_mb", "output_bytes", "file_size_mb", "open_files", "processes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"sandbox limit {name} must be a positive number, got {value!r}")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def with_(self, **changes: Any) -> Limits:
        return replace(self, **changes)


@dataclass(frozen=True)
class Program:
    """One program to run: source code, its standard input, and the language."""

    code: str
    stdin: str = ""
    language: str = "python"
    limits: Limits | None = None  # None: the backend's default


@dataclass
class RunResult:
    """What running a program gave. ``status`` is one of :data:`RUN_STATUSES`."""

    status: str
    stdout: str = ""
    stderr: str = ""
    exit_code: int | None = None
    signal: int | None = None
    wall: float = 0.0
    cpu: float = 0.0
    error: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == OK


def sandbox_error(message: str) -> RunResult:
    return RunResult(SANDBOX_ERROR, error=message)
