"""A loopback stand-in for ``vllm serve`` (with ``VLLM_SERVER_DEV_MODE=1`` and the trainer's worker extension),
for the server engine's client (:class:`grpo_core.generation.vllm.server.ServerEngine`) without vLLM: ``GET
/health`` and ``/v1/models``, ``POST /collective_rpc`` (``grpo_worker_info``; ``grpo_load_weights``, which reads
the pushed file and counts its tensors into ``pushed``), ``POST /reset_prefix_cache`` and ``POST /v1/completions``.

Each request gets ``n`` choices of 3 tokens, ``10 + (sum(prompt) + 3 * index + t) % 40``, with log-probs
``-0.1 * (index + t + 1)``, listed last index first (the client must order them). A request whose prompt is in
``held`` waits until ``release`` is set (at most ``hold_s`` seconds), so a test decides which answer comes last;
one in ``short`` gets one completion fewer than it asked for (a broken server).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from typing import Any

from grpo_core.config import GenerationConfig
from grpo_core.generation.vllm.server import ServerEngine


def expected_token_ids(prompt: list[int], index: int) -> list[int]:
    return [10 + (sum(prompt) + 3 * index + t) % 40 for t in range(3)]


class _Handler(BaseHTTPRequestHandler):
    server: FakeCompletions

    def _send(self, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802
        self._send({"data": [{"id": "tiny", "object": "model"}]} if self.path == "/v1/models" else {})

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        if self.path == "/collective_rpc":
            if body["method"] == "grpo_worker_info":
                return self._send({"results": [{"logprobs_mode": "processed_logprobs", "dtype": "float32"}]})
            from safetensors.torch import load_file

            count = len(load_file(body["kwargs"]["path"]))
            self.server.pushed.append(count)
            return self._send({"results": [str(count)]})
        if self.path == "/reset_prefix_cache":
            return self._send({"success": True})
        prompt = body["prompt"]
        if prompt in self.server.held:
            self.server.release.wait(self.server.hold_s)
        n = body.get("n", 1) - (prompt in self.server.short)
        choices = [{"index": j, "token_ids": expected_token_ids(prompt, j),
                    "logprobs": {"tokens": ["x"] * 3, "token_logprobs": [-0.1 * (j + t + 1) for t in range(3)]},
                    "finish_reason": "length"} for j in reversed(range(n))]
        return self._send({"choices": choices})

    def log_message(self, *args: Any) -> None:
        pass


class FakeCompletions(ThreadingHTTPServer):
    """Serves on 127.0.0.1 (a free port) inside its ``with`` block; :meth:`engine` is a client pointed at it."""

    daemon_threads = True

    def __init__(self, hold_s: float = 10.0):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.held: list[list[int]] = []
        self.short: list[list[int]] = []  # prompts answered with one completion fewer than asked for
        self.pushed: list[int] = []  # tensors per pushed file
        self.release = threading.Event()
        self.hold_s = hold_s

    def __enter__(self) -> FakeCompletions:
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.shutdown()
        self.server_close()

    def engine(self) -> ServerEngine:
        """A :class:`ServerEngine` started against this server (its start-up checks pass)."""
        generation = GenerationConfig(backend="vllm", vllm_mode="server", vllm_server_port=self.server_address[1],
                                      vllm_server_timeout=5)
        return ServerEngine(SimpleNamespace(generation=generation), dtype="float32")
