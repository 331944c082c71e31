"""Resource limits of one sandboxed run, applied with setrlimit in the child before anything else."""

from __future__ import annotations

import resource
from typing import Any

MB = 1 << 20


def apply(spec: dict[str, Any], *, own_uid: bool = True) -> None:
    """Set address space, CPU seconds, processes/threads, file size, open files and core size.

    The CPU soft limit sends SIGXCPU, the hard limit one second later SIGKILL.
    Hard limits equal soft ones (except CPU), so the program cannot raise them.
    RLIMIT_NPROC counts every process of the uid, so it is only set when the
    program has a slot uid of its own (seccomp forbids fork either way).
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
    ]
    if own_uid:
        pairs.append((resource.RLIMIT_NPROC, (int(spec["processes"]),) * 2))
    stack = int(spec.get("stack_mb", 0)) * MB
    if stack:
        pairs.append((resource.RLIMIT_STACK, (stack, stack)))
    for which, value in pairs:
        resource.setrlimit(which, value)
