"""A Piston client: ``POST {url}/api/v2/execute`` (the API open-r1 uses for Codeforces/IOI)."""

from __future__ import annotations

import signal
from typing import Any

from grpo_rewards.sandbox.backends.http import HttpBackend, RemoteError, memory_or
from grpo_rewards.sandbox.program import (
    OK,
    OUTPUT_LIMIT,
    RUNTIME_ERROR,
    SANDBOX_ERROR,
    TIMEOUT,
    Limits,
    Program,
    RunResult,
)

_STATUS = {"TO": TIMEOUT, "OL": OUTPUT_LIMIT, "EL": OUTPUT_LIMIT, "XX": SANDBOX_ERROR, "RE": RUNTIME_ERROR,
           "SG": RUNTIME_ERROR}


class PistonBackend(HttpBackend):
    name = "piston"

    def __init__(self, url: str, *, version: str = "*", **kw: Any):
        super().__init__(url, **kw)
        self.version = version

    def _request(self, program: Program, limits: Limits) -> RunResult:
        payload = {
            "language": program.language, "version": self.version,
            "files": [{"name": "main.py" if program.language.startswith("py") else "main", "content": program.code}],
            "stdin": program.stdin, "args": [],
            "run_timeout": int(limits.wall_seconds * 1000), "compile_timeout": int(limits.wall_seconds * 1000),
            "run_cpu_time": int(limits.cpu_seconds * 1000),
            "run_memory_limit": int(limits.memory_mb) << 20,
        }
        reply = self.post_json("/api/v2/execute", payload, timeout=limits.wall_seconds + self.timeout_margin)
        return parse_response(reply)


def parse_response(reply: Any) -> RunResult:
    """A :class:`RunResult` from an ``/api/v2/execute`` response."""
    if not isinstance(reply, dict) or not isinstance(reply.get("run"), dict):
        raise RemoteError(f"unexpected /api/v2/execute response: {str(reply)[:200]}")
    compiled = reply.get("compile")
    if isinstance(compiled, dict) and compiled.get("code") not in (0, None):
        return RunResult(RUNTIME_ERROR, compiled.get("stdout", ""), compiled.get("stderr", ""), compiled.get("code"),
                         error="compilation failed")
    run = reply["run"]
    stdout, stderr = run.get("stdout") or "", run.get("stderr") or ""
    code, sig = run.get("code"), run.get("signal")
    wall = float(run.get("wall_time") or 0) / 1000
    signum = getattr(signal, sig, None) if isinstance(sig, str) else None
    status = _STATUS.get(run.get("status") or "")
    if status is None:
        if sig == "SIGKILL" and code is None:
            status = TIMEOUT
        elif code == 0 and not sig:
            status = OK
        else:
            status = RUNTIME_ERROR
    if status == RUNTIME_ERROR:
        status = memory_or(status, stderr)
    return RunResult(status, stdout, stderr, code, int(signum) if signum else None, wall=wall,
                     error=run.get("message") or ("" if status == OK else f"exit code {code}, signal {sig}"))


def make_piston(*, url: str = "http://localhost:2000", limits: Limits | None = None, concurrency: int = 16,
                retries: int = 3, api_key: str = "", version: str = "*", **_: Any) -> PistonBackend:
    """A Piston ``/api/v2/execute`` client."""
    return PistonBackend(url, limits=limits, concurrency=concurrency, retries=retries, api_key=api_key, version=version)
