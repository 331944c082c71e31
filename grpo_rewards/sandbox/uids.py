"""Dedicated slot uids: claimed with a lock file per uid, so two pools on one machine never share one.

A uid is only claimed when no account has it (``/etc/passwd``) and no process runs
with it, and it stays locked while the pool lives. Sweeps kill by slot uid only, so
the uids must belong to nobody else.
"""

from __future__ import annotations

import fcntl
import os
import pwd
import tempfile

DEFAULT_BASE = 61000
DEFAULT_COUNT = 2000


def lock_dir() -> str:
    for candidate in ("/run/grpo-sandbox", os.path.join(tempfile.gettempdir(), "grpo-sandbox-uids")):
        try:
            os.makedirs(candidate, mode=0o700, exist_ok=True)
            if os.access(candidate, os.W_OK):
                return candidate
        except OSError:
            continue
    raise OSError("no writable folder for slot uid locks")


def uids_in_use() -> set[int]:
    """Effective uids of all running processes (owners of their /proc entries)."""
    used = set()
    with os.scandir("/proc") as it:
        for entry in it:
            if entry.name.isdigit():
                try:
                    used.add(entry.stat().st_uid)
                except OSError:
                    continue
    return used


class UidClaim:
    """Holds the lock files of the claimed uids until :meth:`release`."""

    def __init__(self, count: int, base: int = DEFAULT_BASE, span: int = DEFAULT_COUNT):
        self.uids: list[int] = []
        self._fds: list[int] = []
        folder = lock_dir()
        busy = uids_in_use()
        for uid in range(base, base + span):
            if len(self.uids) == count:
                break
            if uid in busy or _has_account(uid):
                continue
            fd = os.open(os.path.join(folder, f"uid-{uid}.lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            self.uids.append(uid)
            self._fds.append(fd)
        if len(self.uids) < count:
            self.release()
            raise OSError(f"could not claim {count} free slot uids in {base}..{base + span - 1}")

    def release(self) -> None:
        for fd in self._fds:
            os.close(fd)
        self._fds.clear()


def _has_account(uid: int) -> bool:
    try:
        pwd.getpwuid(uid)
        return True
    except KeyError:
        return False
