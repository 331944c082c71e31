"""One reward in its own killable process: a call that runs past its deadline is stopped, not abandoned.

:class:`RewardWorker` pickles a reward once, starts a child process (a fresh
interpreter: the parent's ``__main__`` is never re-run in it, so a training script needs
no ``if __name__ == "__main__"`` guard) that unpickles it and then serves calls over a
pipe, one batch at a time. The reward object
lives in the child for the whole run, so its caches, connections and counters persist
between calls exactly as they would in-process (its ``metrics()``, when it has one, is
sent back after every call, and so are the records it logged, which the parent's loggers
then handle as their own). A call that does not answer within its timeout kills the
child's whole process group (``SIGKILL``: regex backtracking or a C extension holding
the GIL cannot ignore it, and the reward's own children go with it); the next call
starts a fresh child. Starting a child (imports, unpickling) has its own deadline,
``start_timeout``, which does not count against the first call.

Why not :mod:`grpo_rewards.builtins.timeout_pool`: that pool runs independent items
on shared workers and pickles ``fn`` with every task, so a stateful reward would lose
its state between calls; and a killed chunk is rerun item by item, which doubles the
wall time of a hang. Here one batch is one call to one long-lived object.

The scoring itself (batch call, row-by-row retry, value conversion) is
:func:`grpo_rewards.contract.score_batch`; it runs the same way in the child as in
the thread fallback, so both paths give the same scores.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import pickle
import signal
import subprocess
import sys
import threading
import weakref
from multiprocessing.connection import Connection
from typing import Any

DEFAULT_START_TIMEOUT = 120.0
_ORIGINAL_PATH = "GRPO_REWARD_WORKER_PYTHONPATH"


class WorkerFailed(Exception):
    """The child did not answer: ``kind`` is ``timeout``, ``crash``, ``load`` (the reward could not be
    unpickled in the child, e.g. its module cannot be imported there) or ``unsendable`` (a column does
    not pickle; nothing was sent)."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind
        self.message = message


def pickled_or_none(fn: Any) -> bytes | None:
    """``fn`` pickled, or None when it cannot cross a process boundary safely.

    A closure, a lambda or a local class does not pickle. Something that pickles but is
    defined in ``__main__`` (a training script) is refused too: a ``spawn`` child would
    re-run the script's top-level code to find it.
    """
    try:
        data = pickle.dumps(fn, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 - any failure means "not picklable"
        return None
    return None if b"__main__" in data else data


class _Collect(logging.Handler):
    """Keeps the child's log records of one call, to be sent to the parent with its result."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        state = dict(record.__dict__)
        state["msg"], state["args"] = record.getMessage(), None  # arguments may not pickle
        if record.exc_info:
            state["exc_text"] = logging.Formatter().formatException(record.exc_info)
        state["exc_info"] = None
        state["processName"] = f"reward worker {os.getpid()}"
        self.records.append(state)


class _Recorder:
    """Stands in the child for a callable keyword argument (TRL's ``log_metric``, ``log_extra``): the calls
    are recorded and made in the parent after the batch, with the same arguments."""

    def __init__(self, name: str, calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]]):
        self.name, self.calls = name, calls

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        self.calls.append((self.name, args, kwargs))


def _picklable(calls: list[Any]) -> list[Any]:
    out = []
    for call in calls:
        try:
            pickle.dumps(call)
        except Exception:  # noqa: BLE001 - a call whose arguments cannot travel is dropped
            continue
        out.append(call)
    return out


def split_callbacks(columns: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(data, callbacks)``: callable keyword arguments (bound methods of a trainer, which must not be
    pickled with it) are replaced by recorders in the child and called here afterwards."""
    callbacks = {k: v for k, v in columns.items() if callable(v) and not isinstance(v, type)}
    return {k: v for k, v in columns.items() if k not in callbacks}, callbacks


def replay(records: list[dict[str, Any]]) -> None:
    """Hand a child's log records to the parent's loggers, as if they were logged here."""
    for state in records:
        record = logging.makeLogRecord(state)
        logger = logging.getLogger(record.name)
        if logger.isEnabledFor(record.levelno):
            logger.handle(record)


class _Pipes:
    """One pipe each way over inherited file descriptors (``multiprocessing.connection`` framing)."""

    def __init__(self, send_fd: int, recv_fd: int):
        self.out = Connection(send_fd, readable=False)
        self.inp = Connection(recv_fd, writable=False)

    def close(self) -> None:
        self.out.close()
        self.inp.close()


def _main() -> None:
    """Entry point of the child process: ``python -c ... <recv fd> <send fd> <log level>``."""
    recv_fd, send_fd, level = (int(a) for a in sys.argv[1:4])
    original = os.environ.pop(_ORIGINAL_PATH, "")  # the reward's own subprocesses see the parent's environment
    if original:
        os.environ["PYTHONPATH"] = original
    else:
        os.environ.pop("PYTHONPATH", None)
    _serve(_Pipes(send_fd, recv_fd), level)


def _serve(conn: _Pipes, log_level: int) -> None:
    """The child: unpickle the reward, say ready, then answer ``(completions, columns)`` until EOF."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the trainer, which stops us
    collect = _Collect()
    root = logging.getLogger()
    root.handlers[:] = [collect]
    root.setLevel(log_level)
    from grpo_rewards.contract import score_batch

    try:
        fn = pickle.loads(conn.inp.recv_bytes())
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        conn.out.send(("error", f"could not be loaded in a worker process: {type(exc).__name__}: {exc}"))
        return
    conn.out.send(("ready", None))
    while True:
        try:
            completions, columns, callbacks = pickle.loads(conn.inp.recv_bytes())
        except (EOFError, OSError):
            return
        collect.records = []
        calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        columns.update({name: _Recorder(name, calls) for name in callbacks})
        outcome = score_batch(fn, completions, columns)
        report = getattr(fn, "metrics", None)
        metrics: dict[str, Any] = {}
        if callable(report):
            with contextlib.suppress(Exception):
                metrics = {k: v for k, v in dict(report()).items() if isinstance(v, (int, float, str, bool))}
        conn.out.send(("ok", (outcome, metrics, collect.records, _picklable(calls))))


class RewardWorker:
    """A child process holding one reward (see module docs). Thread-safe; one call at a time."""

    def __init__(self, payload: bytes, name: str, *, start_timeout: float = DEFAULT_START_TIMEOUT):
        self.payload = payload
        self.name = name
        self.start_timeout = start_timeout
        self._process: Any = None
        self._conn: Connection | None = None
        self._pid = 0
        self._lock = threading.Lock()
        _live.add(self)

    def __getstate__(self) -> dict[str, Any]:  # a pickled SafeReward gets a fresh, unstarted worker
        return {"payload": self.payload, "name": self.name, "start_timeout": self.start_timeout}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["payload"], state["name"], start_timeout=state["start_timeout"])  # type: ignore[misc]

    @property
    def alive(self) -> bool:
        return self._process is not None and self._pid == os.getpid() and self._process.poll() is None

    def call(self, completions: list[Any], columns: dict[str, Any], timeout: float) -> tuple[Any, dict[str, Any]]:
        """``score_batch(reward, completions, columns)`` in the child, and the reward's ``metrics()``.

        A column that cannot be pickled raises ``WorkerFailed("unsendable")`` before anything is sent."""
        data, callbacks = split_callbacks(columns)
        try:
            message = pickle.dumps((completions, data, sorted(callbacks)), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # noqa: BLE001 - e.g. a column holding an open file or a lock
            raise WorkerFailed("unsendable", f"its inputs cannot be sent to a worker process: {exc}") from exc
        with self._lock:
            if not self.alive:
                self._start()
            assert self._conn is not None
            try:
                self._conn.out.send_bytes(message)
                if not self._conn.inp.poll(timeout):
                    self._kill()
                    raise WorkerFailed("timeout", f"took longer than {timeout:g}s (its worker process was killed)")
                status, value = self._conn.inp.recv()
            except (EOFError, OSError, BrokenPipeError) as exc:
                code = self._kill()
                raise WorkerFailed("crash", f"its worker process died (exit code {code})") from exc
            if status != "ok":
                raise WorkerFailed("crash", str(value))
            outcome, metrics, records, calls = value
        replay(records)
        for name, args, kwargs in calls:
            try:
                callbacks[name](*args, **kwargs)
            except Exception as exc:  # noqa: BLE001 - the reward's logging call, not its score
                logging.getLogger("grpo.rewards").debug("reward %r: %s(...) raised %s", self.name, name, exc)
        return outcome, metrics

    def _start(self) -> None:
        """A fresh interpreter (never a re-run of the parent's ``__main__``, as ``multiprocessing``'s spawn
        would do), in its own session so that a kill reaches the reward's own children too."""
        self._kill()
        from_parent, to_child = os.pipe()
        from_child, to_parent = os.pipe()
        path = [p or os.getcwd() for p in sys.path]  # the child finds what the parent finds
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(path), **{_ORIGINAL_PATH: os.environ.get("PYTHONPATH", "")})
        level = logging.getLogger().getEffectiveLevel()
        command = [sys.executable, "-c", "from grpo_rewards.reward_worker import _main; _main()",
                   str(from_parent), str(to_parent), str(level)]
        try:
            process = subprocess.Popen(command, pass_fds=(from_parent, to_parent), env=env, stdin=subprocess.DEVNULL,
                                       start_new_session=True)
        except (OSError, ValueError) as exc:  # no interpreter to start (an embedded Python): run in a thread
            for fd in (to_child, from_child):
                os.close(fd)
            raise WorkerFailed("load", f"could not start a worker process: {exc}") from exc
        finally:
            os.close(from_parent)
            os.close(to_parent)
        self._process, self._conn, self._pid = process, _Pipes(to_child, from_child), os.getpid()
        try:
            self._conn.out.send_bytes(self.payload)
            if not self._conn.inp.poll(self.start_timeout):
                self._kill()
                raise WorkerFailed("timeout", f"its worker process did not start within {self.start_timeout:g}s")
            status, message = self._conn.inp.recv()
        except (EOFError, OSError) as exc:
            code = self._kill()
            raise WorkerFailed("crash", f"its worker process died while starting (exit code {code})") from exc
        if status != "ready":
            self._kill()
            raise WorkerFailed("load", str(message))

    def _kill(self) -> int | None:
        """Stop the child and its process group; returns its exit code (None when there was none)."""
        process, conn = self._process, self._conn
        self._process, self._conn = None, None
        if conn is not None:
            conn.close()
        if process is None or self._pid != os.getpid():
            return None
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(5)
        return process.returncode

    def close(self) -> None:
        """Stop the child (a later call starts a new one)."""
        with self._lock:
            self._kill()


_live: weakref.WeakSet[RewardWorker] = weakref.WeakSet()


@atexit.register
def shutdown() -> None:
    """Stop every worker this process started (a stuck one would otherwise outlive it)."""
    for worker in list(_live):
        with contextlib.suppress(Exception):
            worker._kill()
