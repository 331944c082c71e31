"""A fork-server for one pool slot: set up once, then fork a fresh child per program and supervise it.

Started by the pool with an empty environment and ``python -I``; it holds no
secrets and never sees expected outputs, nor any program's code, input or output:
those are memfds passed through (see :mod:`wire`). It does see how each run ended
(exit status, output sizes, its reply), so it never forks a child itself: every child
is forked from the slot's :mod:`template`, a process forked before the first run that
holds nothing of any run, and a program finds no earlier run's result in the memory
it inherits. Per run it gets a child with a fresh scratch folder (see :mod:`child`;
ahead of time, right after the previous reply, so fork and setup are off the critical
path), enforces the wall-clock deadline, kills the child's process group, sweeps every
process of the slot uid, reaps (it is the child's parent and a child subreaper),
measures the output sizes against the cap and deletes the scratch folder. One run at
a time.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import select
import signal
import socket
import sys
import time
from dataclasses import dataclass
from typing import Any

from . import cgroups, child, cleanup, landlock, mounts, pidns, seccomp, wire
from .linux import (
    CLONE_NEWIPC,
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWUTS,
    PR_SET_CHILD_SUBREAPER,
    prctl,
    unshare,
)
from .template import Spare, Template

PRELOAD = (
    "array", "bisect", "collections", "copy", "dataclasses", "datetime", "decimal", "enum", "fractions",
    "functools", "hashlib", "heapq", "io", "itertools", "json", "math", "cmath", "numbers", "operator", "queue",
    "random", "re", "statistics", "string", "struct", "textwrap", "threading", "time", "traceback", "typing",
    "unicodedata", "atexit", "tempfile", "types",
)


QUOTA_POLL = 0.05  # seconds between scratch quota checks where there is no capped tmpfs


@dataclass
class Context:
    """What every child of this zygote needs (built once)."""

    zygote_pid: int
    uid: int | None
    gid: int | None
    landlock_abi: int
    landlock_rules: list[tuple[int, int]]
    seccomp: Any
    cgroup: bool = False  # the child runs in the slot's memory and pids cgroups (no RLIMIT_NPROC needed)
    pid_counter: int = -1  # the slot's pid namespace's ns_last_pid, set back before every child (see pidns)
    drop_caps: bool = False  # the zygote made a user namespace of its own: a child clears what it gave


class Zygote:
    def __init__(self, cfg: dict[str, Any]):
        self.cfg = cfg
        self.sock = socket.socket(fileno=cfg["fd"])
        self.layers: list[str] = ["rlimits", "setsid"]
        self.problems: list[str] = []
        self.root = cfg["scratch_root"]
        self.spare: Spare | None = None
        self.template: Template | None = None
        self.retire = False
        uid = cfg.get("uid")
        # No PR_SET_PDEATHSIG: it fires when the *thread* that started us ends. The pool's socket tells us
        # instead: EOF between runs, or readable during one (the protocol is strictly request/reply).
        if cfg.get("bwrap"):
            self.layers.append("bwrap")  # bwrap's own init is our parent; --die-with-parent ties us to the pool
        elif os.getppid() != cfg["parent_pid"]:
            raise SystemExit(0)
        prctl(PR_SET_CHILD_SUBREAPER, 1)
        self.layers.append("subreaper")
        for name in cfg.get("preload", PRELOAD):
            try:
                __import__(name)
            except Exception as exc:
                self.problems.append(f"preload {name}: {exc}")
        cleanup.remove_tree(self.root, keep_top=True)  # what a dead zygote of this slot left (no tmpfs there)
        self._namespaces(cfg)
        self.cgroup: cgroups.SlotCgroup | None = None
        if cfg.get("cgroup"):
            try:
                self.cgroup = cgroups.SlotCgroup(cfg["cgroup"])
            except OSError as exc:
                self.problems.append(f"cgroup: {exc}")
        if uid is not None:
            self.layers.append("uid")
        abi = min(landlock.abi_version(), int(cfg.get("landlock_max_abi", 99))) if cfg.get("landlock", True) else 0
        self.layers += landlock.features(abi)
        self.ctx = Context(os.getpid(), uid, cfg.get("gid"), abi, [], None, self.cgroup is not None,
                           self.pid_counter, self.userns)
        if cfg.get("seccomp", True):
            self.ctx.seccomp = self._filters()
            if self.ctx.seccomp is not None:
                self.layers.append("seccomp")
        self.ctx.landlock_rules = landlock.open_rules(abi, self._read_only(cfg), [], cfg["rw_files"]) if abi else []
        self._sweep()
        gc.collect()
        gc.freeze()  # children never scan (and so never copy) the zygote's objects in their GC
        if self.cgroup is not None:
            try:
                self.cgroup.join()  # every child forked from now on starts in the slot's cgroups
                self._oom_seen = self.cgroup.oom_kills()
                self.layers.insert(self.layers.index("seccomp") + 1 if "seccomp" in self.layers else
                                   len(self.layers), "cgroup")
            except OSError as exc:
                self._cgroup_failed(exc)
        # last, before any run (the self-test included): every child is forked from this state
        self.template = Template(self.ctx, self.root, [self.sock.fileno()])

    def _filters(self) -> dict[str, Any] | None:
        """One seccomp filter per run mode (python, exec, compile). Signals are refused outright when nothing
        else confines them (no slot uid, no Landlock signal scope); without a slot uid the scheduling and limit
        calls reach only the caller (each child builds its own copy for its pid); without a memory cgroup,
        memfd_create is refused (unmapped memfd pages are outside RLIMIT_AS)."""
        if not seccomp.available():
            return None
        uid = self.ctx.uid
        return {mode: seccomp.Filter(deny_signals=uid is None and self.ctx.landlock_abi < 6, mode=mode,
                                     shared_uid=uid is None, deny_memfd=self.cgroup is None)
                for mode in seccomp.MODES}

    def _cgroup_failed(self, exc: OSError) -> None:
        """The zygote could not join the slot's cgroups: go on without them, memfd_create refused."""
        self.problems.append(f"cgroup: {exc}")
        if self.cgroup is not None:
            self.cgroup.close()
        self.cgroup = None
        self.ctx.cgroup = False
        if "cgroup" in self.layers:
            self.layers.remove("cgroup")
        if self.ctx.seccomp is not None:
            self.ctx.seccomp = self._filters()

    def _read_only(self, cfg: dict[str, Any]) -> list[str]:
        """What programs may read: the system paths and the standard library, and the allowed packages'
        folder (bind mounts inside the mount namespace; links to the packages themselves without one)."""
        packages = cfg.get("packages") or {}
        if not packages:
            return list(cfg["read_only"])
        extra = [packages["dir"]] if "mountns" in self.layers else [packages["dir"], *packages["entries"].values()]
        return [*cfg["read_only"], *extra]

    def _namespaces(self, cfg: dict[str, Any]) -> None:
        self.pid_counter, self.userns = -1, False
        wanted = cfg.get("namespaces") or []
        if wanted is True:
            wanted = ["mountns", "netns", "ipcns", "utsns", "tmpfs-scratch", "pidns"]
        for flag, name in ((CLONE_NEWNS, "mountns"), (CLONE_NEWNET, "netns"), (CLONE_NEWIPC, "ipcns"),
                           (CLONE_NEWUTS, "utsns")):
            if name not in wanted or (name != "mountns" and "mountns" not in wanted):
                continue
            try:
                unshare(flag)
                self.layers.append(name)
            except OSError as exc:
                self.problems.append(f"unshare {name}: {exc}")
        if "mountns" not in self.layers:
            if "pidns" in wanted and os.geteuid() != 0:  # not root: in a user namespace of its own
                self._pid_namespace(False, user=True)
            return
        try:
            mounts.make_private()
            packages = cfg.get("packages") or {}
            if packages:  # bound before the site-packages folders they live in are hidden
                mounts.bind_packages(packages["dir"], packages["entries"])
            covered = mounts.expose(cfg["read_only"])
            if covered:
                self.problems.append(f"exposed read-only inside the mount namespace: {', '.join(covered)}")
            mounts.hide(list(cfg.get("hide", [])))
            if "tmpfs-scratch" in wanted:
                mounts.tmpfs_scratch(self.root, cfg["scratch_mb"], cfg["scratch_inodes"])
                self.layers.append("tmpfs-scratch")
        except OSError as exc:
            self.problems.append(f"mounts: {exc}")
        if "pidns" in wanted:
            self._pid_namespace(bool(cfg.get("bwrap")))

    def _pid_namespace(self, in_bwrap: bool, user: bool = False) -> None:
        """The slot's own pid namespace (bubblewrap's, or one made here, in a user namespace of its own where
        ``user``) and its counter (see :mod:`pidns`)."""
        try:
            if user:
                pidns.enter_user_namespace()
                self.userns = True
            if not in_bwrap:
                pidns.become_first()
            self.pid_counter = pidns.open_counter()
        except OSError as exc:
            self.problems.append(f"pid namespace: {exc}")
            return
        self.layers.append("pidns")

    # ------------------------------------------------------------------ loop ----

    def self_test(self) -> str:
        """Run an empty program through every layer, for real, in a throwaway child: "" or what failed.

        A kernel without ``pidfd_open``, a container that refuses seccomp or Landlock, a
        slot uid that cannot read the interpreter: each shows here, at start, as one clear
        error, instead of as a sandbox error on every program later.
        """
        fds = [os.memfd_create(name, os.MFD_CLOEXEC) for name in ("code", "stdin", "stdout", "stderr")]
        os.write(fds[0], b"import os\nos.listdir(os.path.dirname(os.__file__))\n")  # the stdlib is readable
        limits = {"cpu_seconds": 10.0, "wall_seconds": 30.0, "memory_mb": 4096, "output_bytes": 1 << 16,
                  "file_size_mb": 1, "open_files": 64, "processes": 64, "stack_mb": 0}
        try:
            reply = self.run({"op": "run", "limits": limits}, fds)
            stderr = os.pread(fds[3], 400, max(0, os.fstat(fds[3]).st_size - 400)).decode(errors="replace")
        except Exception as exc:  # e.g. pidfd_open missing (Linux < 5.3)
            reply, stderr = {"status": "sandbox_error", "error": f"{type(exc).__name__}: {exc}"}, ""
        finally:
            _close(fds)
        if reply.get("status") == "ok":
            return ""
        return f"{reply.get('status')}: {reply.get('error')}" + (f": {stderr.strip()}" if stderr.strip() else "")

    def serve(self) -> None:
        failed = self.self_test()
        if failed:
            wire.send(self.sock, {"op": "hello", "error": f"the sandbox self-test failed ({failed}); layers tried: "
                                                           f"{', '.join(self.layers)}"})
            return
        wire.send(self.sock, {"op": "hello", "pid": os.getpid(), "layers": self.layers, "problems": self.problems})
        self._prepare_spare()
        while True:
            msg, fds = wire.recv(self.sock)
            if msg is None:
                break
            op = msg.get("op")
            try:
                if op == "run" and len(fds) == (5 if msg.get("mode") == "compile" else 4):
                    reply = self.run(msg, fds)
                elif op == "ls":
                    spare = os.path.basename(self.spare.scratch) if self.spare else None
                    reply = {"entries": sorted(e for e in os.listdir(self.root) if e != spare)}
                else:
                    reply = {"status": "sandbox_error", "error": f"bad request {op!r} with {len(fds)} fds"}
            finally:
                _close(fds)
            wire.send(self.sock, reply)
            if self.retire:
                break
            if self.spare is None:
                self._prepare_spare()  # off the critical path: the pool already has its reply
        self._drop_spare()
        self._sweep()
        if self.template is not None:
            self.template.close()
        if self.cgroup is not None:
            self.cgroup.close()

    def _prepare_spare(self) -> None:
        """Have the template fork the next run's child ahead of time (fork and setup cost no latency then)."""
        if self.template is None:
            return
        try:
            self.spare = self.template.spare()
        except OSError as exc:
            self.problems.append(f"spare: {exc}")

    def _drop_spare(self) -> None:
        spare, self.spare = self.spare, None
        if spare is not None:
            _kill_group(spare.pid)
            os.waitpid(spare.pid, 0)
            spare.sock.close()
            os.close(spare.rd_r)
            cleanup.remove_tree(spare.scratch)

    def run(self, req: dict[str, Any], fds: list[int]) -> dict[str, Any]:
        """Run one program; ``fds`` are its code, stdin, stdout and stderr memfds (never read here)."""
        for _attempt in range(2):
            if self.spare is None:
                self._prepare_spare()
            spare, self.spare = self.spare, None
            if spare is None:  # the template is gone: no program ran, a fresh slot runs this one
                return self._restart("could not fork a child")
            t0 = time.monotonic()
            if self.cgroup is not None:
                lim = req["limits"]
                try:
                    self.cgroup.set_limits(int(lim["memory_mb"]) << 20, int(lim["processes"]))
                except OSError as exc:
                    self.spare = spare
                    self._drop_spare()
                    return self._restart(f"cgroup limits: {exc}", cgroup=True)
            try:
                wire.send(spare.sock, req, fds)
                break
            except OSError:  # the spare died waiting (it should not): reap it, fork another
                self.spare = spare
                self._drop_spare()
        else:
            return self._restart("the child died before its program arrived")
        spare.sock.close()
        try:
            reply = self._supervise(req, spare.pid, spare.rd_r, fds[2], fds[3], t0, spare.scratch)
        finally:
            os.close(spare.rd_r)
        if not cleanup.remove_tree(spare.scratch):
            # the program made its folder unremovable: its failure; this zygote ends after replying, so the
            # pool starts a fresh one (a fresh tmpfs where there is one)
            reply.update(status="runtime_error", error="the program left a scratch folder that cannot be removed",
                         retire=True)
            self.retire = True
        return reply

    def _restart(self, why: str, cgroup: bool = False) -> dict[str, Any]:
        """No program ran and this slot cannot run one: this zygote ends after replying, and the pool runs the
        same program on a fresh one (with a fresh cgroup when the cgroup could not be set): never the program's
        failure, nor a sandbox error of the program that happened to come next."""
        self.retire = True
        return {"status": "sandbox_error", "error": why, "wall": 0.0, "retire": True, "restart": True,
                "new_cgroup": cgroup}

    def _supervise(self, req: dict[str, Any], pid: int, rd_r: int, out_fd: int, err_fd: int,
                   t0: float, scratch: str) -> dict[str, Any]:
        lim = req["limits"]
        cap = int(lim["output_bytes"])
        deadline = t0 + float(lim["wall_seconds"])
        # no capped tmpfs (no mount namespace: a non-root default profile): the scratch folder's size,
        # entries and depth are checked every QUOTA_POLL seconds instead, and the run killed past them
        quota = None if "tmpfs-scratch" in self.layers else (int(self.cfg.get("scratch_mb", 64)) << 20,
                                                             int(self.cfg.get("scratch_inodes", 4096)))
        over = ""
        ready = bytearray()
        pidfd = os.pidfd_open(pid)
        poller = select.poll()
        os.set_blocking(rd_r, False)
        poller.register(rd_r, select.POLLIN)
        poller.register(pidfd, select.POLLIN)
        sock_fd = self.sock.fileno()
        poller.register(sock_fd, select.POLLIN | select.POLLHUP)
        exited = timed_out = orphaned = False
        try:
            while not exited:
                left = deadline - time.monotonic()
                if left <= 0:
                    timed_out = True
                    break
                if quota is not None:
                    over = cleanup.over_quota(scratch, *quota)
                    if over:
                        break
                    left = min(left, QUOTA_POLL)
                for fd, _ in poller.poll(max(1, int(left * 1000) + 1)):
                    if fd == pidfd:
                        exited = True
                    elif fd == sock_fd:
                        orphaned = True
                    elif fd == rd_r:
                        _read_ready(rd_r, ready, poller)
                if orphaned:
                    break
            _read_ready(rd_r, ready, poller)
        finally:
            _kill_group(pid)
            _, wstatus, rusage = os.wait4(pid, 0)
            os.close(pidfd)
            self._sweep()
        if orphaned:  # the pool went away mid-run: nobody wants the result
            raise SystemExit(0)
        cpu = rusage.ru_utime + rusage.ru_stime
        sizes = (os.fstat(out_fd).st_size, os.fstat(err_fd).st_size)  # sizes only: contents are not ours
        reply: dict[str, Any] = {
            "wall": time.monotonic() - t0, "cpu": cpu, "out_size": sizes[0], "err_size": sizes[1],
            "exit_code": os.waitstatus_to_exitcode(wstatus) if os.WIFEXITED(wstatus) else None,
            "signal": os.WTERMSIG(wstatus) if os.WIFSIGNALED(wstatus) else None,
        }
        if ready.startswith(b"RX"):  # the binary could not be executed: no program ran
            reply.update(status="sandbox_error", error=ready[2:].decode(errors="replace"))
        elif not ready.startswith(b"R"):
            why = ready[1:].decode(errors="replace") if ready.startswith(b"E") else "child died before it was ready"
            if timed_out:
                why = "child not ready before the deadline"
            reply.update(status="sandbox_error", error=why)
        elif max(sizes) > cap:
            reply.update(status="output_limit", error=f"output over {cap} bytes")
        elif over or (quota is not None and (over := cleanup.over_quota(scratch, *quota))):
            reply.update(status="output_limit", error=f"scratch folder over its quota: {over}")
        elif reply["signal"] == signal.SIGKILL and self._oom_killed():  # memfds and tmpfs files count too
            reply.update(status="memory", error=f"memory over {lim['memory_mb']} MB (cgroup)")
        elif timed_out:
            reply.update(status="timeout", error=f"wall clock over {lim['wall_seconds']}s")
        elif reply["signal"] == signal.SIGXCPU or (reply["signal"] == signal.SIGKILL and cpu >= float(lim["cpu_seconds"])):
            reply.update(status="timeout", error=f"CPU time over {lim['cpu_seconds']}s")
        elif reply["exit_code"] == child.MEMORY_EXIT:
            reply.update(status="memory", error=f"memory over {lim['memory_mb']} MB")
        elif reply["exit_code"] == 0:
            reply.update(status="ok", error="")
        else:
            reply.update(status="runtime_error", error=_describe_exit(reply))
        return reply

    def _oom_killed(self) -> bool:
        """Whether the slot's OOM killer struck since the last look (its victim is always a SIGKILLed child,
        whose oom_score_adj is 1000), so only runs that ended by SIGKILL ask."""
        if self.cgroup is None:
            return False
        seen, self._oom_seen = self._oom_seen, self.cgroup.oom_kills()
        return self._oom_seen > seen

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
        _reap_all(self.template.pid if self.template is not None else 0)


def _read_ready(fd: int, buf: bytearray, poller: select.poll) -> None:
    """Read the child's ready pipe ("R", or "E" and why) without blocking; unregister it at EOF."""
    while len(buf) < 1024:
        try:
            chunk = os.read(fd, 512)
        except (BlockingIOError, OSError):
            return
        if not chunk:
            with contextlib.suppress(KeyError):
                poller.unregister(fd)
            return
        buf += chunk


def _kill_group(pid: int) -> None:
    for target in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            target()


def _reap_all(template: int = 0, patience: float = 2.0) -> None:
    """Reap every child (orphans come to us as subreaper) but the template; wait a little for ones just killed.

    The template is a child that stays: where the kernel lists a process's children (``/proc/thread-self/
    children``), waiting ends when it is the only one left; elsewhere one pass reaps what has already ended
    (the next run's pass reaps the rest)."""
    end = time.monotonic() + patience
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            if time.monotonic() > end or _only_child(template):
                return
            time.sleep(0.001)


def _only_child(template: int) -> bool:
    """Whether the template is this process's only child (True too where the kernel does not say). Counted,
    not compared: in a pid namespace of its own, the zygote knows the template by a pid the host's ``/proc``
    does not use."""
    if not template:
        return False
    try:
        with open("/proc/thread-self/children", "rb") as fh:
            return len(fh.read().split()) == 1
    except OSError:
        return True


def _close(fds: list[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def _describe_exit(reply: dict[str, Any]) -> str:
    if reply["signal"] is not None:
        return f"killed by {signal.Signals(reply['signal']).name}"
    return f"exit code {reply['exit_code']}"


def main(argv: list[str]) -> None:
    cfg = json.loads(argv[1])
    try:
        zygote = Zygote(cfg)
    except Exception as exc:
        sock = socket.socket(fileno=cfg["fd"])
        wire.send(sock, {"op": "hello", "error": f"zygote setup failed: {exc}"})
        raise SystemExit(1) from None
    zygote.serve()


if __name__ == "__main__":  # pragma: no cover - started through the pool's boot line
    main(sys.argv)
