"""The zygote's private mount namespace: expose paths a slot uid cannot reach, and a tmpfs scratch root.

A Python installed under a private home (``/root/.pyenv``) is unreadable to an
unprivileged slot uid. Inside the zygote's own mount namespace, the first closed
ancestor (``/root``) is covered by an empty tmpfs and only the needed paths are
bind-mounted back, read-only: the slot uid can import the standard library and sees
nothing else of that home. The host's mounts are untouched. The same namespace hides the
interpreter's site-packages folders behind empty read-only tmpfs mounts, after binding the
packages of the programs' allow-list into a folder of their own (:func:`bind_packages`,
:func:`hide`).
"""

from __future__ import annotations

import os
import stat
import tempfile

from .linux import (
    MS_BIND,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_PRIVATE,
    MS_RDONLY,
    MS_REC,
    MS_REMOUNT,
    mount,
    umount,
)


def closed_ancestor(path: str) -> str | None:
    """The first directory above ``path`` that others cannot traverse, or None."""
    parts = os.path.abspath(path).split(os.sep)[1:-1]
    current = ""
    for part in parts:
        current = f"{current}/{part}"
        try:
            mode = os.stat(current).st_mode
        except OSError:
            return None
        if not mode & stat.S_IXOTH:
            return current
    return None


def make_private() -> None:
    mount(None, "/", None, MS_REC | MS_PRIVATE)


def expose(paths: list[str]) -> list[str]:
    """Make ``paths`` reachable for any uid (see module docs); returns the ancestors covered."""
    groups: dict[str, list[str]] = {}
    for path in paths:
        if os.path.exists(path):
            anc = closed_ancestor(path)
            if anc is not None:
                groups.setdefault(anc, []).append(path)
    for anc, needed in groups.items():
        stage = tempfile.mkdtemp(prefix="grpo-stage-")
        try:
            mount(anc, stage, None, MS_BIND | MS_REC)
            mount("tmpfs", anc, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
            for path in needed:
                rel = os.path.relpath(path, anc)
                target = os.path.join(anc, rel)
                if os.path.isdir(os.path.join(stage, rel)):
                    os.makedirs(target, mode=0o755, exist_ok=True)
                else:
                    os.makedirs(os.path.dirname(target), mode=0o755, exist_ok=True)
                    open(target, "a").close()
                mount(os.path.join(stage, rel), target, None, MS_BIND | MS_REC)
                mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY)
        finally:
            try:
                umount(stage)
            finally:
                os.rmdir(stage)
    return sorted(groups)


def tmpfs_scratch(root: str, size_mb: int, inodes: int) -> None:
    """A size- and inode-capped tmpfs for the slot's scratch folders (a disk fill stops there)."""
    mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
          f"mode=0711,size={int(size_mb)}m,nr_inodes={int(inodes)}")


def bind_packages(folder: str, entries: dict[str, str]) -> None:
    """Cover ``folder`` with a small tmpfs holding a read-only bind mount of each allowed package
    (entry name -> its real folder or module file): the programs' only way to them once :func:`hide`
    covers the site-packages folders they live in."""
    mount("tmpfs", folder, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
    for name, source in entries.items():
        target = os.path.join(folder, name)
        if os.path.isdir(source):
            os.mkdir(target, 0o755)
        else:
            open(target, "a").close()
        mount(source, target, None, MS_BIND | MS_REC)
        mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    mount(None, folder, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, "mode=0755,size=1m")


def hide(folders: list[str]) -> list[str]:
    """Cover each existing folder with an empty read-only tmpfs (site-packages the programs must not
    read); returns those covered."""
    covered = []
    for path in folders:
        if os.path.isdir(path) and not os.path.ismount(path):
            mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0555,size=4k")
            covered.append(path)
    return covered
