"""What the remote clients share: a concurrency limit, retries on transient errors, timeouts, metrics.

``url`` may list several servers, comma-separated (spare CPU machines each running
``grpo sandbox serve``): requests go round-robin and a retry tries the next server.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from grpo_rewards.sandbox.program import SANDBOX_ERROR, Limits, Program, RunResult, sandbox_error

log = logging.getLogger("grpo.sandbox")
TRANSIENT_HTTP = (429, 500, 502, 503, 504)


class RemoteError(RuntimeError):
    """A request failed for good (after retries, or with a non-transient error)."""


class HttpBackend:
    """Base of the remote clients: ``_request(program, limits) -> RunResult`` is the subclass's part."""

    name = "http"

    def __init__(
        self,
        url: str,
        *,
        limits: Limits | None = None,
        concurrency: int = 16,
        retries: int = 3,
        backoff: float = 0.5,
        timeout_margin: float = 10.0,
        api_key: str = "",
    ):
        self.urls = [u.strip().rstrip("/") for u in url.split(",") if u.strip()]
        bad = [u for u in self.urls if not u.startswith(("http://", "https://"))]
        if not self.urls or bad:
            raise ValueError(f"{self.name}: url must be http(s)://host:port (several: comma-separated), got {url!r}")
        self.url = ",".join(self.urls)
        self._next = 0
        self.limits = limits or Limits()
        self.retries = int(retries)
        self.backoff = float(backoff)
        self.timeout_margin = float(timeout_margin)
        self.api_key = api_key
        self.layers: list[str] = [f"remote:{self.name}"]
        self.profile = "remote"
        self._executor = ThreadPoolExecutor(max(1, int(concurrency)), thread_name_prefix=f"sandbox-{self.name}")
        self._counts: Counter[str] = Counter()
        self._retried = 0
        self._lock = threading.Lock()

    def run(self, programs: Sequence[Program]) -> list[RunResult]:
        return list(self._executor.map(self.run_one, programs))

    def run_one(self, program: Program) -> RunResult:
        limits = program.limits or self.limits
        try:
            result = self._request(program, limits)
        except RemoteError as exc:
            result = sandbox_error(f"{self.name}: {exc}")
        if len(result.stdout.encode()) > limits.output_bytes or len(result.stderr.encode()) > limits.output_bytes:
            result.status, result.error = "output_limit", f"output over {limits.output_bytes} bytes"
            result.stdout = result.stdout[: limits.output_bytes]
        with self._lock:
            self._counts[result.status] += 1
        return result

    def _request(self, program: Program, limits: Limits) -> RunResult:  # pragma: no cover - abstract
        raise NotImplementedError

    def post_json(self, path: str, payload: dict[str, Any], timeout: float) -> Any:
        """POST with retries on connection errors and 429/5xx; a 4xx is final."""
        data = json.dumps(payload).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        last = ""
        with self._lock:  # round-robin over the servers; a retry moves on to the next one
            first = self._next
            self._next = (self._next + 1) % len(self.urls)
        for attempt in range(self.retries + 1):
            if attempt:
                with self._lock:
                    self._retried += 1
                time.sleep(self.backoff * (2 ** (attempt - 1)) * (0.5 + random.random()))
            url = self.urls[(first + attempt) % len(self.urls)] + path
            req = urllib.request.Request(url, data=data, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(req, timeout=timeout) as resp:
                    return json.loads(resp.read().decode("utf-8", "replace"))
            except urllib.error.HTTPError as exc:
                body = exc.read().decode("utf-8", "replace")[:300]
                last = f"HTTP {exc.code} from {url}: {body}"
                if exc.code not in TRANSIENT_HTTP:
                    raise RemoteError(last) from None
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
                last = f"{url}: {getattr(exc, 'reason', exc)}"
            except json.JSONDecodeError as exc:
                last = f"{url}: invalid JSON in the response ({exc.msg})"
        raise RemoteError(f"{last} (after {self.retries + 1} attempts)")

    def metrics(self) -> dict[str, Any]:
        with self._lock:
            counts = dict(self._counts)
            retried = self._retried
        total = sum(counts.values())
        return {"backend": self.name, "url": self.url, "profile": self.profile, "layers": list(self.layers),
                "runs": total, "status_counts": counts, "retries": retried,
                "sandbox_error_rate": counts.get(SANDBOX_ERROR, 0) / total if total else 0.0}

    def close(self) -> None:
        self._executor.shutdown(wait=True)

    def __enter__(self) -> HttpBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def memory_or(status: str, stderr: str) -> str:
    """``memory`` when a failed run's stderr ends in MemoryError, else ``status``."""
    tail = stderr.rstrip().rsplit("\n", 1)[-1]
    return "memory" if tail.startswith("MemoryError") else status


Factory = Callable[..., HttpBackend]
