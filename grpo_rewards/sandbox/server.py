"""A small HTTP server exposing the local sandbox with SandboxFusion's (and Piston's) API.

Spare CPU machines run ``grpo sandbox serve`` and a training job points its
``sandboxfusion`` (or ``piston``) backend at them. Routes: ``POST /run_code``,
``POST /api/v2/execute``, ``GET /v1/ping``, ``GET /metrics``. A request may lower
the server's limits, never raise them. ``token`` requires ``Authorization: Bearer``.
"""

from __future__ import annotations

import hmac
import json
import logging
import signal as _signal
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from grpo_rewards.sandbox.program import (
    COMPILE_ERROR,
    OK,
    OUTPUT_LIMIT,
    SANDBOX_ERROR,
    TIMEOUT,
    Limits,
    Program,
    RunResult,
)

log = logging.getLogger("grpo.sandbox.server")
MAX_BODY = 64 << 20


def _num(value: Any, cap: float) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return cap
    return cap if v <= 0 else min(v, cap)


def run_code_response(result: RunResult) -> dict[str, Any]:
    """A SandboxFusion ``/run_code`` response for one run (plus ``grpo_status``, which other clients ignore)."""
    if result.status == SANDBOX_ERROR:
        return {"status": "SandboxError", "message": result.error, "compile_result": None, "run_result": None,
                "grpo_status": result.status}
    if result.status == COMPILE_ERROR:  # SandboxFusion: a compile result and no run result
        compile_status = "TimeLimitExceeded" if result.extra.get("compile_status") == TIMEOUT else "Finished"
        return {"status": "Failed", "message": result.error, "run_result": None, "executor_pod_name": None,
                "compile_result": {"status": compile_status, "execution_time": result.wall,
                                   "return_code": result.exit_code or 1, "stdout": "", "stderr": result.stderr},
                "files": {}, "grpo_status": result.status}
    run_status = "TimeLimitExceeded" if result.status == TIMEOUT else "Finished"
    compiled = None
    if "compile_wall" in result.extra:
        compiled = {"status": "Finished", "execution_time": result.extra["compile_wall"], "return_code": 0,
                    "stdout": "", "stderr": ""}
    return {
        "status": "Success" if result.status == OK else "Failed", "message": result.error,
        "compile_result": compiled,
        "run_result": {"status": run_status, "execution_time": result.wall, "return_code": result.exit_code,
                       "stdout": result.stdout, "stderr": result.stderr},
        "executor_pod_name": None, "files": {}, "grpo_status": result.status,
    }


def piston_response(result: RunResult, language: str) -> dict[str, Any]:
    status = {OK: None, TIMEOUT: "TO", OUTPUT_LIMIT: "OL", SANDBOX_ERROR: "XX", COMPILE_ERROR: "CE"}.get(result.status,
                                                                                                  "RE")
    sig = _signal.Signals(result.signal).name if result.signal else None
    return {"language": language, "version": "local",
            "run": {"stdout": result.stdout, "stderr": result.stderr, "output": result.stdout + result.stderr,
                    "code": result.exit_code, "signal": sig, "status": status, "message": result.error or None,
                    "wall_time": int(result.wall * 1000)}}


class SandboxServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], sandbox: Any, limits: Limits, token: str = ""):
        super().__init__(address, _Handler)
        self.sandbox = sandbox
        self.limits = limits
        self.token = token

    def limits_for(self, wall: Any = None, memory_mb: Any = None, cpu: Any = None) -> Limits:
        base = self.limits
        return base.with_(
            wall_seconds=_num(wall, base.wall_seconds),
            cpu_seconds=min(_num(cpu, base.cpu_seconds), _num(wall, base.wall_seconds)),
            memory_mb=int(_num(memory_mb, base.memory_mb)),
        )


class _Handler(BaseHTTPRequestHandler):
    server: SandboxServer
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt: str, *args: Any) -> None:
        log.debug("%s " + fmt, self.address_string(), *args)

    def _send(self, code: int, obj: Any) -> None:
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _authorized(self) -> bool:
        if not self.server.token:
            return True
        given = self.headers.get("Authorization", "")
        if hmac.compare_digest(given.encode(), f"Bearer {self.server.token}".encode()):
            return True
        self._send(401, {"message": "missing or wrong bearer token"})
        return False

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path == "/v1/ping":
            self._send(200, "pong")
        elif self.path == "/metrics" and self._authorized():
            self._send(200, self.server.sandbox.metrics())
        elif self.path != "/metrics":
            self._send(404, {"message": f"no route GET {self.path}"})

    def do_POST(self) -> None:  # noqa: N802
        if not self._authorized():
            return
        try:
            size = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            size = -1
        if size < 0 or size > MAX_BODY:
            self._send(413, {"message": f"body must be 0..{MAX_BODY} bytes"})
            return
        try:
            req = json.loads(self.rfile.read(size) or b"{}")
            if not isinstance(req, dict):
                raise ValueError("the body must be a JSON object")
        except ValueError as exc:
            self._send(400, {"message": f"invalid JSON body: {exc}"})
            return
        if self.path == "/run_code":
            self._run_code(req)
        elif self.path == "/api/v2/execute":
            self._execute(req)
        else:
            self._send(404, {"message": f"no route POST {self.path}"})

    def _run_code(self, req: dict[str, Any]) -> None:
        code, language = req.get("code"), str(req.get("language") or "python")
        if not isinstance(code, str):
            self._send(400, {"message": "'code' must be a string"})
            return
        limits = self.server.limits_for(req.get("run_timeout"), req.get("memory_limit_MB"))
        result = self.server.sandbox.run_one(Program(code, str(req.get("stdin") or ""), language, limits))
        self._send(200, run_code_response(result))

    def _execute(self, req: dict[str, Any]) -> None:
        files = req.get("files")
        language = str(req.get("language") or "python")
        if not isinstance(files, list) or not files or not isinstance(files[0], dict) or "content" not in files[0]:
            self._send(400, {"message": "files must be a non-empty list of {name, content}"})
            return
        def ms(v):
            return (None if v is None else _num(v, 1e9) / 1000)
        mem = req.get("run_memory_limit")
        limits = self.server.limits_for(ms(req.get("run_timeout")), None if mem in (None, -1) else _num(mem, 1 << 50) / (1 << 20),
                                        ms(req.get("run_cpu_time")))
        result = self.server.sandbox.run_one(Program(str(files[0]["content"]), str(req.get("stdin") or ""), language, limits))
        self._send(200, piston_response(result, language))


def serve(sandbox: Any, host: str = "127.0.0.1", port: int = 8080, limits: Limits | None = None,
          token: str = "") -> SandboxServer:
    """Start serving in a background thread; ``server.shutdown()`` stops it. Port 0 picks a free port."""
    server = SandboxServer((host, port), sandbox, limits or sandbox.limits, token)
    threading.Thread(target=server.serve_forever, name="sandbox-server", daemon=True).start()
    return server
