"""How many CPUs this process should keep busy: the ones it may run on (its affinity mask, else the machine's
count), divided among the training processes started on this machine (``LOCAL_WORLD_SIZE``, which torchrun
sets; 1 otherwise), at least 1. The reward worker pools (``math_equivalence``'s timeout pool, the code
sandbox's slots) size themselves by :func:`cpu_share`, so N ranks on one machine share its CPUs instead of
each starting a pool as large as the machine."""

from __future__ import annotations

import os


def usable_cpus() -> int:
    """The CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no affinity masks (macOS)
        return max(1, os.cpu_count() or 1)


def local_processes() -> int:
    """Training processes on this machine (torchrun's ``LOCAL_WORLD_SIZE``; 1 when unset or not a number)."""
    try:
        return max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    except ValueError:
        return 1


def cpu_share() -> int:
    """This process's share of the CPUs: :func:`usable_cpus` / :func:`local_processes`, at least 1."""
    return max(1, usable_cpus() // local_processes())
