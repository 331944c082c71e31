"""Folders and files written so that nothing half-written is ever taken for complete, and telling a full disk
from other write errors: :func:`atomic_folder` (a folder written beside its place and renamed in when complete)
and :func:`is_disk_full`. An existing folder is replaced in one step (:func:`exchange`) where the kernel allows,
else set aside and put back by the next write (:func:`recover`) when a process dies between the two renames. Used by checkpoints (grpo_core.run_folder) and model saves (grpo_core.policy.models);
no project imports, so any layer may use it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

FULL_ERRNOS = {errno.ENOSPC, errno.EFBIG, getattr(errno, "EDQUOT", errno.ENOSPC)}
# how writers that do not raise an OSError say it: safetensors (Rust's io error), torch.save's stream writer
_RUST_FULL = tuple(f"(os error {n})" for n in sorted(FULL_ERRNOS))
_NO_ERRNO = ("file write failed", "unexpected pos")
def exception_chain(exc: BaseException | None) -> Iterator[BaseException]:
    while exc is not None:
        yield exc
        exc = exc.__cause__ or exc.__context__


def _free_bytes(folder: str | Path) -> int | None:
    folder = Path(folder)
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        st = os.statvfs(folder)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def is_disk_full(exc: BaseException, run_dir: str | Path | None = None) -> bool:
    """Whether ``exc`` (or what it was raised from) is a full disk, a quota or a file-size limit. A write error
    that carries no errno (torch.save's) counts when ``run_dir``'s file system has less than 1 MiB free."""
    for inner in exception_chain(exc):
        if isinstance(inner, OSError) and inner.errno in FULL_ERRNOS:
            return True
        if any(code in str(inner) for code in _RUST_FULL):
            return True
        if run_dir is not None and any(t in str(inner) for t in _NO_ERRNO):
            free = _free_bytes(run_dir)
            if free is not None and free < 2**20:
                return True
    return False


@contextlib.contextmanager
def atomic_folder(final: str | Path) -> Iterator[Path]:
    """Yield a temporary folder beside ``final``; when the block ends normally it replaces ``final`` in one rename
    (an existing ``final`` is moved aside first and removed after). On an error the temporary folder is removed and
    ``final`` is left as it was; a process killed inside the block leaves only ``.tmp-<name>-<pid>``, which no reader
    takes for the folder and the next write of it removes."""
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    recover(final)
    for stale in final.parent.glob(f".tmp-{final.name}-*"):
        shutil.rmtree(stale, ignore_errors=True)
    tmp = final.parent / f".tmp-{final.name}-{os.getpid()}"
    tmp.mkdir()
    try:
        yield tmp
        fsync_tree(tmp)
        if final.exists() and exchange(tmp, final):  # one step: final is the old folder or the new, never absent
            shutil.rmtree(tmp, ignore_errors=True)  # (now the old one)
        elif final.exists():  # no atomic exchange here: the old one is set aside, and put back if killed now
            old = final.parent / f".old-{final.name}-{os.getpid()}"
            final.rename(old)
            tmp.rename(final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(final)
        fsync_dir(final.parent)
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if is_disk_full(exc, final.parent):  # say which folder could not be written (safetensors does not)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(final)) from exc
        raise


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one step (Linux ``renameat2(RENAME_EXCHANGE)``); False where that is not available."""
    import ctypes  # only when a folder is replaced: registering the trainer's plugin stays light

    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EPERM):
        return False  # a file system or kernel without it
    raise OSError(code, os.strerror(code), str(b))


def recover(final: str | Path) -> Path | None:
    """Put back the complete folder a replacement set aside (``.old-<name>-<pid>``) when the process was killed
    before the new one was renamed in, so ``final`` is never lost; returns it when one was put back."""
    final = Path(final)
    if final.exists():
        for old in final.parent.glob(f".old-{final.name}-*"):
            shutil.rmtree(old, ignore_errors=True)
        return None
    aside = sorted(final.parent.glob(f".old-{final.name}-*"), key=lambda p: p.stat().st_mtime)
    if not aside:
        return None
    aside[-1].rename(final)
    for old in aside[:-1]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def fsync_dir(folder: Path) -> None:
    dir_fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def fsync_tree(folder: Path) -> None:
    for path in folder.rglob("*"):
        if path.is_file():
            with open(path, "rb") as fh:
                os.fsync(fh.fileno())
