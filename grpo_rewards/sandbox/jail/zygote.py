"""A fork-server for one pool slot: set up once, then fork a fresh child per program and supervise it.

Started by the pool with an empty environment and ``python -I``; it holds no
secrets and never sees expected outputs. Per run it makes a fresh scratch folder,
forks a child (see :mod:`child`), enforces the wall-clock deadline and the output
cap, kills the child's process group, sweeps every process of the slot uid, reaps
(it is a child subreaper) and deletes the scratch folder. One run at a time.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import select
import shutil
import signal
import socket
import sys
import time
from dataclasses import dataclass
from typing import Any

from . import child, landlock, mounts, wire
from .linux import (
    CLONE_NEWIPC,
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWUTS,
    PR_SET_CHILD_SUBREAPER,
    prctl,
    unshare,
)

PRELOAD = (
    "array", "bisect", "collections", "copy", "dataclasses", "datetime", "decimal", "enum", "fractions",
    "functools", "hashlib", "heapq", "io", "itertools", "json", "math", "cmath", "numbers", "operator", "queue",
    "random", "re", "statistics", "string", "struct", "textwrap", "threading", "time", "traceback", "typing",
    "unicodedata", "atexit", "tempfile", "types",
)
READ_CHUNK = 1 << 16


@dataclass
class Context:
    """What every child of this zygote needs (built once)."""

    zygote_pid: int
    uid: int | None
    gid: int | None
    landlock_abi: int
    landlock_rules: list[tuple[int, int]]
    seccomp: Any


class Zygote:
    def __init__(self, cfg: dict[str, Any]):
        self.cfg = cfg
        self.sock = socket.socket(fileno=cfg["fd"])
        self.layers: list[str] = ["rlimits", "setsid"]
        self.problems: list[str] = []
        self.root = cfg["scratch_root"]
        self.runs = 0
        uid = cfg.get("uid")
        # No PR_SET_PDEATHSIG: it fires when the *thread* that started us ends. The pool's socket tells us
        # instead: EOF between runs, or readable during one (the protocol is strictly request/reply).
        if cfg.get("bwrap"):
            self.layers += ["bwrap", "pidns"]  # bwrap's own init is our parent; --die-with-parent ties us to the pool
        elif os.getppid() != cfg["parent_pid"]:
            raise SystemExit(0)
        prctl(PR_SET_CHILD_SUBREAPER, 1)
        self.layers.append("subreaper")
        for name in cfg.get("preload", PRELOAD):
            try:
                __import__(name)
            except Exception as exc:
                self.problems.append(f"preload {name}: {exc}")
        self._namespaces(cfg)
        if uid is not None:
            self.layers.append("uid")
        abi = landlock.abi_version() if cfg.get("landlock", True) else 0
        self.layers += landlock.features(abi)
        filt = None
        if cfg.get("seccomp", True):
            from . import seccomp

            if seccomp.available():
                filt = seccomp.Filter()
                self.layers.append("seccomp")
        rules = landlock.open_rules(abi, cfg["read_only"], [], cfg["rw_files"]) if abi else []
        self.ctx = Context(os.getpid(), uid, cfg.get("gid"), abi, rules, filt)
        self._sweep()
        gc.collect()
        gc.freeze()  # children never scan (and so never copy) the zygote's objects in their GC

    def _namespaces(self, cfg: dict[str, Any]) -> None:
        if not cfg.get("namespaces"):
            return
        for flag, name in ((CLONE_NEWNS, "mountns"), (CLONE_NEWNET, "netns"), (CLONE_NEWIPC, "ipcns"),
                           (CLONE_NEWUTS, "utsns")):
            try:
                unshare(flag)
                self.layers.append(name)
            except OSError as exc:
                self.problems.append(f"unshare {name}: {exc}")
        if "mountns" not in self.layers:
            return
        try:
            mounts.make_private()
            covered = mounts.expose(cfg["read_only"])
            if covered:
                self.problems.append(f"exposed read-only inside the mount namespace: {', '.join(covered)}")
            mounts.tmpfs_scratch(self.root, cfg["scratch_mb"], cfg["scratch_inodes"])
            self.layers.append("tmpfs-scratch")
        except OSError as exc:
            self.problems.append(f"mounts: {exc}")

    # ------------------------------------------------------------------ loop ----

    def serve(self) -> None:
        wire.send(self.sock, {"op": "hello", "pid": os.getpid(), "layers": self.layers, "problems": self.problems})
        while True:
            msg = wire.recv(self.sock)
            if msg is None:
                break
            op = msg.get("op")
            if op == "run":
                reply = self.run(msg)
            elif op == "ls":
                reply = {"entries": sorted(os.listdir(self.root))}
            else:
                reply = {"error": f"unknown op {op!r}"}
            wire.send(self.sock, reply)
        self._sweep()

    def run(self, req: dict[str, Any]) -> dict[str, Any]:
        self.runs += 1
        scratch = os.path.join(self.root, f"r{self.runs}")
        t0 = time.monotonic()
        fds: list[int] = []
        try:
            os.mkdir(scratch, 0o700)
            if self.ctx.uid is not None:
                os.chown(scratch, self.ctx.uid, self.ctx.gid)
            stdin_fd = os.memfd_create("stdin")
            fds.append(stdin_fd)
            data = req.get("stdin", b"")
            view = memoryview(data)
            while view:
                view = view[os.write(stdin_fd, view):]
            os.lseek(stdin_fd, 0, os.SEEK_SET)
            out_r, out_w = os.pipe()
            err_r, err_w = os.pipe()
            rd_r, rd_w = os.pipe()
            fds += [out_r, out_w, err_r, err_w, rd_r, rd_w]
        except OSError as exc:
            _close(fds)
            shutil.rmtree(scratch, ignore_errors=True)
            return {"status": "sandbox_error", "error": f"setup: {exc}", "wall": 0.0}
        pid = os.fork()
        if pid == 0:
            try:
                child.enter(req, self.ctx, stdin_fd, out_w, err_w, rd_w, scratch)
            finally:
                os._exit(child.SETUP_FAILED_EXIT)
        for fd in (stdin_fd, out_w, err_w, rd_w):
            os.close(fd)
        fds = [out_r, err_r, rd_r]
        try:
            return self._supervise(req, pid, out_r, err_r, rd_r, t0)
        finally:
            _close(fds)
            try:
                os.rmdir(scratch)
            except OSError:
                shutil.rmtree(scratch, ignore_errors=True)

    def _supervise(self, req: dict[str, Any], pid: int, out_r: int, err_r: int, rd_r: int, t0: float) -> dict[str, Any]:
        lim = req["limits"]
        cap = int(lim["output_bytes"])
        deadline = t0 + float(lim["wall_seconds"])
        bufs = {out_r: bytearray(), err_r: bytearray(), rd_r: bytearray()}
        pidfd = os.pidfd_open(pid)
        poller = select.poll()
        for fd in (out_r, err_r, rd_r, pidfd):
            os.set_blocking(fd, False)
            poller.register(fd, select.POLLIN)
        sock_fd = self.sock.fileno()
        poller.register(sock_fd, select.POLLIN | select.POLLHUP)
        open_fds = {out_r, err_r, rd_r}
        exited = timed_out = flooded = orphaned = False
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    timed_out = True
                    break
                for fd, _ in poller.poll(max(1, int(left * 1000) + 1)):
                    if fd == pidfd:
                        exited = True
                    elif fd == sock_fd:
                        orphaned = True
                    elif fd in open_fds:
                        _read_some(fd, bufs[fd], open_fds, poller)
                if orphaned:
                    break
                if len(bufs[out_r]) > cap or len(bufs[err_r]) > cap:
                    flooded = True
                    break
                if exited:
                    for fd in list(open_fds):  # what the child wrote before it exited
                        while fd in open_fds and _read_some(fd, bufs[fd], open_fds, poller):
                            if len(bufs[fd]) > cap:
                                flooded = fd != rd_r
                                break
                    break
        finally:
            _kill_group(pid)
            _, wstatus, rusage = os.wait4(pid, 0)
            os.close(pidfd)
            self._sweep()
        if orphaned:  # the pool went away mid-run: nobody wants the result
            raise SystemExit(0)
        wall = time.monotonic() - t0
        cpu = rusage.ru_utime + rusage.ru_stime
        ready = bytes(bufs[rd_r])
        reply: dict[str, Any] = {
            "stdout": bytes(bufs[out_r][:cap]), "stderr": bytes(bufs[err_r][:cap]), "wall": wall, "cpu": cpu,
            "exit_code": os.waitstatus_to_exitcode(wstatus) if os.WIFEXITED(wstatus) else None,
            "signal": os.WTERMSIG(wstatus) if os.WIFSIGNALED(wstatus) else None,
        }
        if not ready.startswith(b"R"):
            why = ready[1:].decode(errors="replace") if ready.startswith(b"E") else "child died before it was ready"
            if timed_out:
                why = "child not ready before the deadline"
            reply.update(status="sandbox_error", error=why)
        elif flooded:
            reply.update(status="output_limit", error=f"output over {cap} bytes")
        elif timed_out:
            reply.update(status="timeout", error=f"wall clock over {lim['wall_seconds']}s")
        elif reply["signal"] in (signal.SIGXCPU,) or (reply["signal"] == signal.SIGKILL and cpu >= float(lim["cpu_seconds"])):
            reply.update(status="timeout", error=f"CPU time over {lim['cpu_seconds']}s")
        elif reply["exit_code"] == child.MEMORY_EXIT or (reply["signal"] is None and _ends_with_memory_error(reply["stderr"])):
            reply.update(status="memory", error=f"memory over {lim['memory_mb']} MB")
        elif reply["exit_code"] == 0:
            reply.update(status="ok", error="")
        else:
            reply.update(status="runtime_error", error=_describe_exit(reply))
        return reply

    def _sweep(self) -> None:
        """Kill every process of the slot uid (daemons that left the process group), then reap.

        Done as the slot uid itself (real and effective; saved uid 0 to come back), so
        ``kill(-1)`` can reach that uid's processes and nothing else on the machine.
        """
        uid = self.cfg.get("uid")
        if uid is not None:
            os.setresuid(uid, uid, -1)
            try:
                os.kill(-1, signal.SIGKILL)
            except ProcessLookupError:
                pass
            finally:
                os.setresuid(0, 0, 0)
        _reap_all()


def _read_some(fd: int, buf: bytearray, open_fds: set[int], poller: select.poll) -> bool:
    """Read what is there; False at EOF or when nothing more is available now."""
    try:
        chunk = os.read(fd, READ_CHUNK)
    except BlockingIOError:
        return False
    if not chunk:
        open_fds.discard(fd)
        poller.unregister(fd)
        return False
    buf += chunk
    return True


def _kill_group(pid: int) -> None:
    for target in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            target()


def _reap_all(patience: float = 2.0) -> None:
    """Reap every child (orphans come to us as subreaper); wait a little for ones just killed."""
    end = time.monotonic() + patience
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            if time.monotonic() > end:
                return
            time.sleep(0.001)


def _close(fds: list[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def _ends_with_memory_error(stderr: bytes) -> bool:
    tail = stderr.rstrip().rsplit(b"\n", 1)[-1]
    return tail.startswith(b"MemoryError")


def _describe_exit(reply: dict[str, Any]) -> str:
    if reply["signal"] is not None:
        return f"killed by {signal.Signals(reply['signal']).name}"
    tail = reply["stderr"].rstrip().rsplit(b"\n", 1)[-1].decode(errors="replace")
    return f"exit code {reply['exit_code']}" + (f": {tail[:200]}" if tail else "")


def main(argv: list[str]) -> None:
    cfg = json.loads(argv[1])
    try:
        zygote = Zygote(cfg)
    except OSError as exc:
        sock = socket.socket(fileno=cfg["fd"])
        wire.send(sock, {"op": "hello", "error": f"zygote setup failed: {exc}"})
        raise SystemExit(1) from None
    zygote.serve()


if __name__ == "__main__":  # pragma: no cover - started through the pool's boot line
    main(sys.argv)
