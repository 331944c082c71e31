"""A slot's own pid namespace, and its pid counter set back before every child: a pid says nothing of others.

A thread's id comes from the pid counter of the namespace it lives in. Shared by the whole machine, that
counter carries a token between programs running at the same time (one creates N threads, the other sees
its next thread id jump by N); shared by a slot's runs, it would carry one from a run to the next. So:

* the zygote makes its slot a pid namespace of its own (:func:`become_first`: ``unshare(CLONE_NEWPID)``
  and a fork, the zygote going on as the namespace's first process, pid 1; the process the pool started
  stays behind only to wait for it, and the zygote dies with it). Inside bubblewrap (``strict``) it lives
  in the namespace bubblewrap made, one per slot too;
* the template sets that namespace's counter back (:func:`reset`, ``ns_last_pid``, through a proc file
  system of the namespace mounted only in the zygote's own mount namespace and unmounted at once,
  :func:`open_counter`) before it forks each child. A child finds every pid of its run before it free (the
  zygote reaped them), so every child gets the same pid and its threads the same ids, whatever ran before
  it in its slot or beside it in another.

Programs never see another slot's processes either: ``kill(pid, 0)`` on one answers "no such process".

Root makes both namespaces outright. An unprivileged pool first enters a user namespace of its own
(:func:`enter_user_namespace`: its uid and gid mapped to themselves, nothing else, with a mount namespace for
the proc mount), where the kernel allows unprivileged user namespaces; every child then clears the
capabilities that namespace gave it (:func:`~.linux.drop_capabilities`) before its program runs.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import tempfile

from .linux import (
    CLONE_NEWNS,
    CLONE_NEWPID,
    CLONE_NEWUSER,
    MNT_DETACH,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_PRIVATE,
    MS_REC,
    PR_SET_PDEATHSIG,
    mount,
    prctl,
    umount,
    unshare,
)

COUNTER = "sys/kernel/ns_last_pid"
# where the kernel says whether an unprivileged process may make a user namespace (absent: no such switch)
USERNS_SWITCHES = {"/proc/sys/user/max_user_namespaces": lambda v: int(v) > 0,
                   "/proc/sys/kernel/unprivileged_userns_clone": lambda v: int(v) == 1,
                   "/proc/sys/kernel/apparmor_restrict_unprivileged_userns": lambda v: int(v) == 0}


def user_namespaces_possible() -> bool:
    """Whether this kernel lets an unprivileged process make a user namespace (the zygote confirms)."""
    for path, allows in USERNS_SWITCHES.items():
        try:
            with open(path) as fh:
                if not allows(fh.read().strip()):
                    return False
        except (OSError, ValueError):
            continue
    return True


def enter_user_namespace() -> None:
    """A user namespace of this process's own, its uid and gid mapped to themselves (so every id it shows
    and every check the kernel makes are unchanged), and a private mount namespace in it."""
    uid, gid = os.getuid(), os.getgid()
    unshare(CLONE_NEWUSER | CLONE_NEWNS)
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as fh:
            fh.write(text)
    mount(None, "/", None, MS_REC | MS_PRIVATE)


def become_first() -> None:
    """Go on as pid 1 of a new pid namespace (root only). The calling process forks; its parent half closes
    every descriptor but stdio, waits for the child and exits with its status; the child dies with it
    (``PR_SET_PDEATHSIG``), so the pool killing the process it started kills the zygote and, with the
    namespace's first process, every process in the namespace. OSError when the namespace cannot be made."""
    unshare(CLONE_NEWPID)
    alive_r, alive_w = os.pipe()
    pid = os.fork()
    if pid:
        code = 1
        try:
            os.closerange(3, alive_w)
            os.closerange(alive_w + 1, 1 << 16)
            while True:
                try:
                    _, status = os.waitpid(pid, 0)
                    code = os.waitstatus_to_exitcode(status) & 0xFF
                    break
                except InterruptedError:
                    continue
        finally:
            os._exit(code)
    os.close(alive_w)
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    try:
        gone = select.select([alive_r], [], [], 0)[0]  # readable: EOF, the parent died before the line above
    finally:
        os.close(alive_r)
    if gone:
        os._exit(0)


def open_counter() -> int:
    """A write descriptor on this pid namespace's ``ns_last_pid`` (needs a private mount namespace and root):
    a proc file system of the caller's pid namespace is mounted on a fresh folder, the file opened, the mount
    detached and the folder removed at once (``/proc/sys`` may be read-only, as bubblewrap leaves it)."""
    folder = tempfile.mkdtemp(prefix="grpo-proc-")
    try:
        mount("proc", folder, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        try:
            return os.open(os.path.join(folder, COUNTER), os.O_WRONLY | os.O_CLOEXEC)
        finally:
            umount(folder, MNT_DETACH)
    finally:
        with contextlib.suppress(OSError):
            os.rmdir(folder)


def reset(counter: int, last: int) -> None:
    """Set the namespace's pid counter so the next process created in it gets ``last + 1`` (or, if that one
    is taken, the first free pid above it)."""
    os.pwrite(counter, str(last).encode(), 0)
