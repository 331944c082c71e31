"""Resource limits of one sandboxed run, applied with setrlimit in the child before anything else."""

from __future__ import annotations

import resource
from typing import Any

MB = 1 << 20


def apply(spec: dict[str, Any], *, nproc: int | None = None) -> None:
    """Set address space, CPU seconds, processes/threads, file size, open files and core size.

    The CPU soft limit sends SIGXCPU, the hard limit one second later SIGKILL.
    Hard limits equal soft ones (except CPU), so the program cannot raise them.
    RLIMIT_NPROC (``nproc``; None: unset) counts every task of the uid: the caller
    gives the program's own limit with a slot uid, or the uid's current count plus
    it where the uid is shared (seccomp forbids fork either way; threads count).

    Per-user kernel budgets get nothing the program could use up for others: no queued signals
    (RLIMIT_SIGPENDING 0: the count is the uid's, and a full count stops every process of the uid from
    queuing a real-time signal or creating a POSIX timer; the kernel still delivers standard signals, only
    without their queued details), no message queue bytes, no locked memory, no real-time priority.
    """
    cpu = max(1, int(-(-float(spec["cpu_seconds"]) // 1)))
    pairs = [
        (resource.RLIMIT_CPU, (cpu, cpu + 1)),
        (resource.RLIMIT_AS, (int(spec["memory_mb"]) * MB,) * 2),
        # stdout and stderr are files too (memfds): let them pass the output cap, which the zygote judges
        (resource.RLIMIT_FSIZE, (max(int(spec["file_size_mb"]) * MB, int(spec["output_bytes"]) + 1),) * 2),
        (resource.RLIMIT_NOFILE, (int(spec["open_files"]),) * 2),
        (resource.RLIMIT_CORE, (0, 0)),
        (resource.RLIMIT_MEMLOCK, (0, 0)),
        (resource.RLIMIT_MSGQUEUE, (0, 0)),
        (resource.RLIMIT_SIGPENDING, (0, 0)),
        (resource.RLIMIT_RTPRIO, (0, 0)),
    ]
    if nproc is not None:
        pairs.append((resource.RLIMIT_NPROC, (int(nproc),) * 2))
    stack = int(spec.get("stack_mb", 0)) * MB
    if stack:
        pairs.append((resource.RLIMIT_STACK, (stack, stack)))
    for which, value in pairs:
        resource.setrlimit(which, value)
