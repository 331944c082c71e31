"""One run at a time in a run folder (or on an output file): an exclusive ``flock`` on a lock file, taken before
anything is written and released when the run ends.

    with hold(run_dir):          # RunFolderError (one line: who holds it) when another process does
        ...                      # clear an earlier run, train, write the final model

The lock file (``LOCK_FILE`` of :mod:`grpo_core.run_folder.layout`, or ``.<name>.lock`` beside an output file)
holds the owner's pid, host, start time and command, so a refusal names who is writing. The kernel drops a
``flock`` when its process dies, however it dies: a lock file left by a killed run is taken over, and the run
says whose it was (its pid, and that it is no longer running). Holding is counted per process, so the command
line and the trainer it starts may both ask for the same folder. A folder the lock created and nothing else
wrote into is removed again on release, so a run refused before it starts leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from grpo_core.run_folder.layout import LOCK_FILE
from grpo_rewards.errors import UserError

INHERITED = "GRPO_RUN_FOLDER_LOCKED"  # set for the ranks `grpo train --nproc` starts: the launcher holds the lock
_HELD: dict[str, list[Any]] = {}  # lock file (resolved) -> [open file, count, folder this lock created or None]


def lock_path_of(target: str | Path, *, folder: bool = True) -> Path:
    """The lock file of a run folder (``folder``) or of an output file (``.<name>.lock`` beside it)."""
    target = Path(target).expanduser()
    return target / LOCK_FILE if folder else target.parent / f".{target.name}.lock"


def _holder(path: Path) -> dict[str, Any]:
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def describe_holder(record: dict[str, Any]) -> str:
    """``pid 123 on host h since 12:00:01 UTC (grpo train run.toml)`` from a lock file's record."""
    if not record:
        return "another process"
    since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(float(record.get("started", 0) or 0)))
    command = f" ({record['command']})" if record.get("command") else ""
    return f"pid {record.get('pid', '?')} on {record.get('host', '?')} since {since}{command}"


def _alive(pid: Any) -> bool:
    try:
        os.kill(int(pid), 0)
    except (OSError, ValueError, TypeError) as exc:
        return isinstance(exc, PermissionError)  # someone else's process, alive
    return True


def _open_locked(lock: Path) -> tuple[Any, dict[str, Any]] | None:
    """The lock file opened and locked, with the record that was in it, or None when another process holds it."""
    while True:
        fh = open(lock, "a+", encoding="utf-8")  # noqa: SIM115 (held open while the run lasts)
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            fh.close()
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return None
            raise
        try:  # a holder that released and removed the file between our open and our lock: lock the new one
            if os.fstat(fh.fileno()).st_ino == os.stat(lock).st_ino:
                fh.seek(0)
                text = fh.read()
                try:
                    record = json.loads(text) if text.strip() else {}
                except ValueError:
                    record = {}
                return fh, record if isinstance(record, dict) else {}
        except FileNotFoundError:
            pass
        fh.close()


def acquire(target: str | Path, *, folder: bool = True, error: type[UserError] = UserError, file: str = "",
            key: str = "logging.output_dir", command: str | None = None) -> Path:
    """Take the lock of ``target`` (see the module docs) or raise ``error`` naming who holds it."""
    target = Path(target).expanduser()
    lock = lock_path_of(target, folder=folder)
    name = str(lock.resolve())
    if name in _HELD:
        _HELD[name][1] += 1
        return lock
    created = None
    if folder and not target.exists():
        created = target
        while not created.parent.exists():
            created = created.parent
        target.mkdir(parents=True, exist_ok=True)
    try:
        opened = _open_locked(lock)
    except OSError as exc:
        _remove_created(created)
        raise error(f"cannot make the lock file {lock}: {exc.strerror or exc}", file=file, key=key) from None
    if opened is None:
        _remove_created(created)
        who = describe_holder(_holder(lock))
        what = f"{target} is being written by another run" if folder else f"{target} is being written by another command"
        raise error(f"{what} ({who}); wait for it to end, or write elsewhere", file=file, key=key)
    fh, earlier = opened
    if earlier.get("pid") is not None and (earlier.get("pid") != os.getpid() or earlier.get("host") != socket.gethostname()):
        same_host = earlier.get("host") == socket.gethostname()
        state = "no longer running" if same_host and not _alive(earlier.get("pid")) else "its lock released"
        print(f"warning: {lock}: a stale lock left by {describe_holder(earlier)} ({state}) taken over",
              file=sys.stderr)
    record = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time(),
              "command": command if command is not None else " ".join(["grpo", *sys.argv[1:]])[:300]}
    fh.seek(0)
    fh.truncate()
    fh.write(json.dumps(record) + "\n")
    fh.flush()
    _HELD[name] = [fh, 1, created]
    return lock


def _remove_created(created: Path | None) -> None:
    """Remove the folders the lock made (``created`` and those below it) when they hold nothing."""
    if created is None:
        return
    for path in sorted([p for p in created.rglob("*") if p.is_dir()] + [created], key=lambda p: -len(p.parts)):
        with contextlib.suppress(OSError):
            path.rmdir()


def release(target: str | Path, *, folder: bool = True) -> None:
    """Give back a lock taken with :func:`acquire` (the last holder in this process removes the lock file)."""
    lock = lock_path_of(target, folder=folder)
    name = str(lock.resolve())
    held = _HELD.get(name)
    if held is None:
        return
    held[1] -= 1
    if held[1] > 0:
        return
    del _HELD[name]
    fh, _, created = held
    with contextlib.suppress(OSError):
        lock.unlink()  # while still locked: a process waiting on the old file sees it gone and opens the new one
    fh.close()
    _remove_created(created)


@contextlib.contextmanager
def hold(target: str | Path, *, folder: bool = True, error: type[UserError] = UserError, file: str = "",
         key: str = "logging.output_dir", command: str | None = None) -> Iterator[Path]:
    """:func:`acquire` for the block, :func:`release` after it however it ends."""
    lock = acquire(target, folder=folder, error=error, file=file, key=key, command=command)
    try:
        yield lock
    finally:
        release(target, folder=folder)


def is_held(target: str | Path, *, folder: bool = True) -> bool:
    """Whether this process holds the lock of ``target``."""
    return str(lock_path_of(target, folder=folder).resolve()) in _HELD


def check_free(target: str | Path, *, folder: bool = True, error: type[UserError] = UserError, file: str = "",
               key: str = "logging.output_dir") -> None:
    """Refuse ``target`` while another process holds its lock (nothing is created; the lock is not kept)."""
    lock = lock_path_of(target, folder=folder)
    if is_held(target, folder=folder) or not lock.is_file() or (folder and os.environ.get(INHERITED)):
        return  # (a rank `grpo train --nproc` started: the launcher holds it)
    try:
        with open(lock, encoding="utf-8") as fh:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise
                what = "run" if folder else "command"
                raise error(f"{target} is being written by another {what} ({describe_holder(_holder(lock))}); "
                            "wait for it to end, or write elsewhere", file=file, key=key) from None
    except FileNotFoundError:
        return
