"""A SandboxFusion client: ``POST {url}/run_code`` (verl's and SandboxFusion's API)."""

from __future__ import annotations

from typing import Any

from grpo_rewards.sandbox.backends.http import HttpBackend, RemoteError, memory_or
from grpo_rewards.sandbox.program import (
    COMPILE_ERROR,
    OK,
    RUN_STATUSES,
    RUNTIME_ERROR,
    SANDBOX_ERROR,
    TIMEOUT,
    Limits,
    Program,
    RunResult,
)


class SandboxFusionBackend(HttpBackend):
    name = "sandboxfusion"

    def _request(self, program: Program, limits: Limits) -> RunResult:
        payload = {
            "code": program.code, "language": program.language, "stdin": program.stdin,
            "run_timeout": limits.wall_seconds, "compile_timeout": limits.wall_seconds,
            "memory_limit_MB": limits.memory_mb,
        }
        reply = self.post_json("/run_code", payload, timeout=limits.wall_seconds + self.timeout_margin)
        return parse_response(reply)


def parse_response(reply: Any) -> RunResult:
    """A :class:`RunResult` from a ``/run_code`` response.

    ``grpo_status`` (sent by ``grpo sandbox serve``) gives the exact status where
    SandboxFusion's API has no word for it (memory, output limit).
    """
    if not isinstance(reply, dict) or "status" not in reply:
        raise RemoteError(f"unexpected /run_code response: {str(reply)[:200]}")
    result = _parse(reply)
    exact = reply.get("grpo_status")
    if exact in RUN_STATUSES and exact != result.status:
        result.status = exact
    return result


def _parse(reply: dict[str, Any]) -> RunResult:
    if reply["status"] == "SandboxError":
        return RunResult(SANDBOX_ERROR, error=str(reply.get("message") or "SandboxError"))
    compiled = reply.get("compile_result") or {}
    run = reply.get("run_result") or {}
    if not run and compiled:  # a compile step that failed
        return RunResult(COMPILE_ERROR, compiled.get("stdout") or "", compiled.get("stderr") or "",
                         compiled.get("return_code"), error="compilation failed")
    stdout, stderr = run.get("stdout") or "", run.get("stderr") or ""
    code = run.get("return_code")
    wall = float(run.get("execution_time") or 0.0)
    if run.get("status") == "TimeLimitExceeded":
        return RunResult(TIMEOUT, stdout, stderr, code, wall=wall, error="time limit exceeded")
    if run.get("status") == "Finished" and code == 0 and reply["status"] == "Success":
        return RunResult(OK, stdout, stderr, 0, wall=wall)
    if run.get("status") not in ("Finished", "Error"):
        return RunResult(SANDBOX_ERROR, stdout, stderr, code, error=f"run status {run.get('status')!r}")
    return RunResult(memory_or(RUNTIME_ERROR, stderr), stdout, stderr, code, wall=wall, error=f"exit code {code}")


def make_sandboxfusion(*, url: str = "http://localhost:8080", limits: Limits | None = None, concurrency: int = 16,
                       retries: int = 3, api_key: str = "", **_: Any) -> SandboxFusionBackend:
    """A SandboxFusion ``/run_code`` client."""
    return SandboxFusionBackend(url, limits=limits, concurrency=concurrency, retries=retries, api_key=api_key)
