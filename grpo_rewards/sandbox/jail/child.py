"""The forked child: put on every layer, say "ready" on fd 3, then run the program.

A run's ``mode``: ``python`` runs the code in this interpreter (no exec); ``exec``
executes a compiled binary from its memfd (``fexecve``); ``compile`` writes the
source to the scratch folder, runs the compiler command the pool gave, and copies
the binary it made into the output memfd. Nothing here returns: the child ends with
``os._exit`` (or becomes the binary). Anything that fails before "ready" is a
sandbox error (the zygote reports it); anything after is the program's.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import socket
from typing import Any

from . import landlock, limits, wire
from .linux import PR_SET_NO_NEW_PRIVS, PR_SET_PDEATHSIG, drop_capabilities, prctl

_exit = os._exit  # bound now: a program that replaces os._exit still ends here

READY_FD = 3
RULESET_FD = 4
CODE_FD = 5
BINARY_FD = 6  # compile mode: the memfd the compiled binary is copied into
SETUP_FAILED_EXIT = 111
NOBODY = 65534  # root without a slot uid runs programs as the overflow uid, never as euid 0
MEMORY_EXIT = 125
CHILD_ENV = {
    "LANG": "C.UTF-8", "PYTHONIOENCODING": "utf-8",
    "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
}


def spare(ctx: Any, go_fd: int, ready_w: int, scratch: str) -> None:
    """A child forked ahead of its program: do what does not depend on the program, then wait.

    It makes its session and its Landlock ruleset, drops every inherited fd but three,
    and blocks until the zygote sends the run (limits and the four memfds) on ``go_fd``;
    then :func:`enter`. EOF instead means no run is coming. Never returns.
    """
    try:
        os.setsid()
        if ctx.cgroup:  # the OOM killer of the slot's cgroup picks the program, never the zygote
            with open("/proc/self/oom_score_adj", "w") as fh:
                fh.write("1000")
        ruleset = _ruleset(ctx, scratch)
        tasks = _uid_tasks(ctx)
        keep = sorted({go_fd, ready_w, ruleset} - {-1})
        for lo, hi in zip([3, *[k + 1 for k in keep]], [*keep, 1 << 20]):
            os.closerange(lo, hi)  # above all the pool's socket: the pool must see EOF when the zygote dies
        msg, fds = wire.recv(socket.socket(fileno=go_fd))
        if msg is None:
            _exit(0)
    except BaseException as exc:
        try:
            os.write(ready_w, b"E" + f"{type(exc).__name__}: {exc}".encode()[:400])
        finally:
            _exit(SETUP_FAILED_EXIT)
    enter(msg, ctx, fds, ready_w, scratch, ruleset, tasks)


def _program_uid(ctx: Any) -> int:
    return ctx.uid if ctx.uid is not None else NOBODY if os.geteuid() == 0 else os.getuid()


def _uid_tasks(ctx: Any) -> int:
    """Tasks (threads) of the uid the program will run as, where it shares that uid and no pids cgroup caps
    it (-1 otherwise): its RLIMIT_NPROC is this count plus its own task limit. Counted from /proc (the owner
    of each process's folder, and its ``task`` folder's link count: two plus one per thread)."""
    if ctx.uid is not None or ctx.cgroup:
        return -1
    uid, count = _program_uid(ctx), 0
    with os.scandir("/proc") as it:
        for entry in it:
            if entry.name.isdigit():
                try:
                    if entry.stat().st_uid == uid:
                        count += max(1, os.stat(f"/proc/{entry.name}/task").st_nlink - 2)
                except OSError:
                    continue
    return count


def _ruleset(ctx: Any, scratch: str) -> int:
    if not ctx.landlock_abi:
        return -1
    # the zygote keeps O_PATH fds of the system paths; only the scratch folder is new
    scratch_rules = landlock.open_rules(ctx.landlock_abi, [], [scratch], [])
    return landlock.build_ruleset(ctx.landlock_abi, ctx.landlock_rules + scratch_rules)


def enter(req: dict[str, Any], ctx: Any, fds: list[int], ready_w: int, scratch: str, ruleset: int = -2,
          tasks: int | None = None) -> None:
    """Sandbox this process (after fork) and run the code read from ``fds[0]``; never returns.

    ``fds`` are the memfds of the code, stdin, stdout and stderr; ``ruleset`` one
    :func:`spare` built already (-2: build it here); ``tasks`` what :func:`_uid_tasks` counted
    (None: count here).
    """
    try:
        if os.getsid(0) != os.getpid():
            os.setsid()
        if ruleset == -2:
            ruleset = _ruleset(ctx, scratch)
        mode = req.get("mode", "python")
        code_fd, stdin_fd, out_fd, err_fd, *binary_fd = fds
        if ruleset < 0:
            ruleset = os.open("/dev/null", os.O_RDONLY)  # a placeholder keeps the fd numbers fixed
        order = (stdin_fd, out_fd, err_fd, ready_w, ruleset, code_fd, *binary_fd[:1])
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 16) for fd in order]
        for target, fd in enumerate(high):  # 0, 1, 2, READY_FD (3), RULESET_FD (4), CODE_FD (5), BINARY_FD (6)
            os.dup2(fd, target)
        ruleset = RULESET_FD if ctx.landlock_abi else -1
        os.closerange(len(order), 1 << 20)  # the zygote's socket, pipes, path fds, everything else
        if tasks is None:
            tasks = _uid_tasks(ctx)
        processes = int(req["limits"]["processes"])
        # RLIMIT_NPROC counts every task of the uid: with a slot uid that is the program's own; with a shared uid
        # (no pids cgroup) the tasks the uid had when this child was forked plus the program's own limit
        limits.apply(req["limits"], nproc=processes if ctx.uid is not None else None if tasks < 0 else tasks + processes)
        os.chdir(scratch)
        uid, gid = (ctx.uid, ctx.gid) if ctx.uid is not None else (NOBODY, NOBODY) if os.geteuid() == 0 else (None, None)
        if uid is not None:
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)  # drops every capability too
        elif ctx.drop_caps:  # what the zygote's own user namespace gave (the ids stay the pool owner's)
            drop_capabilities()
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # after the uid change, which clears it
        if os.getppid() != ctx.zygote_pid:
            raise OSError("zygote gone")
        if ruleset >= 0:
            prctl(PR_SET_NO_NEW_PRIVS, 1)
            landlock.restrict_self(ruleset)
        else:
            os.close(RULESET_FD)
        if ctx.seccomp is not None:
            ctx.seccomp[mode].for_pid(os.getpid()).install()  # a shared uid: calls on other pids refused
        source = _read_code() if mode != "exec" else ""
        os.write(READY_FD, b"R")
        if mode == "exec":  # kept open until the exec closes it: a failed exec is reported there ("X")
            fcntl.fcntl(READY_FD, fcntl.F_SETFD, fcntl.FD_CLOEXEC)
        else:
            os.close(READY_FD)
    except BaseException as exc:
        try:
            os.write(READY_FD, b"E" + f"{type(exc).__name__}: {exc}".encode()[:400])
        finally:
            _exit(SETUP_FAILED_EXIT)
    if mode == "exec":
        _exec_binary(scratch)
    if mode == "compile":
        _exit(_compile(req, source, scratch))
    _exit(_run_program(source, scratch))


def _exec_binary(scratch: str) -> None:
    """Become the compiled program (its memfd, ``execveat(fd, "", AT_EMPTY_PATH)``); if that fails, say so
    on the ready pipe (a sandbox error: no program ran) and exit 127."""
    try:
        os.execve(CODE_FD, ["solution"], {**CHILD_ENV, "HOME": scratch, "TMPDIR": scratch})
    except BaseException as exc:  # not the program's doing (a kernel refusing to exec memfds, say)
        with contextlib.suppress(BaseException):
            os.write(READY_FD, b"X" + f"cannot execute the compiled binary: {exc}".encode()[:400])
    _exit(127)


def _compile(req: dict[str, Any], source: str, scratch: str) -> int:
    """Run the compiler command of ``req`` on the source (written to ``req["source_name"]``), then copy the
    binary (``a.out``) into :data:`BINARY_FD`. Returns the compiler's exit code (1 if it made no binary)."""
    import time

    with open(req["source_name"], "w", encoding="utf-8", errors="surrogateescape") as fh:
        fh.write(source)
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": scratch, "TMPDIR": scratch}
    pid = os.fork()
    if pid == 0:
        try:
            os.dup2(2, 1)  # diagnostics all on stderr
            os.execve(req["compile"][0], req["compile"], env)
        finally:
            _exit(127)
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except ChildProcessError:
            return 1
        except InterruptedError:
            time.sleep(0)
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        return code & 0xFF if code > 0 else 1
    try:
        fd = os.open("a.out", os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return 1
    with contextlib.suppress(OSError):
        while chunk := os.read(fd, 1 << 20):
            view = memoryview(chunk)
            while view:
                view = view[os.write(BINARY_FD, view):]
    os.close(fd)
    return 0


def _read_code() -> str:
    os.lseek(CODE_FD, 0, os.SEEK_SET)
    chunks = []
    while chunk := os.read(CODE_FD, 1 << 20):
        chunks.append(chunk)
    os.close(CODE_FD)
    return b"".join(chunks).decode("utf-8", "surrogateescape")


def _run_program(source: str, scratch: str) -> int:
    import atexit
    import io
    import sys
    import tempfile
    import threading
    import traceback
    import types

    os.environ.clear()
    os.environ.update(CHILD_ENV, HOME=scratch, TMPDIR=scratch)
    tempfile.tempdir = None
    sys.stdin = sys.__stdin__ = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)),
                                                 encoding="utf-8", errors="replace")
    sys.stdout = sys.__stdout__ = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False), 1 << 16),
                                                   encoding="utf-8", errors="backslashreplace")
    sys.stderr = sys.__stderr__ = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8",
                                                   errors="backslashreplace", write_through=True)
    sys.argv = ["solution.py"]
    main = types.ModuleType("__main__")
    main.__file__ = os.path.join(scratch, "solution.py")
    sys.modules["__main__"] = main
    code = 0
    try:
        exec(compile(source, "solution.py", "exec"), main.__dict__)  # noqa: S102 - the sandboxed program
    except SystemExit as exc:
        code = _exit_code(exc)
    except MemoryError:
        code = MEMORY_EXIT
        _print_exc(traceback)
    except BaseException:
        code = 1
        _print_exc(traceback)
    try:
        threading._shutdown()  # type: ignore[attr-defined]  # join non-daemon threads, as Python does
        atexit._run_exitfuncs()
    except BaseException:
        pass
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BaseException):
            stream.flush()
    return code


def _exit_code(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF
    with contextlib.suppress(BaseException):
        print(exc.code, file=__import__("sys").stderr)
    return 1


def _print_exc(traceback: Any) -> None:
    with contextlib.suppress(BaseException):
        traceback.print_exc()
