"""The pristine template every child of a slot is forked from: no program learns an earlier one's result.

A child inherits the memory of the process that forks it. The zygote handles every
run's outcome (the request, the exit status, the output sizes, the reply it sends),
so a child forked from the zygote could find the previous run's result in what it
inherits: in a live object, a stack frame, or a freed buffer read byte by byte. The
zygote therefore forks, once, before it serves any run (the self-test included), a
**template**: a process that only ever receives "one more spare" and never holds
anything of a run. Each spare is forked from the template, with ``CLONE_PARENT`` so
that the zygote, not the template, is its parent: the zygote waits for it, reads its
exit status and resource use, and reaps it, as before. Where the kernel refuses
``CLONE_PARENT``, the template forks through a short-lived intermediate that exits at
once, and the spare is reparented to the zygote, its subreaper.

Where the slot has a pid namespace of its own, the template sets its pid counter back before every spare
(:mod:`pidns`): each child gets the pid the one before it got, and its threads the same ids, so a pid says
nothing of earlier runs nor of other slots.

The template makes the spare's scratch folder (a random name: it says nothing of how
many runs came before) and the two channels the zygote keeps (the socket the run
arrives on, the ready pipe), and passes the zygote's ends back with ``SCM_RIGHTS``.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
from dataclasses import dataclass
from typing import Any

from . import child, cleanup, pidns, wire
from .linux import MACHINE

CLONE_PARENT = 0x00008000
_SYS_CLONE = {"x86_64": 56, "aarch64": 220}.get(MACHINE)
_python = ctypes.pythonapi
_libc_gil = ctypes.PyDLL(None, use_errno=True)  # the GIL stays held across the call, as os.fork holds it
_libc_gil.syscall.restype = ctypes.c_long


@dataclass
class Spare:
    """The next run's child, forked and prepared, waiting for its program."""

    pid: int
    sock: socket.socket
    rd_r: int
    scratch: str


def fork_sibling() -> int:
    """``fork()`` whose child is the caller's sibling (``CLONE_PARENT``): 0 in the child, its pid in the caller.

    Python's own before/after-fork steps run around the raw ``clone`` exactly as ``os.fork`` runs them
    (import lock, thread state, ``os.register_at_fork`` hooks such as ``random``'s reseed)."""
    if _SYS_CLONE is None:
        raise OSError(0, f"no clone syscall number for {MACHINE}")
    _python.PyOS_BeforeFork()
    pid = _libc_gil.syscall(_SYS_CLONE, CLONE_PARENT | signal.SIGCHLD, 0, 0, 0, 0)
    if pid == 0:
        _python.PyOS_AfterFork_Child()
        return 0
    err = ctypes.get_errno()
    _python.PyOS_AfterFork_Parent()
    if pid < 0:
        raise OSError(err, f"clone(CLONE_PARENT): {os.strerror(err)}")
    return int(pid)


class Template:
    """The zygote's side: the template process and the socket spares are asked for on."""

    def __init__(self, ctx: Any, root: str, close_in_template: list[int]) -> None:
        ours, theirs = socket.socketpair()
        pid = os.fork()
        if pid == 0:  # the template: forked before any run, it never sees one
            code = 0
            try:
                ours.close()
                for fd in close_in_template:  # above all the pool's socket: the pool sees EOF when the zygote dies
                    with contextlib.suppress(OSError):
                        os.close(fd)
                _serve(theirs, ctx, root)
            except BaseException:
                code = 1
            finally:
                os._exit(code)
        theirs.close()
        self.pid = pid
        self.sock = ours

    def spare(self) -> Spare:
        """A new spare (a child of the calling zygote); OSError when the template cannot make one."""
        wire.send(self.sock, {"op": "spare"})
        msg, fds = wire.recv(self.sock)
        if msg is None or "error" in msg or len(fds) != 2:
            wire._close(fds)
            raise OSError(0, f"the template made no spare: {(msg or {}).get('error', 'it is gone')}")
        return Spare(int(msg["pid"]), socket.socket(fileno=fds[0]), fds[1], str(msg["scratch"]))

    def close(self) -> None:
        """End the template (EOF on its socket) and reap it."""
        self.sock.close()
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)


def _serve(sock: socket.socket, ctx: Any, root: str) -> None:
    """The template's loop: one spare per request until the zygote closes the socket."""
    sibling = True
    last = os.getpid()  # in the slot's pid namespace: every spare gets the pid after the template's
    while True:
        msg, fds = wire.recv(sock)
        wire._close(fds)
        if msg is None:
            return
        try:
            if ctx.pid_counter >= 0:
                pidns.reset(ctx.pid_counter, last)
            spare, sibling = _make_spare(ctx, root, sibling)
        except OSError as exc:
            wire.send(sock, {"error": f"{type(exc).__name__}: {exc}"})
            continue
        try:
            wire.send(sock, {"pid": spare.pid, "scratch": spare.scratch}, [spare.sock.fileno(), spare.rd_r])
        finally:
            spare.sock.close()
            os.close(spare.rd_r)


def _make_spare(ctx: Any, root: str, sibling: bool) -> tuple[Spare, bool]:
    """Fork one spare (see module docs); returns it and whether ``CLONE_PARENT`` is still the way."""
    scratch = os.path.join(root, f"r{os.urandom(8).hex()}")
    os.mkdir(scratch, 0o700)
    try:
        if ctx.uid is not None:
            os.chown(scratch, ctx.uid, ctx.gid)
        elif os.geteuid() == 0:
            os.chown(scratch, child.NOBODY, child.NOBODY)  # root without a slot uid runs programs as nobody
        rd_r, rd_w = os.pipe()
        ours, theirs = socket.socketpair()
    except OSError:
        cleanup.remove_tree(scratch)
        raise
    try:
        pid, sibling = _fork(ctx, theirs.fileno(), rd_w, scratch, sibling)
    except OSError:
        ours.close()
        os.close(rd_r)
        cleanup.remove_tree(scratch)
        raise
    finally:
        os.close(rd_w)
        theirs.close()
    return Spare(pid, ours, rd_r, scratch), sibling


def _fork(ctx: Any, go_fd: int, rd_w: int, scratch: str, sibling: bool) -> tuple[int, bool]:
    if sibling:
        try:
            pid = fork_sibling()
        except OSError:
            sibling = False
        else:
            if pid == 0:
                _become_spare(ctx, go_fd, rd_w, scratch)
            return pid, True
    # through an intermediate that exits at once: the spare is orphaned to the zygote (a child subreaper)
    pipe_r, pipe_w = os.pipe()
    middle = os.fork()
    if middle == 0:
        os.close(pipe_r)
        pid = os.fork()
        if pid == 0:
            os.close(pipe_w)
            _become_spare(ctx, go_fd, rd_w, scratch)
        os.write(pipe_w, str(pid).encode())
        os._exit(0)
    os.close(pipe_w)
    try:
        text = os.read(pipe_r, 32)
    finally:
        os.close(pipe_r)
        os.waitpid(middle, 0)
    if not text:
        raise OSError(0, "the intermediate fork failed")
    return int(text), False


def _become_spare(ctx: Any, go_fd: int, rd_w: int, scratch: str) -> None:
    try:
        child.spare(ctx, go_fd, rd_w, scratch)
    finally:
        os._exit(child.SETUP_FAILED_EXIT)
