"""The compiled binaries a pool keeps: owned by the pool, bounded by count and bytes, compiled under limits.

A compiled language's source is compiled once and its binary shared by every test of
the completion. The compile's child writes the binary into a memfd, so its pages are
charged to the slot's memory cgroup; kept there, they would pin the slot's memory
across runs until a later program could not be given its limit. :func:`own_copy` copies
the binary into a sealed memfd written by this process (its pages are the pool's) and the
child's memfd is closed. :class:`CompileCache` keeps those copies, least recently used
first out, within a count and a byte bound. :func:`limits_for` is the compile step's
limits: the program's own CPU, wall-clock and memory limits, at most :data:`COMPILE_LIMITS`;
:func:`compile_status` tells a compile stopped by those limits from a compiler that reported errors.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from collections import OrderedDict
from typing import Any

from grpo_rewards.sandbox.program import MEMORY, RUNTIME_ERROR, TIMEOUT, Limits, RunResult

COMPILE_LIMITS = Limits(cpu_seconds=20.0, wall_seconds=40.0, memory_mb=2048, output_bytes=1 << 16, file_size_mb=64,
                        open_files=256)
COMPILE_CACHE = 256  # binaries kept (sealed memfds): every test of a completion shares one compile
COMPILE_CACHE_MB = 256  # and at most this many bytes of them (least recently used evicted first)


def limits_for(limits: Limits, cap: Limits = COMPILE_LIMITS) -> Limits:
    """The compile step's limits: ``limits``' CPU, wall clock and memory, at most ``cap``'s (a template bomb
    costs what a test may cost, not 20 s and 2 GB); file size, output and open files are ``cap``'s."""
    return Limits(**{**cap.as_dict(), "cpu_seconds": min(cap.cpu_seconds, limits.cpu_seconds),
                     "wall_seconds": min(cap.wall_seconds, limits.wall_seconds),
                     "memory_mb": min(cap.memory_mb, limits.memory_mb)})


# What a compiler driver prints when a process it started (cc1plus, clang -cc1) hit a limit: the driver itself
# exits with an error, so the run looks like a compiler that reported errors. gcc: "internal compiler error:
# CPU time limit exceeded signal terminated program cc1plus", "cc1plus: out of memory allocating ...",
# "fatal error: Killed signal terminated program cc1plus" (the OOM killer); clang: "unable to execute
# command: CPU time limit exceeded". A source that prints these itself (#error) gains nothing: a compile
# error either way.
LIMIT_MESSAGES = ((TIMEOUT, ("CPU time limit exceeded",)),
                  (MEMORY, ("out of memory allocating", "virtual memory exhausted", "Killed signal terminated program",
                            "unable to execute command: Killed")))


def compile_status(status: str, stderr: str) -> str:
    """The compile's status: ``timeout`` or ``memory`` where the driver says a process of the compiler was
    stopped by the CPU or memory limit (``status`` is then ``runtime_error``), else ``status``."""
    if status != RUNTIME_ERROR:
        return status
    for verdict, messages in LIMIT_MESSAGES:
        if any(message in stderr for message in messages):
            return verdict
    return status


class Compiled:
    """One source's compile: its binary memfd (or None), its size and the compile's result."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.fd: int | None = None
        self.size = 0
        self.result: RunResult | None = None

    def close(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None
        self.size = 0


class CompileCache:
    """Compiles by key, least recently used first out past ``entries`` or ``max_bytes``."""

    def __init__(self, entries: int = COMPILE_CACHE, max_bytes: int = COMPILE_CACHE_MB << 20) -> None:
        self.entries = entries
        self.max_bytes = max_bytes
        self._items: OrderedDict[tuple[Any, ...], Compiled] = OrderedDict()
        self._lock = threading.Lock()

    def entry(self, key: tuple[Any, ...]) -> Compiled:
        """The entry of ``key`` (new and empty the first time), now the most recently used."""
        with self._lock:
            entry = self._items.get(key)
            if entry is None:
                entry = self._items[key] = Compiled()
            else:
                self._items.move_to_end(key)
            return entry

    def evict(self) -> None:
        """Close the least recently used binaries until within the bounds (a run holds its own fd)."""
        with self._lock:
            while self._items and (len(self._items) > self.entries or self.size() > self.max_bytes):
                _, old = self._items.popitem(last=False)
                with old.lock:
                    old.close()

    def size(self) -> int:
        """Bytes of the binaries held (each in a memfd of this process)."""
        return sum(entry.size for entry in list(self._items.values()))

    def close(self) -> None:
        with self._lock:
            for entry in self._items.values():
                entry.close()
            self._items.clear()


def own_copy(made: int) -> int:
    """A sealed memfd of this process holding what the memfd ``made`` holds: its pages are charged to this
    process's memory cgroup, not to the slot whose child wrote ``made``."""
    binary = os.memfd_create("binary", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        size, offset = os.fstat(made).st_size, 0
        while offset < size:
            chunk = os.pread(made, min(1 << 20, size - offset), offset)
            if not chunk:
                break
            view = memoryview(chunk)
            while view:
                view = view[os.write(binary, view):]
            offset += len(chunk)
        fcntl.fcntl(binary, fcntl.F_ADD_SEALS,
                    fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
    except BaseException:
        os.close(binary)
        raise
    return binary
