"""The seccomp allow-list: calls no list ever named (listmount, statmount, pidfd_open, file_setattr, cachestat,
an unassigned number) are refused, and so is every host-wide kernel budget a program could use up (aio
contexts, pipe pages, queued signals: a process of the same uid outside the sandbox can still create a timer
while a program holds what it could queue). Python and C programs, on every profile, through the API and the
command line (as root; the unprivileged run is in test_nonroot_channels). The tables and the filter are also
checked without running anything: the numbers against this machine's headers, and the filter's answers for
x86_64 and aarch64 by interpreting its BPF."""

from __future__ import annotations

import ctypes
import errno
import fnmatch
import json
import os
import re
import struct
import subprocess
import sys
import threading
import time

import pytest

from grpo_rewards.sandbox.jail import seccomp, syscalls
from grpo_rewards.sandbox.pool import LocalSandbox, compilers
from grpo_rewards.sandbox.program import Limits, Program

from . import hostile_channels as H
from .conftest import PROFILE_OPTIONS, needs_default

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROBE_LIMITS = Limits(cpu_seconds=5.0, wall_seconds=10.0, memory_mb=512, output_bytes=1 << 16, file_size_mb=8)
PROFILES = list(PROFILE_OPTIONS) or ["auto"]
x86_only = pytest.mark.skipif(seccomp.MACHINE != "x86_64", reason="the probes name x86_64 numbers")

# what each probe must meet: ENOSYS where no list names the call (as on a kernel without it)
EXPECTED = {
    "listmount": errno.ENOSYS, "statmount": errno.ENOSYS, "file_setattr": errno.ENOSYS, "file_getattr": errno.ENOSYS,
    "open_tree_attr": errno.ENOSYS, "cachestat": errno.ENOSYS, "lsm_list_modules": errno.ENOSYS,
    "sysinfo": errno.ENOSYS, "mincore": errno.ENOSYS, "syscall_500": errno.ENOSYS, "timer_create": errno.ENOSYS,
    "flock": errno.ENOSYS, "pidfd_open": errno.EPERM, "pidfd_getfd": errno.EPERM, "pidfd_get_info": errno.ENOTTY,
    "setxattrat": errno.EOPNOTSUPP, "io_setup": errno.EPERM, "pipe_resize": errno.EPERM, "lockf": errno.ENOLCK,
    "fcntl_lock": errno.ENOLCK, "ofd_lock": errno.ENOLCK,
}


def probe_results(stdout: str) -> dict[str, str]:
    return {line.split()[0]: line.split()[1] for line in stdout.splitlines() if len(line.split()) == 2}


def check_probes(stdout: str, names: tuple[str, ...]) -> None:
    got = probe_results(stdout)
    assert "done" in stdout, stdout
    wrong = {n: got.get(n) for n in names if got.get(n) != f"refused:{EXPECTED[n]}"}
    assert not wrong, (wrong, stdout)


@pytest.fixture(scope="module", params=PROFILES)
def probe_pool(request):
    if seccomp.MACHINE != "x86_64":
        pytest.skip("the probes name x86_64 numbers")
    with LocalSandbox(slots=2, limits=PROBE_LIMITS, **PROFILE_OPTIONS.get(request.param, {})) as pool:
        yield pool


@needs_default
def test_python_probes_are_refused(probe_pool):
    r = probe_pool.run_one(Program(H.PY_PROBES))
    assert r.status == "ok", (r.status, r.error, r.stderr[-500:])
    check_probes(r.stdout, H.PROBE_NAMES)


@needs_default
@pytest.mark.skipif("c" not in compilers(), reason="needs gcc")
def test_c_probes_are_refused(probe_pool):
    r = probe_pool.run_one(Program(H.C_PROBES, "", "c"))
    assert r.status == "ok", (r.status, r.error, r.stderr[-500:])
    check_probes(r.stdout, H.C_PROBE_NAMES)


def _timer_as(uid: int) -> bool:
    """Whether a process of ``uid`` outside the sandbox can create a POSIX timer (forked, then setresuid)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    pid = os.fork()
    if pid == 0:
        try:
            if os.getuid() != uid:
                os.setresgid(uid, uid, uid)
                os.setresuid(uid, uid, uid)
            tid = ctypes.c_int(0)
            os._exit(0 if libc.syscall(ctypes.c_long(222), ctypes.c_long(1), None, ctypes.byref(tid)) == 0 else 3)
        finally:
            os._exit(4)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


def _program_uids(pool: LocalSandbox) -> list[int]:
    if pool._uids is not None:
        return list(pool._uids.uids)
    return [65534] if os.geteuid() == 0 else [os.getuid()]


@needs_default
def test_queued_signals_leave_the_uid_its_timers(probe_pool):
    """A program queues real-time signals to itself until refused and holds them; meanwhile a process of its
    uid outside the sandbox creates a POSIX timer. The program queues none (RLIMIT_SIGPENDING 0)."""
    uids = _program_uids(probe_pool)
    assert all(_timer_as(uid) for uid in uids)
    code = H.SIGQUEUE_HOLD.replace("HOLD", "3.0")
    box: dict[str, object] = {}
    worker = threading.Thread(target=lambda: box.update(r=probe_pool.run_one(Program(code))))
    worker.start()
    time.sleep(1.8)  # the program has queued what it could and holds it
    timers = {uid: _timer_as(uid) for uid in uids}
    worker.join()
    r = box["r"]
    assert r.status == "ok", (r.status, r.error, r.stderr[-500:])
    assert r.stdout.split()[:2] == ["queued", "0"], r.stdout
    assert all(timers.values()), timers


@needs_default
@x86_only
@pytest.mark.parametrize("profile", ["default", "hardened"])
@pytest.mark.parametrize("language", ["python", "c"])
def test_probes_through_the_command_line(tmp_path, profile, language):
    if language == "c" and "c" not in compilers():
        pytest.skip("needs gcc")
    if profile not in PROFILE_OPTIONS:
        pytest.skip(f"no {profile} profile here")
    path = tmp_path / ("probes.py" if language == "python" else "probes.c")
    path.write_text(H.PY_PROBES if language == "python" else H.C_PROBES)
    out = subprocess.run([sys.executable, "-m", "grpo_rewards", "sandbox", "run", str(path), "--json", "--profile",
                          profile, "--wall-seconds", "20", "--cpu-seconds", "10"], capture_output=True, text=True,
                         timeout=180, env={**os.environ, "PYTHONPATH": REPO})
    result = json.loads(out.stdout)
    assert result["status"] == "ok", result
    check_probes(result["stdout"], H.PROBE_NAMES if language == "python" else H.C_PROBE_NAMES)


# ---------------------------------------------------------------- the tables and the filter, offline ----

def _header(path: str, pattern: str) -> dict[str, int]:
    if not os.path.exists(path):
        pytest.skip(f"no {path} here")
    with open(path) as fh:
        return {m.group(1): int(m.group(2)) for m in re.finditer(pattern, fh.read())}


def test_x86_64_numbers_match_the_headers():
    found = _header("/usr/include/x86_64-linux-gnu/asm/unistd_64.h", r"#define __NR_(\w+) (\d+)")
    assert found and all(syscalls.X86_64[name] == nr for name, nr in found.items())


def test_aarch64_numbers_match_the_generic_table():
    found = _header("/usr/include/asm-generic/unistd.h", r"#define __NR_(\w+) (\d+)")
    found.pop("syscalls", None)
    found.pop("sync_file_range2", None)  # the same number as sync_file_range, which aarch64 has
    found = {name: nr for name, nr in found.items() if not 403 <= nr <= 423}  # 32-bit only (64-bit time)
    assert all(syscalls.AARCH64[name] == nr for name, nr in found.items())
    # the 64-bit names of the __NR3264_* entries
    assert (syscalls.AARCH64["fcntl"], syscalls.AARCH64["newfstatat"], syscalls.AARCH64["mmap"]) == (25, 79, 222)
    assert "open" not in syscalls.AARCH64 and "fork" not in syscalls.AARCH64


def test_unified_numbers_agree():
    """From 403 on, every architecture numbers calls alike."""
    for name, nr in syscalls.AARCH64.items():
        if nr >= 403:
            assert syscalls.X86_64[name] == nr, name


def test_every_name_the_filter_uses_exists():
    """A misspelt name would be skipped silently: every name must be a system call of x86_64 or aarch64."""
    known = set(syscalls.X86_64) | set(syscalls.AARCH64)
    named = {n for calls, _ in seccomp.ALLOWED.values() for n in calls}
    named |= {n for calls in seccomp.REFUSED.values() for n in calls}
    named |= {*seccomp.UNSUPPORTED, *seccomp.NOOP_TIMES, *seccomp.CHMOD, *seccomp.SELF_ONLY_ARGS}
    assert named - known == set()


def _run_bpf(code: bytes, arch: int, nr: int, args: tuple[int, ...] = ()) -> int:
    """The filter's answer for one call: a classic-BPF interpreter for the instructions the filter uses."""
    data = struct.pack("<iIQ6Q", nr, arch, 0, *(list(args) + [0] * (6 - len(args))))
    prog = [struct.unpack_from("<HBBI", code, i) for i in range(0, len(code), 8)]
    pc, acc = 0, 0
    while True:
        op, jt, jf, k = prog[pc]
        if op == seccomp.LD_W_ABS:
            acc = struct.unpack_from("<I", data, k)[0]
            pc += 1
        elif op == seccomp.RET_K:
            return k
        elif op == seccomp.JA:
            pc += 1 + k
        else:
            cond = {seccomp.JEQ_K: acc == k, seccomp.JGE_K: acc >= k, seccomp.JSET_K: bool(acc & k)}[op]
            pc += 1 + (jt if cond else jf)


ALLOW, ERR = seccomp.RET_ALLOW, seccomp.RET_ERRNO


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_the_filter_answers_by_the_machines_numbers(machine):
    arch, table = seccomp.ARCHES[machine]
    code = seccomp.build_filter(mode="python", own_pid=4242, machine=machine)

    def answer(name_or_nr, *args):
        nr = table[name_or_nr] if isinstance(name_or_nr, str) else name_or_nr
        return _run_bpf(code, arch, nr, args)

    for name in ("read", "write", "openat", "close", "mmap", "futex", "exit_group", "getrandom", "newfstatat",
                 "rt_sigreturn", "epoll_pwait", "pipe2", "dup3"):
        assert answer(name) == ALLOW, name
    assert answer("clone", 0x3D0F00) == ALLOW  # a thread (CLONE_THREAD among pthread's flags)
    assert answer("clone", 17) == ERR | errno.EPERM  # a process (SIGCHLD)
    assert answer("clone", 0x3D0F00 | 0x1000) == ERR | errno.EINVAL  # a thread with a pidfd (CLONE_PIDFD)
    assert answer("clone3") == ERR | errno.ENOSYS
    assert answer("socket", 1, 1) == ALLOW and answer("socket", 2, 1) == ERR | errno.EAFNOSUPPORT
    assert answer("fcntl", 3, 2) == ALLOW and answer("fcntl", 3, 6) == ERR | errno.ENOLCK
    assert answer("fcntl", 3, 37) == ERR | errno.ENOLCK and answer("fcntl", 3, 1031) == ERR | errno.EPERM
    assert answer("ioctl", 1, 0x5401) == ALLOW and answer("ioctl", 1, 0xC040FF0B) == ERR | errno.ENOTTY
    assert answer("prctl", 15) == ALLOW and answer("prctl", 62) == ERR | errno.EINVAL  # PR_SCHED_CORE
    assert answer("sched_setaffinity", 4242) == ALLOW and answer("sched_setaffinity", 4243) == ERR | errno.EPERM
    assert answer("prlimit64", 0, 7, 0, 0) == ALLOW and answer("prlimit64", 0, 7, 8, 0) == ERR | errno.EPERM
    assert answer("execve") == ERR | errno.EPERM and answer("execveat") == ERR | errno.EPERM
    assert answer("listxattr") == ERR | errno.EOPNOTSUPP and answer("utimensat") == ERR | 0
    for name in ("listmount", "statmount", "file_setattr", "cachestat", "flock", "sysinfo", "io_submit",
                 "timer_create", "mincore", "membarrier"):
        assert answer(name) == ERR | errno.ENOSYS, name
    assert answer(470) == ERR | errno.ENOSYS and answer(1000) == ERR | errno.ENOSYS
    assert _run_bpf(code, 0x40000003, 3) == seccomp.RET_KILL_PROCESS  # a 32-bit x86 call
    assert _run_bpf(code, 0x40000028, 3) == seccomp.RET_KILL_PROCESS  # a 32-bit ARM call
    if machine == "x86_64":
        assert _run_bpf(code, arch, 0x40000000 | 0) == seccomp.RET_KILL_PROCESS  # x32
    exec_code = seccomp.build_filter(mode="exec", machine=machine)
    assert _run_bpf(exec_code, arch, table["execveat"], (3, 0, 0, 0, 0x1000)) == ALLOW
    assert _run_bpf(exec_code, arch, table["execveat"], (3, 0, 0, 0, 0)) == ERR | errno.EPERM
    compile_code = seccomp.build_filter(mode="compile", machine=machine)
    assert _run_bpf(compile_code, arch, table["execve"]) == ALLOW
    assert _run_bpf(compile_code, arch, table["clone"], (17,)) == ALLOW


def _tick(names) -> str:
    return ", ".join(f"`{n}`" for n in names)


def test_docs_give_the_filter_s_own_tables():
    """docs/sandbox.md's tables of allowed calls (group, calls, why) and of calls refused with EPERM are the
    filter's own lists, rendered: a call added, dropped or moved in ``seccomp`` without the docs fails here
    (the message gives the tables to paste)."""
    with open(os.path.join(REPO, "docs", "sandbox.md")) as fh:
        doc = fh.read()
    section = doc.split("### System calls", 1)[1].split("\n### ", 1)[0] if "### System calls" in doc else ""
    allowed = "\n".join(["| group | calls | why |", "|---|---|---|",
                         *(f"| {group} | {_tick(calls)} | {why} |" for group, (calls, why) in seccomp.ALLOWED.items())])
    refused = "\n".join(["| group | calls |", "|---|---|",
                         *(f"| {group} | {_tick(calls)} |" for group, calls in seccomp.REFUSED.items())])
    assert allowed in section, allowed
    assert refused in section, refused
    patterns = re.findall(r"`(\*[a-z_]+)`", section)  # `*xattr`: every call whose name ends so
    others = [n for n in (*seccomp.UNSUPPORTED, *seccomp.NOOP_TIMES)
              if f"`{n}`" not in section and not any(fnmatch.fnmatchcase(n, p) for p in patterns)]
    assert not others, others
    for name in (*seccomp.UNSUPPORTED, *seccomp.NOOP_TIMES):  # and the filter answers as the text says
        code = seccomp.build_filter(mode="python", machine="x86_64")
        expected = ERR | (errno.EOPNOTSUPP if name in seccomp.UNSUPPORTED else 0)
        if name in syscalls.X86_64:
            assert _run_bpf(code, seccomp.ARCHES["x86_64"][0], syscalls.X86_64[name]) == expected, name
