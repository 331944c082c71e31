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
    (:class:`~grpo_rewards.reward_worker.RewardWorker`), which is killed at the deadline
    and restarted for the next call, so a hang in any code (a regex, a C extension) costs
    one timeout, never the run. A reward that does not pickle (a closure, a lambda, or
    anything defined in ``__main__``) cannot be moved to a process: it runs in a thread
    instead (so does one whose worker cannot load it, e.g. its module is not importable
    there), and a timeout only stops *waiting* for it. Its thread keeps running and the
    reward is not called again until that thread returns (those calls fail as timeouts),
    so write rewards as module-level functions or classes to get real timeouts.
"""

from __future__ import annotations

import decimal
import inspect
import logging
import math
import numbers
import os
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from grpo_rewards.reward_worker import RewardWorker, WorkerFailed, pickled_or_none

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


# ------------------------------------------------------------------ scoring one batch ----


@dataclass
class BatchOutcome:
    """What one call produced: ``values`` (one per row), or a whole-call failure (``kind``, ``message``).

    ``row_failures`` maps a row to why it has no score (it raised on its own, or its value
    was not a finite number); ``where`` is ``file:line`` of the first exception raised.
    """

    values: list[float | None] | None
    kind: str = ""
    message: str = ""
    where: str = ""
    row_failures: dict[int, tuple[str, str]] = field(default_factory=dict)  # row -> (kind, why)


def to_score(value: Any) -> float | None:
    """A reward's value for one row as a float (or None); ``ValueError`` for anything else or non-finite."""
    if value is None:
        return None
    if isinstance(value, (numbers.Real, decimal.Decimal)):
        out = float(value)
    elif _is_scalar_like(value):  # a 0-d or one-element tensor/array
        item = value.item()
        if not isinstance(item, (numbers.Real, decimal.Decimal)):
            raise ValueError(repr(value))
        out = float(item)
    else:
        raise ValueError(repr(value))
    if not math.isfinite(out):
        raise ValueError(repr(value))
    return out


def _is_scalar_like(value: Any) -> bool:
    """A one-element tensor or array (``torch.tensor(1.0)``, ``np.array([1.0])``)."""
    if isinstance(value, (str, bytes)) or not callable(getattr(value, "item", None)):
        return False
    size = getattr(value, "numel", None) or getattr(value, "size", None)
    try:
        return (size() if callable(size) else size) == 1
    except Exception:  # noqa: BLE001
        return False


def _as_list(result: Any) -> list[Any]:
    if isinstance(result, (str, bytes, dict)) or not hasattr(result, "__iter__"):
        raise TypeError(type(result).__name__)
    if getattr(result, "ndim", 1) == 0:  # a 0-d tensor/array is one number, not a list
        raise TypeError(type(result).__name__)
    return list(result)


def _row_columns(columns: dict[str, Any], i: int, n: int) -> dict[str, Any]:
    """Row ``i`` of every per-row column (a sequence of length ``n``); other keyword values as they are."""
    out = {}
    for key, value in columns.items():
        if not isinstance(value, (str, bytes, dict)) and hasattr(value, "__getitem__") and _len(value) == n:
            out[key] = value[i : i + 1]
        else:
            out[key] = value
    return out


def _len(value: Any) -> int | None:
    try:
        return len(value)
    except TypeError:
        return None


def _where(exc: BaseException, fn: Any) -> str:
    """``file:line`` where ``exc`` was raised: the deepest frame in the reward's own file if any."""
    frames = traceback.extract_tb(exc.__traceback__)
    frames = [f for f in frames if f.filename != __file__]
    if not frames:
        return ""
    try:
        source = inspect.getsourcefile(fn if inspect.isfunction(fn) else type(fn)) or ""
    except (TypeError, OSError):
        source = ""
    source = os.path.realpath(source) if source else ""
    own = [f for f in frames if source and os.path.realpath(f.filename) == source]
    frame = (own or frames)[-1]
    return f"{frame.filename}:{frame.lineno}"


def _describe(exc: BaseException) -> str:
    return f"raised {type(exc).__name__}: {exc}"


def score_batch(fn: Callable[..., Any], completions: list[Any], columns: dict[str, Any]) -> BatchOutcome:
    """Call ``fn`` on the batch, retrying row by row if it raises; values converted by :func:`to_score`."""
    n = len(completions)
    try:
        result = fn(completions, **columns)
    except Exception as exc:  # noqa: BLE001 - retried row by row below
        if n <= 1:
            return BatchOutcome(None, "exception", _describe(exc), _where(exc, fn))
        return _row_by_row(fn, completions, columns, exc)
    try:
        raw = _as_list(result)
    except TypeError:
        return BatchOutcome(None, "type", f"returned {type(result).__name__}, expected a list of {n} numbers or None")
    if len(raw) != n:
        return BatchOutcome(None, "length", f"returned {len(raw)} scores for {n} completions")
    outcome = BatchOutcome([None] * n)
    assert outcome.values is not None
    for i, value in enumerate(raw):
        try:
            outcome.values[i] = to_score(value)
        except ValueError as exc:
            outcome.row_failures[i] = ("value", str(exc))
    return outcome


def _row_by_row(fn: Callable[..., Any], completions: list[Any], columns: dict[str, Any], first: Exception) -> BatchOutcome:
    n = len(completions)
    outcome = BatchOutcome([None] * n, where=_where(first, fn))
    assert outcome.values is not None
    for i in range(n):
        try:
            raw = _as_list(fn(completions[i : i + 1], **_row_columns(columns, i, n)))
            if len(raw) != 1:
                raise ValueError(f"returned {len(raw)} scores for 1 completion")
        except Exception as exc:  # noqa: BLE001 - this row alone fails
            outcome.row_failures[i] = ("exception", _describe(exc))
            continue
        try:
            outcome.values[i] = to_score(raw[0])
        except ValueError as exc:
            outcome.row_failures[i] = ("value", str(exc))
    if len(outcome.row_failures) == n and all(k == "exception" for k, _ in outcome.row_failures.values()):
        return BatchOutcome(None, "exception", _describe(first), outcome.where)
    return outcome


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
        self._running: Future[Any] | None = None
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
        """Stop the worker process, if any (a later call starts a new one)."""
        if self._worker is not None:
            self._worker.close()

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
        n = len(completions)
        with self._lock:
            self.stats.calls += 1
            self.stats.rows += n
            start = time.perf_counter()
            try:
                outcome = self._invoke(list(completions), columns)
            finally:
                self.stats.seconds += time.perf_counter() - start
            return self._apply(outcome, n)

    def _apply(self, outcome: BatchOutcome, n: int) -> list[float | None]:
        if outcome.values is None:
            self.stats.failures += 1
            self.stats.failed_rows += n
            self._report(outcome.kind, outcome.message, outcome.where, n)
            self._count_consecutive(failed=n > 0)
            return [self._fill] * n
        values = list(outcome.values)
        if outcome.row_failures:
            self.stats.failures += 1
            self.stats.failed_rows += len(outcome.row_failures)
            for i in outcome.row_failures:
                values[i] = self._fill
            by_kind: dict[str, list[str]] = {}
            for i, (kind, why) in sorted(outcome.row_failures.items()):
                by_kind.setdefault(kind, []).append(f"row {i}: {why}")
            for kind, items in by_kind.items():
                more = f" (+{len(items) - 3} more)" if len(items) > 3 else ""
                what = "raised on its own" if kind == "exception" else "returned non-finite or non-numeric scores"
                self._report(kind, f"{what}: {', '.join(items[:3])}{more}", outcome.where if kind == "exception" else "",
                             len(items))
        self._count_consecutive(failed=n > 0 and len(outcome.row_failures) == n)
        return values

    def _count_consecutive(self, *, failed: bool) -> None:
        self.stats.consecutive_failures = self.stats.consecutive_failures + 1 if failed else 0
        limit = self.max_consecutive_failures
        if limit and self.stats.consecutive_failures >= limit:
            raise RewardError(
                f"{self._who} failed {self.stats.consecutive_failures} calls in a row (last: "
                f"{self.stats.last_failure}); fix the reward, or raise max_consecutive_failures (0: never stop)"
            )

    def _invoke(self, completions: list[Any], columns: dict[str, Any]) -> BatchOutcome:
        if self._worker is not None:
            try:
                outcome, self._metrics = self._worker.call(completions, columns, self.timeout)
            except WorkerFailed as failed:
                if failed.kind == "unsendable":  # this call only
                    return self._in_thread(completions, columns)
                if failed.kind != "load":
                    return BatchOutcome(None, failed.kind, failed.message)
                log.warning("%s %s; it runs in a thread from now on (a timeout cannot stop it there)",
                            self._who, failed.message)
                self._worker, self.isolation = None, "thread"
                return self._in_thread(completions, columns)
            return outcome
        return self._in_thread(completions, columns)

    def _in_thread(self, completions: list[Any], columns: dict[str, Any]) -> BatchOutcome:
        if self._running is not None and not self._running.done():
            return BatchOutcome(None, "timeout", "still running from an earlier call that timed out "
                                "(it does not pickle, so it runs in a thread that cannot be stopped)")
        future: Future[BatchOutcome] = Future()

        def target() -> None:
            try:
                future.set_result(score_batch(self.fn, completions, columns))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                future.set_exception(exc)

        threading.Thread(target=target, name=f"reward-{self.__name__}", daemon=True).start()
        try:
            return future.result(timeout=self.timeout)
        except TimeoutError:
            self._running = future
            return BatchOutcome(None, "timeout", f"took longer than {self.timeout:g}s (it does not pickle, so it "
                                "runs in a thread that cannot be stopped)")
        except BaseException as exc:  # noqa: BLE001 - e.g. SystemExit from the reward
            return BatchOutcome(None, "exception", _describe(exc))
