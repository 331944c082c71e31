"""The local sandbox: a pool of pre-started zygotes (one per slot) running programs in parallel.

    with LocalSandbox(slots=4) as box:
        results = box.run([Program("print(input())", stdin="hi\\n")])

At start-up it probes the kernel, starts the zygotes (empty environment, ``python
-I``), checks the layers each one really got, logs them in its first line and
refuses untrusted code below the ``default`` profile unless ``allow_unsafe=True``.
A program's code, stdin, stdout and stderr are memfds made here and passed to the
zygote, which hands them to its child unread; the output is read back here. C and C++
sources are compiled in the jail first (once per source, under the program's own time and
memory limits) and their binary, copied into a sealed memfd of the pool's own (so its pages
are the pool's, never a slot's), is executed under the same layers; the cache of binaries is
bounded by count and by bytes. A zygote that dies or hangs during a run makes that run the
program's failure; a slot that cannot run a program before it starts (its cgroup cannot be
set, its template is gone) restarts and runs it; only a slot that cannot start is a sandbox
error.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import queue
import socket
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from grpo_rewards.cpus import cpu_share
from grpo_rewards.sandbox import languages
from grpo_rewards.sandbox import packages as allowed
from grpo_rewards.sandbox import probe as probing
from grpo_rewards.sandbox.compile_cache import (
    COMPILE_CACHE_MB,
    COMPILE_LIMITS,
    CompileCache,
    compile_status,
    limits_for,
    own_copy,
)
from grpo_rewards.sandbox.jail import cgroups, cleanup, wire
from grpo_rewards.sandbox.program import (
    COMPILE_ERROR,
    OK,
    RUNTIME_ERROR,
    SANDBOX_ERROR,
    TIMEOUT,
    Limits,
    Program,
    RunResult,
    sandbox_error,
)
from grpo_rewards.sandbox.uids import DEFAULT_BASE, UidClaim

log = logging.getLogger("grpo.sandbox")

DEFAULT_SLOTS_PER_CORE = 2
BASE_PREFIX = "grpo-sandbox-"  # + owner pid: a pool killed before close() leaves its folder to the next one
HANG_MARGIN = 30.0  # seconds past a program's wall limit before its zygote counts as hung
START_TIMEOUT = 60.0  # seconds for a zygote's hello (its self-test included)
def compilers() -> dict[str, str]:
    """Absolute paths of the compilers found through ``PATH``, by language (the zygote's environment is empty)."""
    return languages.compilers()
JAIL_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jail")
BOOT = (  # python -I -S: no site, no .pth files (a smaller zygote forks faster); the allowed packages' folder, if any
    "import sys,importlib.util as u;d=sys.argv[2];sys.path+=[p for p in sys.argv[3].split(chr(10)) if p];"
    "s=u.spec_from_file_location('_grpo_jail',d+'/__init__.py',submodule_search_locations=[d]);"
    "m=u.module_from_spec(s);sys.modules['_grpo_jail']=m;s.loader.exec_module(m);"
    "import _grpo_jail.zygote as z;z.main(sys.argv[:2])"
)


_SPAWNER: ThreadPoolExecutor | None = None
_SPAWNER_LOCK = threading.Lock()


def _spawner() -> ThreadPoolExecutor:
    """One long-lived thread starts every zygote: bwrap's --die-with-parent (PR_SET_PDEATHSIG) fires when
    the *thread* that started it ends, so a short-lived thread (an HTTP handler) must not start one."""
    global _SPAWNER
    with _SPAWNER_LOCK:
        if _SPAWNER is None:
            _SPAWNER = ThreadPoolExecutor(1, thread_name_prefix="sandbox-spawner")
        return _SPAWNER


class Slot:
    """One zygote process and its socket; restarted on the next run if it dies."""

    def __init__(self, index: int, cfg: dict[str, Any]):
        self.index = index
        self.cfg = cfg
        self.proc: subprocess.Popen[bytes] | None = None
        self.sock: socket.socket | None = None
        self.layers: list[str] = []
        self.problems: list[str] = []
        self.lock = threading.Lock()

    def start(self) -> None:
        """Start the zygote; :class:`~grpo_rewards.sandbox.probe.SandboxStartError` says why it could not."""
        try:
            self._start()
        except OSError as exc:
            if not (self.cfg.get("bwrap") and self.cfg.get("bwrap_optional")):
                raise probing.SandboxStartError(_start_failure(self.index, self.cfg, exc)) from None
            self.cfg = {**self.cfg, "bwrap": ""}  # auto profile: fall back to the zygote's own namespaces
            self.problems.append(f"bubblewrap failed, running without it: {exc}")
            try:
                self._start()
            except OSError as again:
                raise probing.SandboxStartError(_start_failure(self.index, self.cfg, again)) from None

    def _start(self) -> None:
        parent, child = socket.socketpair()
        cfg = {**self.cfg, "fd": child.fileno(), "parent_pid": os.getpid()}
        packages = cfg.get("packages") or {}
        command = [sys.executable, "-I", "-S", "-c", BOOT, json.dumps(cfg), JAIL_DIR, packages.get("dir", "")]
        cgroup_fds = list(cfg["cgroup"]["fds"].values()) if cfg.get("cgroup") else []
        if cfg.get("bwrap"):
            needed = [*_zygote_paths(), *packages.get("entries", {}).values()]
            command = bwrap_command(cfg["scratch_root"], needed, cfg["bwrap"], [packages["dir"]] if packages else []) + command
        try:
            self.proc = _spawner().submit(
                subprocess.Popen, command,
                env={}, cwd="/", stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                pass_fds=[child.fileno(), *cgroup_fds], close_fds=True,
            ).result()
        finally:
            child.close()
        self.sock = parent
        parent.settimeout(START_TIMEOUT)  # a zygote that never says hello (a stuck mount, a hung bwrap)
        try:
            hello, _ = wire.recv(parent)
        except OSError as exc:  # socket.timeout included
            self.proc.kill()
            self.stop()
            raise OSError(f"no hello from the zygote within {START_TIMEOUT:.0f}s ({exc})") from None
        if hello is None or "error" in hello:
            err = self.proc.stderr.read().decode(errors="replace")[-2000:] if self.proc.stderr else ""
            self.stop()
            raise OSError(f"sandbox slot {self.index}: {hello and hello.get('error') or 'zygote failed to start'} {err}")
        if self.proc.stderr:
            self.proc.stderr.close()  # the zygote logs nothing after hello; do not hold the pipe
        self.layers = list(hello["layers"])
        self.problems += list(hello.get("problems", []))

    def call(self, msg: dict[str, Any], timeout: float | None = None, fds: Sequence[int] = ()) -> dict[str, Any] | None:
        """Send one request (and ``fds``) and wait for its reply; None when the zygote died or hung past ``timeout``."""
        with self.lock:
            if self.sock is None:
                self.start()
            assert self.sock is not None
            self.sock.settimeout(timeout)
            try:
                wire.send(self.sock, msg, fds)
                reply, extra = wire.recv(self.sock)
                for fd in extra:
                    os.close(fd)
            except OSError:  # includes socket.timeout: the zygote is stuck, start a fresh one
                reply = None
                if self.proc is not None:
                    self.proc.kill()
            if reply is None or reply.get("retire"):
                self.stop()  # dead, hung, or retiring after a run it could not clean up: a fresh one next time
            return reply

    def stop(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if self.proc is not None:
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None


def _start_failure(index: int, cfg: dict[str, Any], exc: OSError) -> str:
    if isinstance(exc, FileNotFoundError) and cfg.get("bwrap"):
        return (f"sandbox slot {index}: bubblewrap is gone from {cfg['bwrap']} (found there at start-up); "
                "reinstall it or use profile = \"auto\"")
    return f"sandbox slot {index} could not start: {exc}"


def bwrap_command(scratch_root: str, needed: Sequence[str] = (), bwrap: str = "bwrap",
                  read_only: Sequence[str] = ()) -> list[str]:
    """The bubblewrap prefix of the strict profile: new pid/net/ipc/uts/cgroup namespaces, a read-only
    root, a fresh /proc, /dev and /tmp, and the slot's scratch root; capabilities stay (the zygote needs
    them to switch uid and mount its tmpfs), every child drops them. ``needed`` paths that the fresh
    /tmp would hide (a checkout or virtualenv under /tmp) are bound back read-only."""
    # bind each whole top-level folder under /tmp (bwrap would create its parents 0700, closing them)
    under_tmp = sorted({"/tmp/" + os.path.realpath(p)[5:].split("/")[0] for p in needed
                        if os.path.realpath(p).startswith("/tmp/")})
    keep = [arg for path in under_tmp for arg in ("--ro-bind", path, path)]
    # the pool's folder first, made 0711 (a bind below it would create it 0700, closing it to the slot uids),
    # then the slot's scratch root and the allowed packages' folder inside it
    return [bwrap, "--die-with-parent", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
            "--unshare-cgroup-try", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
            *keep, "--perms", "0711", "--dir", os.path.dirname(scratch_root), "--bind", scratch_root, scratch_root,
            *[arg for path in read_only for arg in ("--ro-bind", path, path)], "--cap-add", "ALL", "--chdir", "/", "--"]


def _zygote_paths() -> list[str]:
    """What the zygote reads at start: the interpreter, its prefixes, the jail package."""
    return [os.path.dirname(sys.executable), sys.prefix, sys.base_prefix, os.path.dirname(os.path.dirname(JAIL_DIR))]


class LocalSandbox:
    """A pool of fork-server slots (see module docs). ``run`` is thread-safe.

    ``profile`` picks a profile of :mod:`~grpo_rewards.sandbox.probe` (``auto``: the
    strongest available); ``disable`` drops named layers (diagnosis and tests only).
    """

    name = "local"

    def __init__(
        self,
        *,
        slots: int | None = None,
        limits: Limits | None = None,
        allow_unsafe: bool = False,
        profile: str = "auto",
        uid_base: int = DEFAULT_BASE,
        scratch_mb: int = 64,
        scratch_inodes: int = 4096,
        preload: Sequence[str] | None = None,
        read_only: Sequence[str] = (),
        disable: Sequence[str] = (),
        compile_cache_mb: int = COMPILE_CACHE_MB,
        packages: Sequence[str] = (),
    ):
        self.limits = limits or Limits()
        # two programs in flight per core: while one slot hands a result back, the core runs another (the cores of
        # this process's share: split among the training processes on this machine, grpo_rewards.cpus)

        self.slots = max(1, int(slots or DEFAULT_SLOTS_PER_CORE * cpu_share()))
        found = probing.probe()
        wanted = probing.select_layers(profile, found, disable)  # dropping a default layer needs allow_unsafe
        probing.check_profile(tuple(wanted), allow_unsafe)
        # programs import the standard library and the allow-list only: never the trainer's site-packages
        self.packages = tuple(packages)
        entries = allowed.resolve(self.packages)
        self._uids = UidClaim(self.slots, uid_base) if "uid" in wanted else None
        for problem in cleanup.remove_stale(tempfile.gettempdir(), BASE_PREFIX):
            log.warning("sandbox: %s", problem)
        self._base = tempfile.mkdtemp(prefix=f"{BASE_PREFIX}{os.getpid()}-")
        os.chmod(self._base, 0o711)
        if entries:
            try:
                allowed.link_folder(os.path.join(self._base, "packages"), entries)
            except BaseException:
                self.close()
                raise
        # a memory and pids cgroup per slot where this process can make them (root, or a delegated tree);
        # without, the zygotes refuse memfd_create and cap a shared uid's tasks with RLIMIT_NPROC
        self._cgroups = cgroups.PoolCgroups(self.slots) if "cgroup" not in disable else None
        self._cgroup_fds: list[int] = []
        cgroup_note = [f"no cgroups: {self._cgroups.why}"] if self._cgroups and not self._cgroups.version else []
        common: dict[str, Any] = {
            "read_only": probing.read_only_paths(tuple(read_only)), "rw_files": list(probing.RW_FILES),
            "namespaces": [n for n in probing.NAMESPACE_LAYERS if n in wanted], "landlock": "landlock-fs" in wanted, "seccomp": "seccomp" in wanted,
            "scratch_mb": scratch_mb, "scratch_inodes": scratch_inodes,
            "bwrap": found.bwrap if "bwrap" in wanted else "", "bwrap_optional": profile == "auto",
            "packages": {"dir": os.path.join(self._base, "packages"), "entries": entries} if entries else {},
            "hide": allowed.site_folders(),
        }
        if "landlock-scope" not in wanted:
            common["landlock_max_abi"] = 5 if "landlock-net" in wanted else 3 if "landlock-fs" in wanted else 0
        if preload is not None:
            common["preload"] = list(preload)
        self._slots: list[Slot] = []
        try:
            for i in range(self.slots):
                root = os.path.join(self._base, f"slot{i}")
                os.mkdir(root, 0o711)
                uid = self._uids.uids[i] if self._uids else None
                cgroup = self._cgroups.for_slot(i) if self._cgroups else None
                if cgroup:
                    self._cgroup_fds += cgroup["fds"].values()  # kept open: a restarted zygote gets them again
                self._slots.append(Slot(i, {**common, "scratch_root": root, "uid": uid, "gid": uid,
                                            "cgroup": cgroup}))
            with ThreadPoolExecutor(self.slots) as starting:  # handshakes in parallel (spawns: one thread)
                list(starting.map(Slot.start, self._slots))
            self.layers = sorted(set.intersection(*(set(s.layers) for s in self._slots)), key=_layer_order)
            self.profile = probing.check_profile(tuple(self.layers), allow_unsafe)
            lost = sorted(set(probing.PROFILES.get(profile, ())) - set(self.layers))
            if lost:
                raise probing.UnsafeSandboxError(f"sandbox profile {profile!r}: the zygotes could not put on "
                                                 f"{', '.join(lost)} ({'; '.join(self._problems())})")
        except BaseException:
            self.close()
            raise
        self.notes = sorted(set(self._problems()) | set(found.notes) | set(cgroup_note))
        self._free: queue.Queue[Slot] = queue.Queue()
        for s in self._slots:
            self._free.put(s)
        self._executor = ThreadPoolExecutor(self.slots, thread_name_prefix="sandbox")
        self.compilers = compilers()
        self.compile_limits = COMPILE_LIMITS  # at most these; each compile runs under its program's limits
        self._binaries = CompileCache(max_bytes=int(compile_cache_mb) << 20)
        self._counts: Counter[str] = Counter()
        self._count_lock = threading.Lock()
        log.info("sandbox local: profile=%s layers=%s slots=%d", self.profile, ",".join(self.layers), self.slots)
        for note in self.notes:
            log.debug("sandbox: %s", note)

    # ---------------------------------------------------------------- running ----

    def run(self, programs: Sequence[Program]) -> list[RunResult]:
        """Run every program (in parallel across the slots); results in the same order."""
        return list(self._executor.map(self.run_one, programs))

    def run_one(self, program: Program) -> RunResult:
        lang = languages.get(program.language)
        limits = program.limits or self.limits
        if lang is not None and lang.local and not lang.compiled:
            result = self._run_fds(_program_fds(program), {"op": "run", "limits": limits.as_dict()}, limits)
        elif lang is not None and lang.local:
            result = self._run_compiled(program, lang.name, limits)
        else:
            names = ", ".join(x.name for x in languages.local_languages())
            result = sandbox_error(f"the local sandbox runs {names}, not {program.language!r}")
        with self._count_lock:
            self._counts[result.status] += 1
        return result

    # ------------------------------------------------------------ C and C++ ----

    def _run_compiled(self, program: Program, language: str, limits: Limits) -> RunResult:
        """Compile (once per source: cached) in the jail, then run the binary under the same layers."""
        binary, compiled = self._compiled(program.code, language, limits_for(limits, self.compile_limits))
        if binary is None:
            return compiled
        try:
            io_fds = _program_fds(Program("", program.stdin))
        except BaseException:
            os.close(binary)
            raise
        os.close(io_fds[0])
        fds = [binary, *io_fds[1:]]
        mode = languages.get(language).run_mode  # type: ignore[union-attr]
        result = self._run_fds(fds, {"op": "run", "mode": mode, "limits": limits.as_dict()}, limits)
        result.extra.update(compile_wall=compiled.wall, compile_cpu=compiled.cpu)
        return result

    def _compiled(self, code: str, language: str, limits: Limits | None = None) -> tuple[int | None, RunResult]:
        """``(a new fd of the sealed binary memfd, compile result)``, or ``(None, why)``: a compile error, limit or timeout
        is the program's (``compile_error``); a missing compiler is the machine's (``sandbox_error``)."""
        limits = limits or self.compile_limits
        compiler = self.compilers.get(language) or languages.compilers().get(language)  # registered since start
        if compiler is None:
            return None, sandbox_error(f"no {languages.get(language).compiler} on this machine: "  # type: ignore[union-attr]
                                       "apt-get install gcc g++")
        key = (language, hashlib.sha256(code.encode("utf-8", "surrogateescape")).hexdigest(), limits.cpu_seconds,
               limits.wall_seconds, limits.memory_mb)  # a compile that hit small limits is not another's verdict
        entry = self._binaries.entry(key)
        with entry.lock:  # the first run of a source compiles it; the others wait and share the binary
            if entry.result is None:
                entry.fd, entry.result = self._compile(code, language, compiler, limits)
                entry.size = os.fstat(entry.fd).st_size if entry.fd is not None else 0
            result = entry.result
            if result.status == SANDBOX_ERROR:  # the machine's failure: try again next time, never cache it
                entry.result = None
            binary = os.dup(entry.fd) if entry.fd is not None else None  # ours, even if the entry is evicted
        self._binaries.evict()
        return binary, result

    def compile_cache_size(self) -> int:
        """Bytes of the compiled binaries the pool keeps (in memfds of its own, never a slot's)."""
        return self._binaries.size()

    def _compile(self, code: str, language: str, compiler: str, limits: Limits) -> tuple[int | None, RunResult]:
        lang = languages.get(language)
        assert lang is not None
        flags, source_name = list(lang.flags), lang.source_name
        fds = _program_fds(Program(code, ""))
        try:
            made = _memfd("made")  # written by the compile's child: its pages are the slot's until closed here
        except OSError:
            for fd in fds:
                os.close(fd)
            raise
        msg = {"op": "run", "mode": "compile", "limits": limits.as_dict(),
               "compile": [compiler, *flags], "source_name": source_name}
        try:
            result = self._run_fds([*fds, os.dup(made)], msg, limits)
            binary = own_copy(made) if result.status == OK and os.fstat(made).st_size > 0 else None
        finally:
            os.close(made)
        if binary is not None:
            return binary, result
        if result.status != SANDBOX_ERROR:
            status = compile_status(result.status, result.stderr)  # a compiler process stopped by a limit
            detail = (result.error if result.status != RUNTIME_ERROR else "the compiler reported errors" if
                      status == RUNTIME_ERROR else f"the compiler stopped at its {'CPU' if status == TIMEOUT else 'memory'} limit")
            result = RunResult(COMPILE_ERROR, stdout="", stderr=result.stderr, exit_code=result.exit_code,
                               signal=result.signal, wall=result.wall, cpu=result.cpu,
                               error=f"compile: {status}: {detail}", extra={"compile_status": status})
        return None, result

    def _run_fds(self, fds: list[int], msg: dict[str, Any], limits: Limits) -> RunResult:
        """Send one run to a free slot; closes ``fds``. Whatever the program can cause is its failure:
        a zygote that died or hung during its run is a ``runtime_error`` (the slot restarts); a slot that
        could not run the program before it started restarts and runs it; only a slot that cannot start
        again is a sandbox error (infrastructure). The output is read and its memfds closed before the slot
        takes its next run: their pages are charged to the slot's memory cgroup."""
        try:
            slot = self._free.get()
            try:
                reply = self._call(slot, msg, limits, fds)
                if reply is not None and reply.get("restart"):  # no program ran: a fresh slot runs it
                    with self._count_lock:
                        self._counts["slot_restarts"] += 1
                    log.warning("sandbox slot %d restarts before a run (%s)", slot.index, reply.get("error"))
                    if reply.get("new_cgroup"):
                        self._renew_cgroup(slot)
                    reply = self._call(slot, msg, limits, fds)
            except BaseException:
                self._free.put(slot)
                raise
            try:
                result = None if reply is None else _result(reply, fds[2], fds[3], limits.output_bytes)
            finally:
                for fd in fds:
                    os.close(fd)
                fds = []
                self._free.put(slot)
            if result is None:
                with self._count_lock:
                    self._counts["zygote_deaths"] += 1
                log.warning("sandbox slot %d: its zygote died or hung during a run; scored as the program's "
                            "failure, the slot restarts", slot.index)
                return RunResult(RUNTIME_ERROR, error="the program's run killed or hung its sandbox process "
                                                      "(the slot restarts)")
            return result
        finally:
            for fd in fds:
                os.close(fd)

    def _call(self, slot: Slot, msg: dict[str, Any], limits: Limits, fds: list[int]) -> dict[str, Any] | None:
        try:
            return slot.call(msg, timeout=limits.wall_seconds + HANG_MARGIN, fds=fds)
        except (OSError, probing.SandboxStartError) as exc:
            return {"status": SANDBOX_ERROR, "error": f"the sandbox slot could not restart: {exc}"}

    def _renew_cgroup(self, slot: Slot) -> None:
        """Fresh cgroup folders for a slot whose zygote has ended (its next start gets them)."""
        if self._cgroups is None or not self._cgroups.version or not slot.cfg.get("cgroup"):
            return
        with slot.lock:
            old = list(slot.cfg["cgroup"]["fds"].values())
            try:
                self._cgroups.renew(slot.index)
                spec = self._cgroups.for_slot(slot.index)
            except OSError as exc:
                log.warning("sandbox slot %d: no fresh cgroup (%s); it keeps its own", slot.index, exc)
                return
            assert spec is not None
            slot.cfg = {**slot.cfg, "cgroup": spec}
            self._cgroup_fds = [fd for fd in self._cgroup_fds if fd not in old] + list(spec["fds"].values())
            for fd in old:
                with contextlib.suppress(OSError):
                    os.close(fd)

    def _problems(self) -> list[str]:
        return sorted({p for s in self._slots for p in s.problems})

    def scratch_entries(self) -> list[str]:
        """What is left in the slots' scratch folders (should be nothing between runs)."""
        out = []
        for s in self._slots:
            reply = s.call({"op": "ls"})
            out += [f"slot{s.index}/{e}" for e in (reply or {}).get("entries", [])]
        return out

    @property
    def slot_uids(self) -> list[int]:
        return list(self._uids.uids) if self._uids else []

    def metrics(self) -> dict[str, Any]:
        with self._count_lock:
            counts = dict(self._counts)
        deaths = counts.pop("zygote_deaths", 0)
        restarts = counts.pop("slot_restarts", 0)
        total = sum(counts.values())
        return {
            "backend": self.name, "profile": self.profile, "layers": list(self.layers), "slots": self.slots,
            "runs": total, "status_counts": counts, "zygote_deaths": deaths, "slot_restarts": restarts,
            "compile_cache_bytes": self.compile_cache_size(),
            "sandbox_error_rate": counts.get(SANDBOX_ERROR, 0) / total if total else 0.0,
        }

    def close(self) -> None:
        executor = getattr(self, "_executor", None)
        if executor is not None:
            executor.shutdown(wait=True)
        if getattr(self, "_binaries", None) is not None:
            self._binaries.close()
        for s in getattr(self, "_slots", []):
            with s.lock:
                s.stop()
        for fd in getattr(self, "_cgroup_fds", []):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._cgroup_fds = []
        if getattr(self, "_cgroups", None) is not None:
            self._cgroups.close()
            self._cgroups = None
        if getattr(self, "_uids", None) is not None:
            self._uids.release()
        if getattr(self, "_base", None):
            cleanup.remove_tree(self._base)
            self._base = ""

    def __enter__(self) -> LocalSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()


_ORDER = ["rlimits", "setsid", "subreaper", "uid", "landlock-fs", "landlock-net", "landlock-scope", "seccomp", "cgroup",
          "pidns", "mountns", "netns", "ipcns", "utsns", "tmpfs-scratch", "bwrap"]


def _layer_order(name: str) -> int:
    return _ORDER.index(name) if name in _ORDER else len(_ORDER)


def _memfd(name: str, data: bytes = b"", sealable: bool = False) -> int:
    fd = os.memfd_create(name, os.MFD_CLOEXEC | (os.MFD_ALLOW_SEALING if sealable else 0))
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.lseek(fd, 0, os.SEEK_SET)  # the child shares this offset
    except BaseException:
        os.close(fd)
        raise
    return fd


def _program_fds(program: Program) -> list[int]:
    """Memfds for the code, stdin, stdout and stderr: the zygote passes them on without reading them.
    If one cannot be made, those already made are closed."""
    contents = [("code", program.code.encode("utf-8", "surrogateescape")),
                ("stdin", program.stdin.encode("utf-8", "surrogateescape")), ("stdout", b""), ("stderr", b"")]
    fds: list[int] = []
    try:
        for name, data in contents:
            fds.append(_memfd(name, data))
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    return fds


def _read(fd: int, size: int, cap: int) -> str:
    return os.pread(fd, min(max(size, 0), cap), 0).decode("utf-8", "replace")


def _result(reply: dict[str, Any] | None, out_fd: int, err_fd: int, cap: int) -> RunResult:
    if reply is None:
        return sandbox_error("the zygote died (it is restarted for the next run)")
    status = reply.get("status", SANDBOX_ERROR)
    result = RunResult(
        status=status,
        stdout=_read(out_fd, reply.get("out_size", 0), cap) if status != SANDBOX_ERROR else "",
        stderr=_read(err_fd, reply.get("err_size", 0), cap) if status != SANDBOX_ERROR else "",
        exit_code=reply.get("exit_code"), signal=reply.get("signal"),
        wall=float(reply.get("wall", 0.0)), cpu=float(reply.get("cpu", 0.0)), error=reply.get("error", ""),
    )
    if result.status == "runtime_error":
        tail = result.stderr.rstrip().rsplit("\n", 1)[-1]
        if (tail.startswith("MemoryError") and result.signal is None) or "std::bad_alloc" in tail:
            result.status, result.error = "memory", "MemoryError"
        elif tail and result.signal is None:
            result.error = f"{result.error}: {tail[:200]}"
    return result
