"""The reward contract, enforced: a reward that raises, hangs, or returns junk never takes a run down.

:class:`SafeReward` wraps any TRL-style batch reward ``fn(completions, **columns)``.

Scores
    One entry per completion, each a finite number or ``None``. ``None`` means the reward does
    not apply to that row: the row is left out of that reward's mean and its term is left out of
    the weighted total (as in TRL); a row where every reward returned ``None`` has no total, gets
    advantage 0, and is named in a warning. Numbers may be
    Python numbers, ``numpy`` scalars, 0-d ``torch`` tensors or ``Decimal`` (TRL accepts
    them too); they become floats. The result may also be a tensor or an array.

Failures
    An exception, a wrong length, a NaN/inf or non-number, a timeout or a crashed worker is
    reported with the reward's name and plugin, and the affected rows are replaced
    according to ``on_error``:

    ``"none"`` (default)  the affected rows score ``None`` (they do not count)
    ``"zero"``            the affected rows score ``0.0``
    ``"raise"``           a :class:`RewardError` naming the reward is raised

    When a call raises, each row is retried on its own, so only the rows that raise lose
    their score. The first failure of each kind is logged with the file and line that
    raised it; later ones are counted in :attr:`SafeReward.stats`, not logged again.
    After ``max_consecutive_failures`` calls in a row that scored no row at all, a
    :class:`RewardError` is raised whatever ``on_error`` says: a reward that is always
    broken must stop a run loudly rather than train on nothing.

Timeouts
    Every call has a deadline (``timeout``, :data:`DEFAULT_TIMEOUT` seconds unless set).
    A reward that pickles runs in its own worker process
    (:class:`~grpo_rewards.reward_worker.RewardWorker`, on :mod:`grpo_rewards.isolation`), which is killed at the deadline
    and restarted for the next call, so a hang in any code (a regex, a C extension) costs
    one timeout, never the run. A reward that does not pickle (a closure, a lambda, or
    anything defined in ``__main__``) cannot be moved to a process: it runs in a thread
    instead (so does one whose worker cannot load it, e.g. its module is not importable
    there), and a timeout only stops *waiting* for it. Its thread keeps running and the
    reward is not called again until that thread returns (those calls fail as timeouts),
    so write rewards as module-level functions or classes to get real timeouts.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from grpo_rewards.batch_outcome import BatchOutcome, describe_exception, score_batch, to_score
from grpo_rewards.isolation.failed import WorkerFailed
from grpo_rewards.isolation.process import pickled_or_none
from grpo_rewards.isolation.thread import ThreadRunner
from grpo_rewards.reward_worker import RewardWorker

__all__ = ["DEFAULT_MAX_CONSECUTIVE_FAILURES", "DEFAULT_TIMEOUT", "ON_ERROR", "BatchOutcome", "RewardError",
           "RewardStats", "SafeReward", "score_batch", "to_score"]  # the batch_outcome names importable here as before

log = logging.getLogger("grpo.rewards")

ON_ERROR = ("none", "zero", "raise")
DEFAULT_TIMEOUT = 300.0  # seconds per call: generous for a sandbox running a batch of programs
DEFAULT_MAX_CONSECUTIVE_FAILURES = 3


class RewardError(RuntimeError):
    """A reward broke its contract and the policy is ``raise``, or it failed too many calls in a row."""


@dataclass
class RewardStats:
    calls: int = 0
    rows: int = 0
    seconds: float = 0.0
    failures: int = 0  # calls with at least one failure
    failed_rows: int = 0
    consecutive_failures: int = 0  # calls in a row that scored no row at all
    last_failure: str = ""
    failure_kinds: dict[str, int] = field(default_factory=dict)


# ------------------------------------------------------------------ the wrapper ----


class SafeReward:
    """A reward wrapped so that its failures are reported, not fatal, and its calls have a deadline
    (see module docs)."""

    def __init__(
        self,
        fn: Callable[..., Any],
        name: str | None = None,
        *,
        on_error: str = "none",
        timeout: float | None = None,
        plugin: str = "",
        max_consecutive_failures: int = DEFAULT_MAX_CONSECUTIVE_FAILURES,
    ):
        if on_error not in ON_ERROR:
            raise ValueError(f"on_error must be one of {', '.join(ON_ERROR)}, got {on_error!r}")
        timeout = DEFAULT_TIMEOUT if timeout is None else timeout
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not (0 < timeout < math.inf):
            raise ValueError(f"timeout must be a positive, finite number of seconds, got {timeout!r}")
        if isinstance(max_consecutive_failures, bool) or not isinstance(max_consecutive_failures, int) \
                or max_consecutive_failures < 0:
            raise ValueError(f"max_consecutive_failures must be a whole number >= 0 (0: never stop), "
                             f"got {max_consecutive_failures!r}")
        if isinstance(fn, SafeReward):
            fn = fn.fn
        self.fn = fn
        self.__name__ = name or getattr(fn, "__name__", type(fn).__name__)
        self.on_error = on_error
        self.timeout = float(timeout)
        self.plugin = plugin
        self.max_consecutive_failures = max_consecutive_failures
        self.stats = RewardStats()
        self._init_runtime()

    def _init_runtime(self) -> None:
        payload = pickled_or_none(self.fn)
        self.isolation = "process" if payload is not None else "thread"
        self._worker = RewardWorker(payload, self.__name__) if payload is not None else None
        self._metrics: dict[str, Any] = {}
        self._thread = ThreadRunner(f"reward-{self.__name__}")
        self._logged: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        state = {k: v for k, v in self.__dict__.items() if k in (
            "fn", "__name__", "on_error", "timeout", "plugin", "max_consecutive_failures", "stats")}
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_runtime()

    def __repr__(self) -> str:
        return (f"SafeReward({self.__name__!r}, on_error={self.on_error!r}, timeout={self.timeout:g}, "
                f"isolation={self.isolation!r})")

    def metrics(self) -> dict[str, Any]:
        """The wrapped reward's own ``metrics()`` (from its worker process when it runs in one)."""
        if self._worker is not None:
            return dict(self._metrics)
        report = getattr(self.fn, "metrics", None)
        return dict(report()) if callable(report) else {}

    def close(self) -> None:
        """Stop the worker process, if any, or what a reward running in a thread holds (its own ``close()``: a
        reward model's process); a later call starts them again."""
        if self._worker is not None:
            self._worker.close()
            return
        close = getattr(self.fn, "close", None)
        if callable(close):
            close()

    @property
    def _fill(self) -> float | None:
        return 0.0 if self.on_error == "zero" else None

    @property
    def _who(self) -> str:
        return f"reward {self.__name__!r}" + (f" (plugin {self.plugin!r})" if self.plugin else "")

    def _report(self, kind: str, message: str, where: str = "", rows: int = 0) -> None:
        text = f"{self._who}: {message}"
        self.stats.last_failure = text
        self.stats.failure_kinds[kind] = self.stats.failure_kinds.get(kind, 0) + 1
        if self.on_error == "raise":
            raise RewardError(text + (f" (at {where})" if where else ""))
        key = (kind, where)  # once per kind of failure (and per raising line), whatever the rows and values
        if key in self._logged:
            log.debug("%s; scored %s", text, self._fill)
            return
        self._logged.add(key)
        at = f" at {where}" if where else ""
        log.warning("%s%s; scored %s (%d row(s); later failures like this are counted in the reward's stats, "
                    "not logged)", text, at, self._fill, rows)

    def __call__(self, completions: list[Any], **columns: Any) -> list[float | None]:
        batch = self.in_parts()
        values = batch(completions, **columns)
        batch.close()
        return values

    def in_parts(self) -> BatchInParts:
        """One batch scored part by part (``part(completions, **columns)`` for each, then ``close()``), with
        the rules of one call: the parts share one ``timeout``, count as one call in :attr:`stats` and as one
        call towards ``max_consecutive_failures``, and each part's failed rows are filled as a call's are."""
        return BatchInParts(self)

    def _apply(self, outcome: BatchOutcome, n: int, batch: BatchInParts) -> list[float | None]:
        if outcome.values is None:
            batch.failed(n)
            self._report(outcome.kind, outcome.message, outcome.where, n)
            return [self._fill] * n
        values = list(outcome.values)
        if outcome.row_failures:
            batch.failed(len(outcome.row_failures))
            for i in outcome.row_failures:
                values[i] = self._fill
            by_kind: dict[str, list[str]] = {}
            for i, (kind, why) in sorted(outcome.row_failures.items()):
                by_kind.setdefault(kind, []).append(f"row {i + batch.rows - n}: {why}")
            for kind, items in by_kind.items():
                more = f" (+{len(items) - 3} more)" if len(items) > 3 else ""
                what = "raised on its own" if kind == "exception" else "returned non-finite or non-numeric scores"
                self._report(kind, f"{what}: {', '.join(items[:3])}{more}", outcome.where if kind == "exception" else "",
                             len(items))
        return values

    def _count_consecutive(self, *, failed: bool) -> None:
        self.stats.consecutive_failures = self.stats.consecutive_failures + 1 if failed else 0
        limit = self.max_consecutive_failures
        if limit and self.stats.consecutive_failures >= limit:
            raise RewardError(
                f"{self._who} failed {self.stats.consecutive_failures} calls in a row (last: "
                f"{self.stats.last_failure}); fix the reward, or raise max_consecutive_failures (0: never stop)"
            )

    def _invoke(self, completions: list[Any], columns: dict[str, Any], timeout: float) -> BatchOutcome:
        if self._worker is not None:
            try:
                outcome, self._metrics = self._worker.call(completions, columns, timeout)
            except WorkerFailed as failed:
                if failed.kind == "unsendable":  # this call only
                    return self._in_thread(completions, columns, timeout)
                if failed.kind != "load":
                    return BatchOutcome(None, failed.kind, failed.message)
                log.warning("%s %s; it runs in a thread from now on (a timeout cannot stop it there)",
                            self._who, failed.message)
                self._worker, self.isolation = None, "thread"
                return self._in_thread(completions, columns, timeout)
            return outcome
        return self._in_thread(completions, columns, timeout)

    def _in_thread(self, completions: list[Any], columns: dict[str, Any], timeout: float) -> BatchOutcome:
        try:
            return self._thread.call(score_batch, self.fn, completions, columns, timeout=timeout)
        except WorkerFailed as failed:
            return BatchOutcome(None, "timeout", f"{failed.message} (it does not pickle, so it runs in a thread "
                                "that cannot be stopped)")
        except BaseException as exc:  # noqa: BLE001 - e.g. SystemExit from the reward
            return BatchOutcome(None, "exception", describe_exception(exc))


class BatchInParts:
    """One batch of a :class:`SafeReward` scored in parts (:meth:`SafeReward.in_parts`): each part is a call of
    the reward on its rows, with what is left of the reward's ``timeout`` (a part that finds none left fails as
    a timeout without calling); ``close()`` counts the batch once towards ``max_consecutive_failures``."""

    def __init__(self, reward: SafeReward):
        self.reward = reward
        self.rows = 0  # rows handed over so far (a part's row numbers in messages count from the batch's start)
        self.failed_rows = 0
        self.seconds = 0.0
        self._called = self._counted = False

    def failed(self, rows: int) -> None:
        stats = self.reward.stats
        if not self._counted:  # a batch with failures in several parts is one failed call
            stats.failures += 1
            self._counted = True
        stats.failed_rows += rows
        self.failed_rows += rows

    def __call__(self, completions: list[Any], **columns: Any) -> list[float | None]:
        reward, n = self.reward, len(completions)
        with reward._lock:
            if not self._called:
                reward.stats.calls += 1
                self._called = True
            reward.stats.rows += n
            self.rows += n
            left = reward.timeout - self.seconds
            start = time.perf_counter()
            try:
                outcome = (reward._invoke(list(completions), columns, left) if left > 0 else
                           BatchOutcome(None, "timeout", f"took longer than {reward.timeout:g}s (the batch's parts "
                                        "together)"))
            finally:
                spent = time.perf_counter() - start
                reward.stats.seconds += spent
                self.seconds += spent
            return reward._apply(outcome, n, self)

    def close(self) -> None:
        """Count the batch towards ``max_consecutive_failures`` (raises :class:`RewardError` at the limit)."""
        with self.reward._lock:
            self.reward._count_consecutive(failed=self.rows > 0 and self.failed_rows == self.rows)
