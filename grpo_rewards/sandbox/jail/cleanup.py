"""Removing a folder a hostile program filled: no recursion, bounded file descriptors, never raises.

A program can leave a tree 100,000 folders deep, folders it made unreadable
(mode 000), names near ``NAME_MAX`` and paths far past ``PATH_MAX``. :func:`remove_tree`
works relative to directory fds only and never descends: every sub-folder it meets
is renamed up into the top folder and emptied from there, so it holds two fds at a
time whatever the depth, and its work is linear in the number of entries. It
returns whether the folder is gone instead of raising (the caller decides who is
to blame). :func:`remove_stale` removes what pools killed before they could close left.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import itertools
import os
import stat

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def remove_tree(path: str, *, keep_top: bool = False) -> bool:
    """Delete ``path`` and everything under it (or only its contents with ``keep_top``); True when done."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode):
        with contextlib.suppress(FileNotFoundError, OSError):
            os.unlink(path)
        return not os.path.lexists(path)
    try:
        top = _open_dir(None, path)  # a folder the program closed is opened up again (only then)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    try:
        with contextlib.suppress(OSError):  # the program may have closed its own folder (mode 500)
            if os.fstat(top).st_mode & 0o700 != 0o700:
                os.fchmod(top, 0o700)
        ok = _empty(top)
    finally:
        os.close(top)
    if keep_top:
        return ok
    try:
        os.rmdir(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


def _empty(top: int) -> bool:
    """Empty the folder open as ``top``: sub-folders are moved up to it and emptied there, one level each."""
    for _round in range(1 << 30):  # each round removes at least one entry or gives up
        try:
            names = os.listdir(top)
        except OSError:
            return False
        if not names:
            return True
        progress = False
        for name in names:
            if _remove_entry(top, name):
                progress = True
                continue
            try:  # a non-empty folder: move its sub-folders up to ``top`` (no descent), delete its files
                fd = _open_dir(top, name)
            except OSError:
                continue
            try:
                for entry in os.scandir(fd):
                    if entry.is_dir(follow_symlinks=False):
                        with contextlib.suppress(OSError):
                            # moving a folder rewrites its "..": it must be writable (a program may close it)
                            if entry.stat(follow_symlinks=False).st_mode & 0o700 != 0o700:
                                os.chmod(entry.name, 0o700, dir_fd=fd)
                            _move_up(fd, entry.name, top)
                            progress = True
                    else:
                        with contextlib.suppress(OSError):
                            os.unlink(entry.name, dir_fd=fd)
                            progress = True
            except OSError:
                pass
            finally:
                os.close(fd)
            if _remove_entry(top, name):
                progress = True
        if not progress:
            return False
    return False


_serial = itertools.count()


def _move_up(fd: int, name: str, top: int) -> None:
    """Rename folder ``name`` (in ``fd``) into ``top`` under a name no earlier attempt left there."""
    for _ in range(100):
        try:
            os.rename(name, f".grpo-up-{os.getpid()}-{next(_serial)}", src_dir_fd=fd, dst_dir_fd=top)
            return
        except OSError as exc:
            if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise
    raise OSError(errno.EEXIST, "no free name to move a folder up")


def _remove_entry(top: int, name: str) -> bool:
    """Unlink a file or remove an empty folder; False when ``name`` is a non-empty (or stuck) folder."""
    try:
        os.unlink(name, dir_fd=top)
        return True
    except FileNotFoundError:
        return True
    except (IsADirectoryError, PermissionError, OSError):
        pass
    try:
        os.rmdir(name, dir_fd=top)
        return True
    except FileNotFoundError:
        return True
    except OSError:
        return False


def _open_dir(top: int | None, name: str) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=top)
    except PermissionError:  # a folder the program closed (mode 000): open it up again (we own or are root)
        fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=top)
        try:
            os.chmod(f"/proc/self/fd/{fd}", 0o700)
        except OSError:
            with contextlib.suppress(OSError):
                os.chmod(name, 0o700, dir_fd=top)
        finally:
            os.close(fd)
        return os.open(name, _DIR_FLAGS, dir_fd=top)


def over_quota(path: str, max_bytes: int, max_entries: int, max_depth: int = 64) -> str:
    """Why the tree under ``path`` is over its quota ("" when it is not): more than ``max_entries``
    entries, ``max_bytes`` bytes allocated, or deeper than ``max_depth``. Stops counting at the first
    excess; holds at most ``max_depth`` fds."""
    try:
        top = os.open(path, _DIR_FLAGS)
    except OSError:
        return ""
    stack = [(top, 0)]
    entries = allocated = 0
    try:
        while stack:
            fd, depth = stack.pop()
            try:
                with os.scandir(fd) as it:
                    for entry in it:
                        entries += 1
                        try:
                            st = entry.stat(follow_symlinks=False)
                        except OSError:
                            continue
                        allocated += st.st_blocks * 512
                        if entries > max_entries:
                            return f"more than {max_entries} files and folders"
                        if allocated > max_bytes:
                            return f"more than {max_bytes >> 20} MB"
                        if stat.S_ISDIR(st.st_mode):
                            if depth + 1 >= max_depth:
                                return f"folders nested deeper than {max_depth}"
                            with contextlib.suppress(OSError):
                                stack.append((os.open(entry.name, _DIR_FLAGS, dir_fd=fd), depth + 1))
            except OSError:
                pass
            finally:
                os.close(fd)
    finally:
        for fd, _ in stack:
            os.close(fd)
    return ""


def remove_stale(root: str, prefix: str) -> list[str]:
    """Delete the folders ``<root>/<prefix><pid>-...`` of this uid whose pool process is gone (killed before
    it could close); returns what went wrong, one line each.

    Never stops a pool from starting: two pools starting at once (torchrun ranks) take
    turns on a lock file, and a folder that cannot be removed (or vanished meanwhile)
    is left and named.
    """
    try:
        lock = os.open(os.path.join(root, f"{prefix}cleanup-{os.geteuid()}.lock"),
                       os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        return [f"stale scratch folders not cleaned (no lock file: {exc})"]
    problems = []
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for name in os.listdir(root):
            owner = name[len(prefix):].split("-", 1)[0]
            if not name.startswith(prefix) or not owner.isdigit():
                continue
            path = os.path.join(root, name)
            try:
                if os.lstat(path).st_uid != os.geteuid():
                    continue
                os.kill(int(owner), 0)
            except ProcessLookupError:
                if not remove_tree(path):
                    problems.append(f"could not remove the stale scratch folder {path}")
            except OSError:  # gone meanwhile, or another user's process
                continue
    finally:
        os.close(lock)
    return problems
