"""A call in a daemon thread with a deadline: the fallback for work that cannot move to a process.

A callable that does not pickle (a closure, a lambda, anything defined in ``__main__``) cannot be
sent to a worker process (:mod:`grpo_rewards.isolation.process`), so it runs here. A timeout only
stops *waiting*: Python cannot stop a thread, so it keeps running, and the runner refuses new calls
(they fail as timeouts) until it returns, rather than pile up threads that hold the same object.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from grpo_rewards.isolation.failed import WorkerFailed


class ThreadRunner:
    """Runs one call at a time in a fresh daemon thread named ``name``."""

    def __init__(self, name: str):
        self.name = name
        self._running: Future[Any] | None = None

    def call(self, fn: Callable[..., Any], *args: Any, timeout: float) -> Any:
        """``fn(*args)`` within ``timeout`` seconds. What ``fn`` raises is raised here (``BaseException`` too);
        ``WorkerFailed("timeout")`` when it runs past the deadline or an earlier call is still running."""
        if self._running is not None and not self._running.done():
            raise WorkerFailed("timeout", "still running from an earlier call that timed out")
        future: Future[Any] = Future()

        def target() -> None:
            try:
                future.set_result(fn(*args))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                future.set_exception(exc)

        threading.Thread(target=target, name=self.name, daemon=True).start()
        try:
            return future.result(timeout=timeout)
        except TimeoutError:
            if not future.done():
                self._running = future
                raise WorkerFailed("timeout", f"took longer than {timeout:g}s") from None
        return future.result()  # it finished at the deadline, or fn itself raised TimeoutError
