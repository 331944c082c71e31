"""The reward contract, enforced: a reward that raises, hangs, or returns junk never takes a run down.

:class:`SafeReward` wraps any TRL-style batch reward. It checks that the result has
one entry per completion and that each entry is a finite number or ``None``; an
exception, a wrong length, a NaN/inf or a timeout is reported with the reward's
name and replaced according to ``on_error``:

``"none"`` (default)  the affected rows score ``None`` (they do not count)
``"zero"``            the affected rows score ``0.0``
``"raise"``           a :class:`RewardError` naming the reward is raised

A reward still running after ``timeout`` seconds is abandoned (its thread keeps
running in the background, so it is not called again until it returns).
"""

from __future__ import annotations

import logging
import math
import numbers
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("grpo.rewards")

ON_ERROR = ("none", "zero", "raise")


class RewardError(RuntimeError):
    """A reward broke its contract and the policy is ``raise``."""


@dataclass
class RewardStats:
    calls: int = 0
    rows: int = 0
    seconds: float = 0.0
    failures: int = 0
    last_failure: str = ""
    failure_kinds: dict[str, int] = field(default_factory=dict)


class SafeReward:
    """A reward wrapped so that its failures are reported, not fatal (see module docs)."""

    def __init__(
        self,
        fn: Callable[..., Any],
        name: str | None = None,
        *,
        on_error: str = "none",
        timeout: float | None = None,
        plugin: str = "",
    ):
        if on_error not in ON_ERROR:
            raise ValueError(f"on_error must be one of {', '.join(ON_ERROR)}, got {on_error!r}")
        self.fn = fn
        self.__name__ = name or getattr(fn, "__name__", type(fn).__name__)
        self.on_error = on_error
        self.timeout = timeout
        self.plugin = plugin
        self.stats = RewardStats()
        self._running: Future[Any] | None = None

    def __repr__(self) -> str:
        return f"SafeReward({self.__name__!r}, on_error={self.on_error!r}, timeout={self.timeout})"

    @property
    def _fill(self) -> float | None:
        return 0.0 if self.on_error == "zero" else None

    def _report(self, kind: str, message: str) -> None:
        who = f"reward {self.__name__!r}" + (f" (plugin {self.plugin!r})" if self.plugin else "")
        text = f"{who}: {message}"
        self.stats.failures += 1
        self.stats.last_failure = text
        self.stats.failure_kinds[kind] = self.stats.failure_kinds.get(kind, 0) + 1
        if self.on_error == "raise":
            raise RewardError(text)
        log.warning("%s; scored %s", text, self._fill)

    def __call__(self, completions: list[Any], **columns: Any) -> list[float | None]:
        n = len(completions)
        self.stats.calls += 1
        self.stats.rows += n
        start = time.perf_counter()
        try:
            result = self._invoke(completions, columns)
        except _Failed as failed:
            self._report(failed.kind, failed.message)
            return [self._fill] * n
        finally:
            self.stats.seconds += time.perf_counter() - start
        return self._check(result, n)

    def _invoke(self, completions: list[Any], columns: dict[str, Any]) -> Any:
        if self.timeout is None:
            try:
                return self.fn(completions, **columns)
            except Exception as exc:
                raise _Failed("exception", f"raised {type(exc).__name__}: {exc}") from exc
        if self._running is not None and not self._running.done():
            raise _Failed("timeout", "still running from an earlier call that timed out")
        future: Future[Any] = Future()

        def target() -> None:
            try:
                future.set_result(self.fn(completions, **columns))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                future.set_exception(exc)

        threading.Thread(target=target, name=f"reward-{self.__name__}", daemon=True).start()
        try:
            return future.result(timeout=self.timeout)
        except TimeoutError:
            self._running = future
            raise _Failed("timeout", f"took longer than {self.timeout:g}s") from None
        except Exception as exc:
            raise _Failed("exception", f"raised {type(exc).__name__}: {exc}") from exc

    def _check(self, result: Any, n: int) -> list[float | None]:
        try:
            values = list(result)
        except TypeError:
            self._report("type", f"returned {type(result).__name__}, expected a list of {n} numbers or None")
            return [self._fill] * n
        if len(values) != n:
            self._report("length", f"returned {len(values)} scores for {n} completions")
            return [self._fill] * n
        out: list[float | None] = []
        bad: list[str] = []
        for i, v in enumerate(values):
            if v is None:
                out.append(None)
            elif isinstance(v, numbers.Real) and math.isfinite(float(v)):
                out.append(float(v))
            else:
                bad.append(f"row {i}: {v!r}")
                out.append(self._fill)
        if bad:
            more = f" (+{len(bad) - 3} more)" if len(bad) > 3 else ""
            self._report("value", f"returned non-finite or non-numeric scores: {', '.join(bad[:3])}{more}")
        return out


class _Failed(Exception):
    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind
        self.message = message
