"""A process pool that runs ``fn(*item)`` for many items with a hard per-item time limit.

Part of the isolation layer (:mod:`grpo_rewards.isolation`, which says why this pool and the per-reward
process worker are two mechanisms).

Verifiers that call sympy (math-verify) can hang on a pathological input, and
math-verify's own timeouts use ``signal.alarm``, which only works in the main
thread; a reward may be called from any thread (``SafeReward`` runs a reward that
does not pickle in a thread). So items run in child processes (a :class:`pebble.ProcessPool`)
and each item gets ``timeout`` seconds, enforced three ways:

1. Items travel in chunks (one IPC round trip per chunk, not per item). In the
   child, each item runs under a ``SIGALRM`` interval timer whose handler raises,
   so Python-level work stops at its deadline and the next item of the chunk runs.
2. A C-level computation (a huge integer power inside sympy) never returns to the
   interpreter to run that handler, so each item also arms ``ITIMER_PROF`` with
   the default action of ``SIGPROF`` (terminate): after ``timeout + 1`` seconds
   of CPU the kernel kills the child.
3. A chunk that dies (2.) or overruns ``timeout * len(chunk) + grace`` is rerun one
   item per task with pebble's own per-task timeout, which kills and replaces the
   worker; an item that times out there is reported as timed out.

A call may also have a ``budget``: wall-clock seconds for the whole call. Items
still unfinished when it runs out are cancelled (their workers killed) and
reported as timed out, so a batch full of slow items costs at most the budget.

The pool is started lazily on first use, reused by every later call with the same
``(workers, start_method)``, rebuilt after a ``fork`` of the parent, and shut down
at exit (:func:`shutdown`). Workers start with ``spawn`` by default: forking a
process that runs threads (a trainer) can deadlock the child. With ``spawn`` the
main script must keep its top-level code under ``if __name__ == "__main__":``,
as for any ``multiprocessing`` program.
"""

from __future__ import annotations

import atexit
import math
import multiprocessing
import multiprocessing.util
import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import TimeoutError as FutureTimeout
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from grpo_rewards.cpus import cpu_share

if TYPE_CHECKING:
    from pebble import ProcessPool


START_METHODS = ("spawn", "forkserver", "fork")
MAX_CHUNK = 16  # items per task: amortizes IPC; a killed chunk reruns at most this many items singly
CHUNK_GRACE_S = 2.0  # added to a chunk's wall-clock deadline: its pickling and IPC
CPU_GRACE_S = 1.0  # the SIGPROF backstop fires this much CPU time after the item's deadline


@dataclass(frozen=True)
class Outcome:
    """What happened to one item: ``ok`` with ``value``, or ``timeout``/``error`` with a ``reason``. (Shaped like a
    verifier's :class:`~grpo_rewards.verdict.Verdict`, but it says whether the work ran, not what it judged.)"""

    status: str
    value: Any = None
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


# ------------------------------------------------------------ worker side ----


class _ItemTimeout(BaseException):
    """Raised by the SIGALRM handler; a BaseException so that ``except Exception`` inside fn cannot swallow it."""


_armed = False


def _on_alarm(signum: int, frame: Any) -> None:
    if _armed:
        raise _ItemTimeout()


def _worker_init(initializer: Callable[[], None] | None) -> None:
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.signal(signal.SIGPROF, signal.SIG_DFL)
    if initializer is not None:
        initializer()


def _run_one(fn: Callable[..., Any], item: Sequence[Any], timeout: float) -> Outcome:
    global _armed
    try:  # armed inside the try, so the finally always disarms: a live ITIMER_PROF would kill an idle worker
        _armed = True
        signal.setitimer(signal.ITIMER_PROF, timeout + CPU_GRACE_S)
        signal.setitimer(signal.ITIMER_REAL, timeout)
        return Outcome("ok", fn(*item))
    except _ItemTimeout:
        return Outcome("timeout", reason=f"timed out after {timeout:g}s")
    except Exception as exc:  # noqa: BLE001 - reported per item
        return Outcome("error", reason=f"{type(exc).__name__}: {str(exc)[:200]}")
    finally:
        _armed = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.setitimer(signal.ITIMER_PROF, 0)


def _run_chunk(fn: Callable[..., Any], items: Sequence[Sequence[Any]], timeout: float) -> list[Outcome]:
    out: list[Outcome] = []
    for item in items:
        try:
            out.append(_run_one(fn, item, timeout))
        except _ItemTimeout:  # the alarm landed between the item's end and its disarming
            out.append(Outcome("timeout", reason=f"timed out after {timeout:g}s"))
    return out


# ------------------------------------------------------------ parent side ----


_pools: dict[tuple[int, str, Any], tuple[int, ProcessPool]] = {}  # pebble is imported on first use
_lock = threading.Lock()


def default_workers() -> int:
    """One worker per CPU of this process's share (grpo_rewards.cpus: split among the training processes on
    this machine), at most 8."""
    return max(1, min(8, cpu_share()))


def _get_pool(workers: int, start_method: str, initializer: Callable[[], None] | None) -> ProcessPool:
    # lazy: registering the built-in rewards imports this module, and few runs need a pool
    from pebble import ProcessPool

    key = (workers, start_method, initializer)
    with _lock:
        entry = _pools.get(key)
        if entry is not None and entry[0] == os.getpid() and entry[1].active:
            return entry[1]
        if entry is not None and entry[0] == os.getpid():
            _stop(entry[1])
        pool = ProcessPool(
            max_workers=workers,
            initializer=_worker_init,
            initargs=(initializer,),
            context=multiprocessing.get_context(start_method),
        )
        _pools[key] = (os.getpid(), pool)
        return pool


def _stop(pool: ProcessPool) -> None:
    pool.stop()
    pool.join(timeout=10)


def shutdown() -> None:
    """Stop every pool this process started and wait for its workers to exit."""
    with _lock:
        entries = list(_pools.values())
        _pools.clear()
    for pid, pool in entries:
        if pid == os.getpid():
            _stop(pool)


atexit.register(shutdown)
# A process started by multiprocessing (a process pool's worker, TRL's async trainer) runs no atexit hooks, and its
# exit waits for every non-daemon child it has: stop the pools before that wait, or the exit hangs on our workers.
multiprocessing.util.Finalize(None, shutdown, exitpriority=100)


def _chunks(n: int, workers: int) -> list[range]:
    size = max(1, min(MAX_CHUNK, math.ceil(n / (workers * 4))))
    return [range(i, min(n, i + size)) for i in range(0, n, size)]


def run_items(
    fn: Callable[..., Any],
    items: Sequence[Sequence[Any]],
    *,
    timeout: float,
    workers: int = 0,
    start_method: str = "spawn",
    initializer: Callable[[], None] | None = None,
    budget: float | None = None,
) -> list[Outcome]:
    """``fn(*item)`` for every item in child processes, each within ``timeout`` seconds (see module docs).

    ``fn`` and ``initializer`` must be importable top-level functions (they are
    pickled by name). Returns one :class:`Outcome` per item, in order; never raises
    for a failing, hanging or crashing item. Safe to call from any thread. With a
    ``budget``, the call returns within about that many seconds: unfinished items
    are timed out.
    """
    if not items:
        return []
    if not (timeout > 0 and math.isfinite(timeout)):
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    if budget is not None and not budget > 0:
        raise ValueError(f"budget must be a positive number of seconds, got {budget!r}")
    deadline = None if budget is None else time.monotonic() + budget
    if start_method not in START_METHODS:
        raise ValueError(f"start_method must be one of {', '.join(START_METHODS)}, got {start_method!r}")
    workers = workers or default_workers()
    results: list[Outcome | None] = [None] * len(items)
    pool = _get_pool(workers, start_method, initializer)
    chunks = _chunks(len(items), workers)
    futures = [
        pool.schedule(_run_chunk, (fn, [items[i] for i in idx], timeout), timeout=timeout * len(idx) + CHUNK_GRACE_S)
        for idx in chunks
    ]
    retry: list[int] = []
    for idx, future in zip(chunks, futures, strict=True):
        try:
            results[idx.start : idx.stop] = future.result(timeout=_left(deadline))
        except FutureTimeout:
            if deadline is not None and time.monotonic() >= deadline:
                future.cancel()  # over the call's budget: the chunk's items are timed out, not retried
                results[idx.start : idx.stop] = [_over_budget(budget)] * len(idx)
            else:
                retry.extend(idx)
        except Exception:  # noqa: BLE001 - timed out, killed by SIGPROF, or unpicklable: rerun item by item
            retry.extend(idx)
    if retry:
        pool = _get_pool(workers, start_method, initializer)  # a fresh pool if the first one broke
        try:
            singles = [
                pool.schedule(_run_chunk, (fn, [items[i]], timeout), timeout=timeout + CHUNK_GRACE_S) for i in retry
            ]
            for i, future in zip(retry, singles, strict=True):
                results[i] = _single_result(future, timeout, deadline, budget)
        except (RuntimeError, BrokenProcessPool) as exc:
            raise RuntimeError(
                f"the worker processes ({start_method!r} start method) keep failing: {exc}. With 'spawn' or "
                "'forkserver' the main script must guard its top-level code with `if __name__ == \"__main__\":` "
                "and be a file (not stdin); start_method = 'fork' avoids both"
            ) from exc
    return [r if r is not None else Outcome("error", reason="no result") for r in results]


def _left(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.0, deadline - time.monotonic())


def _over_budget(budget: float | None) -> Outcome:
    return Outcome("timeout", reason=f"the call's time budget of {budget:g}s ran out")


def _single_result(future: Any, timeout: float, deadline: float | None = None, budget: float | None = None) -> Outcome:
    from pebble import ProcessExpired  # lazy, as in _get_pool

    try:
        return future.result(timeout=_left(deadline))[0]
    except FutureTimeout:
        if deadline is not None and time.monotonic() >= deadline and not future.done():
            future.cancel()
            return _over_budget(budget)
        return Outcome("timeout", reason=f"timed out after {timeout:g}s (worker killed)")
    except ProcessExpired as exc:
        if exc.exitcode == -signal.SIGPROF:
            return Outcome("timeout", reason=f"used over {timeout + CPU_GRACE_S:g}s of CPU (worker killed)")
        return Outcome("error", reason=f"worker died (exit code {exc.exitcode})")
    except BrokenProcessPool:
        raise
    except Exception as exc:  # noqa: BLE001 - e.g. an unpicklable result
        return Outcome("error", reason=f"{type(exc).__name__}: {str(exc)[:200]}")
