"""One object in its own killable process: a call that runs past its deadline is stopped, not abandoned.

:class:`ProcessWorker` pickles an object once, starts a child process (a fresh interpreter: the
parent's ``__main__`` is never re-run in it, so a training script needs no
``if __name__ == "__main__"`` guard) that unpickles it and then serves requests over a pipe, one at
a time, with ``serve(obj, request) -> response`` (a module-level function, pickled by reference).
The object lives in the child for the whole run, so its caches, connections and counters persist
between calls exactly as they would in-process; the records it logs during a call are sent back
with the response and handled by the parent's loggers as their own. A call that does not answer
within its timeout kills the child's whole process group (``SIGKILL``: regex backtracking or a C
extension holding the GIL cannot ignore it, and the object's own children go with it); the next
call starts a fresh child. Starting a child (imports, unpickling) has its own deadline,
``start_timeout``, which does not count against the first call.
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
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from grpo_rewards.isolation.failed import WorkerFailed

DEFAULT_START_TIMEOUT = 120.0
_ORIGINAL_PATH = "GRPO_REWARD_WORKER_PYTHONPATH"


def pickled_or_none(obj: Any) -> bytes | None:
    """``obj`` pickled, or None when it cannot cross a process boundary safely.

    A closure, a lambda or a local class does not pickle. Something that pickles but is
    defined in ``__main__`` (a training script) is refused too: a ``spawn`` child would
    re-run the script's top-level code to find it.
    """
    try:
        data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
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
    original = os.environ.pop(_ORIGINAL_PATH, "")  # the object's own subprocesses see the parent's environment
    if original:
        os.environ["PYTHONPATH"] = original
    else:
        os.environ.pop("PYTHONPATH", None)
    _serve(_Pipes(send_fd, recv_fd), level)


def _serve(conn: _Pipes, log_level: int) -> None:
    """The child: unpickle ``(serve, obj)``, say ready, then answer requests until EOF."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the trainer, which stops us
    collect = _Collect()
    root = logging.getLogger()
    root.handlers[:] = [collect]
    root.setLevel(log_level)
    try:
        serve, obj = pickle.loads(conn.inp.recv_bytes())
        obj = pickle.loads(obj)
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        conn.out.send(("error", f"could not be loaded in a worker process: {type(exc).__name__}: {exc}"))
        return
    conn.out.send(("ready", None))
    while True:
        try:
            request = pickle.loads(conn.inp.recv_bytes())
        except (EOFError, OSError):
            return
        collect.records = []
        response = serve(obj, request)
        conn.out.send(("ok", (response, collect.records)))


class ProcessWorker:
    """A child process holding one object (see module docs). Thread-safe; one call at a time."""

    def __init__(self, payload: bytes, name: str, serve: Callable[[Any, Any], Any], *,
                 start_timeout: float = DEFAULT_START_TIMEOUT):
        self.payload = payload
        self.name = name
        self.serve = serve
        self.start_timeout = start_timeout
        self._process: Any = None
        self._conn: _Pipes | None = None
        self._pid = 0
        self._lock = threading.Lock()
        _live.add(self)

    def __getstate__(self) -> dict[str, Any]:  # a pickled copy gets a fresh, unstarted worker
        return {"payload": self.payload, "name": self.name, "serve": self.serve, "start_timeout": self.start_timeout}

    def __setstate__(self, state: dict[str, Any]) -> None:
        ProcessWorker.__init__(self, state["payload"], state["name"], state["serve"],
                               start_timeout=state["start_timeout"])

    @property
    def alive(self) -> bool:
        return self._process is not None and self._pid == os.getpid() and self._process.poll() is None

    @property
    def pid(self) -> int | None:
        """The running child's process id (None when none runs)."""
        return self._process.pid if self.alive else None

    def request(self, request: Any, timeout: float) -> Any:
        """``serve(obj, request)`` in the child, within ``timeout`` seconds; the records it logged are
        replayed here. ``WorkerFailed``: ``unsendable`` (``request`` does not pickle; nothing was sent),
        ``timeout`` (the child was killed), ``crash`` or ``load``."""
        try:
            message = pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL)
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
            response, records = value
        replay(records)
        return response

    def _start(self) -> None:
        """A fresh interpreter (never a re-run of the parent's ``__main__``, as ``multiprocessing``'s spawn
        would do), in its own session so that a kill reaches the object's own children too."""
        self._kill()
        from_parent, to_child = os.pipe()
        from_child, to_parent = os.pipe()
        path = [p or os.getcwd() for p in sys.path]  # the child finds what the parent finds
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(path), **{_ORIGINAL_PATH: os.environ.get("PYTHONPATH", "")})
        level = logging.getLogger().getEffectiveLevel()
        command = [sys.executable, "-c", f"from {__name__} import _main; _main()",
                   str(from_parent), str(to_parent), str(level)]
        try:
            process = subprocess.Popen(command, pass_fds=(from_parent, to_parent), env=env, stdin=subprocess.DEVNULL,
                                       start_new_session=True)
        except (OSError, ValueError) as exc:  # no interpreter to start (an embedded Python)
            for fd in (to_child, from_child):
                os.close(fd)
            raise WorkerFailed("load", f"could not start a worker process: {exc}") from exc
        finally:
            os.close(from_parent)
            os.close(to_parent)
        self._process, self._conn, self._pid = process, _Pipes(to_child, from_child), os.getpid()
        try:
            self._conn.out.send_bytes(pickle.dumps((self.serve, self.payload), protocol=pickle.HIGHEST_PROTOCOL))
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


_live: weakref.WeakSet[ProcessWorker] = weakref.WeakSet()


@atexit.register
def shutdown() -> None:
    """Stop every worker this process started (a stuck one would otherwise outlive it)."""
    for worker in list(_live):
        with contextlib.suppress(Exception):
            worker._kill()
