"""The holes hostile programs found past the first suites, each under every profile this machine offers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

import pytest

from grpo_rewards.sandbox import pool as pool_module
from grpo_rewards.sandbox import probe
from grpo_rewards.sandbox.jail import cleanup
from grpo_rewards.sandbox.pool import LocalSandbox
from grpo_rewards.sandbox.program import Program

from . import hostile_more
from .conftest import FAST, FOUND, PROFILE_OPTIONS, needs_default

pytestmark = needs_default


@pytest.fixture(scope="module", params=list(PROFILE_OPTIONS))
def any_pool(request):
    with LocalSandbox(slots=1, limits=FAST, **PROFILE_OPTIONS[request.param]) as box:
        box.profile_name = request.param
        yield box


def _zygote_pid(box: LocalSandbox) -> int:
    return box._slots[0].proc.pid


def test_no_signal_through_files(any_pool, tmp_path):
    """F_SETOWN/F_SETOWN_EX/F_SETSIG + O_ASYNC and FIOSETOWN/SIOCSPGRP are refused in every profile: no
    SIGUSR1 reaches a root process on the host or the pool's owner, no SIGKILL reaches the zygote."""
    marker = tmp_path / "hit"
    canary = subprocess.Popen([sys.executable, "-c", "import signal, sys, time\n"
                               f"signal.signal(signal.SIGUSR1, lambda *a: open({str(marker)!r}, 'w').write('hit'))\n"
                               "print('ready', flush=True)\ntime.sleep(30)"], stdout=subprocess.PIPE, text=True)
    got = []
    previous = signal.signal(signal.SIGUSR1, lambda *a: got.append(a[0]))
    try:
        assert canary.stdout.readline() == "ready\n"
        zygote = _zygote_pid(any_pool)
        r = any_pool.run_one(Program(hostile_more.signal_program(canary.pid, os.getpid())))
        time.sleep(0.3)
        assert r.status == "ok", (r.status, r.error, r.stderr[-300:])
        lines = [line.split() for line in r.stdout.splitlines() if line != "done"]
        assert len(lines) == 12 and all(state.startswith("refused") for *_, state in lines), r.stdout
        assert got == [] and not marker.exists() and canary.poll() is None
        assert _zygote_pid(any_pool) == zygote  # the zygote was not killed
        assert any_pool.metrics()["zygote_deaths"] == 0
    finally:
        signal.signal(signal.SIGUSR1, previous)
        canary.kill()
        canary.wait()


def test_programs_never_run_as_root(any_pool):
    r = any_pool.run_one(Program("import os\nprint(os.geteuid(), os.getegid())"))
    assert r.status == "ok" and r.stdout.split()[0] != "0", r.stdout


def test_landlock_scope_in_every_profile(any_pool):
    """The Landlock ABI is not capped below the kernel's: signal scoping holds in ``default`` too."""
    if FOUND.landlock_abi >= 6:
        assert "landlock-scope" in any_pool.layers


@pytest.mark.parametrize("name", ["deep_tree", "closed_tree"])
def test_uncleanable_trees_are_cleaned(any_pool, name):
    """A 1,500-deep tree (paths past PATH_MAX) or closed folders: the run is the program's (never a
    sandbox error), the same slot serves the next programs, and nothing stays in the scratch root."""
    r = any_pool.run_one(Program(getattr(hostile_more, name.upper())))
    assert r.status in ("ok", "output_limit"), (r.status, r.error, r.stderr[-300:])
    for _ in range(3):
        again = any_pool.run_one(Program("print(6 * 7)"))
        assert (again.status, again.stdout) == ("ok", "42\n"), (again.status, again.error)
    assert any_pool.scratch_entries() == []
    slot_dir = os.path.join(any_pool._base, "slot0")
    if "tmpfs-scratch" not in any_pool.layers:  # on the host disk: only the waiting child's empty folder
        assert all(os.listdir(os.path.join(slot_dir, e)) == [] for e in os.listdir(slot_dir))


@pytest.mark.parametrize("name", ["disk_fill", "inode_fill"])
def test_disk_and_inodes_are_bounded(any_pool, name):
    """Writing files without end stops at the scratch quota (a capped tmpfs, or the checked quota where
    there is none), well before the wall clock."""
    patient = FAST.with_(cpu_seconds=20.0, wall_seconds=30.0)  # the quota must stop it, not the clock
    r = any_pool.run_one(Program(getattr(hostile_more, name.upper()), limits=patient))
    assert r.status in ("output_limit", "runtime_error"), (r.status, r.error, r.stderr[-300:])
    assert r.wall < patient.wall_seconds
    assert any_pool.scratch_entries() == []


def test_remove_tree_deep_closed_and_long(tmp_path):
    top = tmp_path / "t"
    top.mkdir()
    fd = os.open(top, os.O_RDONLY)
    for _ in range(1500):  # by fds: the path is far past PATH_MAX
        os.mkdir("x" * 200, dir_fd=fd)
        nxt = os.open("x" * 200, os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = nxt
    os.close(os.open("f", os.O_CREAT | os.O_WRONLY, dir_fd=fd))
    os.close(fd)
    (top / "closed").mkdir()
    (top / "closed" / "inner").mkdir()
    os.chmod(top / "closed" / "inner", 0)
    os.chmod(top / "closed", 0)
    assert cleanup.remove_tree(str(top)) is True
    assert not top.exists()
    assert cleanup.remove_tree(str(top)) is True  # already gone


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_stale_folder_deep_tree_and_two_pools_at_once():
    """A dead pool's folder holding a 1,500-deep tree does not stop the next pools, even two at once."""
    stale = tempfile.mkdtemp(prefix=f"{pool_module.BASE_PREFIX}{_dead_pid()}-")
    fd = os.open(stale, os.O_RDONLY)
    for _ in range(1500):
        os.mkdir("d" * 50, dir_fd=fd)
        nxt = os.open("d" * 50, os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = nxt
    os.close(fd)
    errors, pools = [], []

    def start():
        try:
            pools.append(LocalSandbox(slots=1, limits=FAST))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=start) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for p in pools:
        p.close()
    assert errors == [] and len(pools) == 2
    assert not os.path.exists(stale)


def test_memfds_closed_when_one_cannot_be_made(monkeypatch, any_pool):
    real = os.memfd_create
    calls = []

    def flaky(name, flags=0):
        calls.append(name)
        if len(calls) == 3:
            raise OSError(24, "Too many open files")
        return real(name, flags)

    before = len(os.listdir("/proc/self/fd"))
    monkeypatch.setattr(pool_module.os, "memfd_create", flaky)
    with pytest.raises(OSError):
        pool_module._program_fds(Program("print(1)"))
    assert len(os.listdir("/proc/self/fd")) == before


def test_zygote_handshake_has_a_timeout(monkeypatch):
    monkeypatch.setattr(pool_module, "START_TIMEOUT", 1.0)
    monkeypatch.setattr(pool_module, "BOOT", "import time; time.sleep(20)")
    out = {}

    def start():
        try:
            LocalSandbox(slots=1, limits=FAST).close()
        except BaseException as exc:  # noqa: BLE001 - checked below
            out["exc"] = exc

    t = threading.Thread(target=start, daemon=True)
    t.start()
    t.join(15)
    assert not t.is_alive(), "a zygote that never says hello hangs the pool's start"
    assert isinstance(out.get("exc"), probe.SandboxStartError) and "hello" in str(out["exc"])


def test_explicit_profile_is_never_downgraded(monkeypatch):
    lacking = probe.Probe(tuple(layer for layer in FOUND.layers if layer not in ("uid", "bwrap", "pidns")), 7)
    monkeypatch.setattr(probe, "probe", lambda: lacking)
    with pytest.raises(probe.UnsafeSandboxError, match="'hardened' needs uid"):
        LocalSandbox(slots=1, profile="hardened")
    from grpo_rewards import reward

    with pytest.raises(probe.UnsafeSandboxError, match="'hardened' needs"):
        reward("code_execution", profile="hardened")


@pytest.mark.skipif("uid" not in FOUND.layers, reason="needs root (a slot uid that cannot read a closed home)")
def test_self_test_at_start_names_what_fails():
    """Layers are tried for real at start, in a throwaway child: a program uid that cannot read the
    interpreter (no mount namespace to expose it) is one clear error at start, not an error per program."""
    if all(os.access(p, os.R_OK) for p in probe.python_read_only_paths()) and not _closed_interpreter():
        pytest.skip("the interpreter is readable by every uid here")
    with pytest.raises(probe.SandboxStartError, match="(?s)self-test failed.*PermissionError"):
        LocalSandbox(slots=1, limits=FAST, disable=("uid", "mountns", "bwrap", "pidns"))


def _closed_interpreter() -> bool:
    from grpo_rewards.sandbox.jail.mounts import closed_ancestor

    return any(closed_ancestor(p) for p in probe.python_read_only_paths())


@pytest.mark.skipif("bwrap" not in FOUND.layers, reason="bubblewrap is not installed")
def test_bwrap_found_through_path_is_run_by_absolute_path(tmp_path, monkeypatch):
    """bwrap outside /bin:/usr/bin (found through PATH) still runs: the zygote's environment is empty."""
    marker = tmp_path / "used"
    wrapper = tmp_path / "bin" / "bwrap"
    wrapper.parent.mkdir()
    wrapper.write_text(f"#!/bin/sh\necho used > {marker}\nexec {FOUND.bwrap} \"$@\"\n")
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper.parent}:{os.environ['PATH']}")
    assert probe.probe().bwrap == str(wrapper)
    with LocalSandbox(slots=1, limits=FAST, profile="strict") as box:
        assert "bwrap" in box.layers
        assert box.run_one(Program("print(1)")).stdout == "1\n"
    assert marker.exists()


@pytest.mark.skipif("bwrap" not in FOUND.layers, reason="bubblewrap is not installed")
def test_strict_without_its_bwrap_is_a_clear_error(monkeypatch):
    gone = probe.Probe(FOUND.layers, FOUND.landlock_abi, (), "/nonexistent/bwrap")
    monkeypatch.setattr(probe, "probe", lambda: gone)
    with pytest.raises(probe.SandboxStartError, match="bubblewrap is gone from /nonexistent/bwrap"):
        LocalSandbox(slots=1, limits=FAST, profile="strict")


def test_judge_survives_crafted_reports():
    """Reports built to crash the judge (5,000-digit integers, 50,000 nested brackets) score 0; the rest
    of the batch is scored as usual."""
    from grpo_rewards import reward

    r = reward("code_execution", cpu_seconds=2.0, wall_seconds=4.0)
    tests = json.dumps({"fn_name": "add", "inputs": [[1, 2]], "outputs": [3]})
    completions = [f"```python\n{code}\n```" for code in hostile_more.JUDGE_CRASHERS.values()]
    completions.append("```python\ndef add(a, b):\n    return a + b\n```")
    scores = r(completions, verification_info=[tests] * len(completions))
    assert scores == [0.0] * len(hostile_more.JUDGE_CRASHERS) + [1.0], r.last_details


needs_cpp = pytest.mark.skipif(not pool_module.compilers().keys() >= {"c", "cpp"}, reason="gcc/g++ not installed")


@needs_cpp
def test_c_attacks_are_contained(any_pool, tmp_path):
    """Fork bomb, raw syscalls, signals, file system and network, in C: every attempt fails, nothing
    outside is touched, the zygote survives."""
    victim = tmp_path / "victim"
    victim.write_text("intact")
    victim.chmod(0o666)
    tmp_path.chmod(0o777)
    marker = f"/tmp/grpo-c-pwned-{os.getpid()}"
    canary = subprocess.Popen(["sleep", "30"])
    try:
        zygote = _zygote_pid(any_pool)
        table = hostile_more.c_programs(canary.pid, marker, str(victim))
        results = dict(zip(table, any_pool.run([Program(code, "", "c") for code in table.values()]), strict=True))
        for name, r in results.items():
            assert r.status in ("ok", "runtime_error"), (name, r.status, r.error, r.stderr[-500:])
            attempts = [line.split() for line in r.stdout.splitlines()]
            assert attempts, (name, r.stdout, r.stderr[-300:])
            for what, ret in attempts:
                # kill(-1) returns 0 when every target refused it (EPERM is not reported): the canary and the
                # zygote surviving is its check; an execveat of /bin/sh runs the shell under the same layers
                assert ret == "-1" or what in ("kill_all", "execveat_sh"), (name, what, ret)
        assert sum(1 for line in results["c_fork_bomb"].stdout.splitlines() if line == "fork -1") == 8
        assert canary.poll() is None and victim.read_text() == "intact" and not os.path.exists(marker)
        assert _zygote_pid(any_pool) == zygote
    finally:
        canary.kill()
        canary.wait()
        if os.path.exists(marker):
            os.remove(marker)


@needs_cpp
def test_c_and_cpp_run_and_fail_as_programs(any_pool):
    cpp = "#include <bits/stdc++.h>\nint main(){long long a,b;std::cin>>a>>b;std::cout<<a+b<<'\\n';}"
    heavy = FAST.with_(cpu_seconds=20.0, wall_seconds=60.0)  # compiling runs under the program's own limits
    runs = any_pool.run([Program(cpp, "1 2\n", "cpp", heavy), Program(cpp, "40 2\n", "cpp", heavy),
                         Program("int main(void){ return *(volatile int *)0; }", "", "c"),
                         Program("int main( {", "", "cpp"),
                         Program("#include <vector>\nint main(){std::vector<char> v(1ull << 40);}", "", "cpp"),
                         Program("int main(void){ for(;;); }", "", "c")])
    assert [(r.status, r.stdout) for r in runs[:2]] == [("ok", "3\n"), ("ok", "42\n")]
    assert runs[0].extra["compile_wall"] > 0
    assert runs[2].status == "runtime_error" and runs[2].signal == signal.SIGSEGV
    assert runs[3].status == "compile_error" and "error" in runs[3].stderr
    assert runs[4].status == "memory"
    assert runs[5].status == "timeout"


# Run a pool in a process whose own seccomp filter makes one syscall fail (as an old kernel or a strict
# container would): the zygotes inherit it, the self-test meets it, and the pool refuses to start.
REFUSING_HOST = r"""
import ctypes, errno, struct, sys
from grpo_rewards.sandbox.jail.seccomp import Filter, _ins, _ret, LD_W_ABS, JEQ_K, OFF_NR, RET_ALLOW, RET_ERRNO
from grpo_rewards.sandbox.jail.linux import PR_SET_NO_NEW_PRIVS, prctl, libc, check
nr, err = int(sys.argv[1]), int(sys.argv[2])
code = b"".join([_ins(LD_W_ABS, OFF_NR), _ins(JEQ_K, nr, 0, 1), _ret(RET_ERRNO | err), _ret(RET_ALLOW)])
f = Filter()
f._buf = ctypes.create_string_buffer(code, len(code))
f._prog.len, f._prog.filter = len(code) // 8, ctypes.addressof(f._buf)
f.install()
from grpo_rewards.sandbox.pool import LocalSandbox
from grpo_rewards.sandbox.program import Limits
try:
    LocalSandbox(slots=1, limits=Limits(cpu_seconds=1, wall_seconds=2), profile="auto").close()
    print("STARTED")
except Exception as exc:
    print("REFUSED", type(exc).__name__, exc)
"""


@pytest.mark.parametrize("syscall,err,why", [(317, 1, "seccomp"), (434, 38, "pidfd_open|Function not implemented")])
def test_a_layer_the_kernel_refuses_is_an_error_at_start(syscall, err, why):
    """seccomp refused (a container) or no pidfd_open (Linux < 5.3): one clear error when the pool starts."""
    out = subprocess.run([sys.executable, "-c", REFUSING_HOST, str(syscall), str(err)], capture_output=True,
                         text=True, timeout=120)
    assert out.stdout.startswith("REFUSED SandboxStartError"), (out.stdout, out.stderr[-2000:])
    assert "self-test failed" in out.stdout and __import__("re").search(why, out.stdout), out.stdout


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to an unprivileged uid")
def test_remove_tree_as_the_owner_not_root():
    """Unprivileged, as a non-root pool runs: closed folders (mode 000) at every level, and names left by
    an earlier failed attempt, still go (root would pass every permission check and hide this)."""
    from pathlib import Path

    base = Path(tempfile.mkdtemp(prefix="grpo-rm-"))  # pytest's tmp_path sits in a folder closed to others
    top = base / "t"
    for i in range(5):
        (top / f"a{i}" / "b" / "c").mkdir(parents=True)
        (top / f"a{i}" / "b" / "c" / "f").write_text("x")
    (top / f".grpo-up-{os.getpid()}-0" / "x").mkdir(parents=True)  # in the way of a move
    for path in sorted(top.rglob("*"), key=lambda p: -len(p.parts)):
        os.chown(path, 65533, 65533, follow_symlinks=False)
    os.chown(top, 65533, 65533)
    os.chmod(base, 0o777)
    for i in range(5):
        for sub in (f"a{i}/b/c", f"a{i}/b", f"a{i}"):
            os.chmod(top / sub, 0)
    pid = os.fork()
    if pid == 0:
        try:
            os.setresgid(65533, 65533, 65533)
            os.setresuid(65533, 65533, 65533)
            os._exit(0 if cleanup.remove_tree(str(top)) else 1)
        finally:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    try:
        assert os.waitstatus_to_exitcode(status) == 0
        assert not top.exists()
    finally:
        cleanup.remove_tree(str(base))


# ------------------------------------------- file metadata, other processes, memory outside the limit ----


@pytest.fixture
def host_files():
    """A world-writable host file carrying a user extended attribute and an old time, in a sticky
    world-writable folder with an old time: what a program must not read or change through metadata."""
    folder = tempfile.mkdtemp(prefix="grpo-meta-")
    os.chmod(folder, 0o1777)
    victim = os.path.join(folder, "victim")
    with open(victim, "w") as fh:
        fh.write("intact")
    os.chmod(victim, 0o666)
    os.setxattr(victim, "user.grpo", b"host-secret")
    for path in (victim, folder):
        os.utime(path, (1_000_000_000, 1_000_000_000))
    yield victim, folder
    subprocess.run(["rm", "-rf", folder], check=False)


def _untouched(victim: str, folder: str) -> None:
    assert os.listxattr(victim) == ["user.grpo"] and os.getxattr(victim, "user.grpo") == b"host-secret"
    assert os.stat(victim).st_mtime == 1_000_000_000 and os.stat(folder).st_mtime == 1_000_000_000
    assert os.stat(victim).st_mode & 0o777 == 0o666
    with open(victim) as fh:
        assert fh.read() == "intact"


def test_host_file_metadata_is_refused(any_pool, host_files):
    """Extended attributes (read, list, write, remove), times, ownership, mode, inotify and fanotify on host
    files: refused in every profile (times: a no-op), and nothing changes on the host; the same calls on the
    program's own scratch files keep working (shutil.copy2 sets times and copies attributes)."""
    victim, folder = host_files
    r = any_pool.run_one(Program(hostile_more.metadata_program(victim, folder)))
    assert r.status == "ok", (r.status, r.error, r.stderr[-500:])
    got = {line.split()[0]: line.split()[1] for line in r.stdout.splitlines() if line.strip()}
    for name in hostile_more.METADATA_REFUSED:
        assert got[name].startswith("refused"), (name, got[name], r.stdout)
    assert "host-secret" not in r.stdout
    assert "scratch" in got and "'copy'" in r.stdout, r.stdout
    _untouched(victim, folder)


def test_other_processes_cannot_be_rescheduled(any_pool):
    """Renicing, SCHED_IDLE, CPU pinning, I/O priority and limits of other processes (the pool's owner, the
    zygote, a whole user) are refused in every profile; the same calls on the program itself work."""
    owner = os.getpid()
    before = (os.getpriority(os.PRIO_PROCESS, owner), os.sched_getaffinity(owner), os.sched_getscheduler(owner))
    r = any_pool.run_one(Program(hostile_more.shared_uid_program({"owner": owner})))
    assert r.status == "ok", (r.status, r.error, r.stderr[-500:])
    got = hostile_more.shared_uid_results(r.stdout)
    others = {k: v for k, v in got.items() if ":" in k and not k.startswith("self:")}
    assert len(others) == 25 and all(v.startswith("refused") for v in others.values()), others
    mine = {k: v for k, v in got.items() if k.startswith("self:")}
    assert len(mine) == 11 and all(v == "done" for v in mine.values()), mine
    assert (os.getpriority(os.PRIO_PROCESS, owner), os.sched_getaffinity(owner),
            os.sched_getscheduler(owner)) == before
    assert got["fallocate_keep_size"].startswith("refused") and got["fallocate_punch_hole"].startswith("refused")
    assert got["fallocate"].startswith("refused")  # posix_fallocate falls back to writing
    assert int(got["reserved"]) <= 1 << 17
    assert int(got["threads"]) <= FAST.processes, got["threads"]


HOARD_LIMITS = FAST.with_(memory_mb=256, cpu_seconds=5.0, wall_seconds=10.0)


@pytest.mark.parametrize("name", ["MEMFD_HOARD", "SHM_HOARD"])
def test_memory_held_outside_mappings_is_bounded(any_pool, name):
    """384 MB held in memfds (or /dev/shm files) under a 256 MB limit: killed by the slot's memory cgroup
    (``memory``) or refused (no memfd_create without one; /dev/shm is outside Landlock's rules)."""
    r = any_pool.run_one(Program(getattr(hostile_more, name), limits=HOARD_LIMITS))
    assert "held" not in r.stdout, (r.status, r.stdout)
    if name == "MEMFD_HOARD" and "cgroup" in any_pool.layers:
        assert r.status == "memory", (r.status, r.error, r.stderr[-300:])
    else:
        assert r.status == "runtime_error" and ("PermissionError" in r.stderr), (r.status, r.stderr[-300:])
    again = any_pool.run_one(Program("print(6 * 7)"))
    assert (again.status, again.stdout) == ("ok", "42\n")


@needs_cpp
def test_c_memfd_hoard_is_bounded(any_pool):
    r = any_pool.run_one(Program(hostile_more.C_MEMFD_HOARD, "", "c", HOARD_LIMITS))
    assert "held" not in r.stdout, (r.status, r.stdout)
    if "cgroup" in any_pool.layers:
        assert r.status == "memory", (r.status, r.error)
    else:
        assert r.status == "ok" and r.stdout.startswith("refused 0"), (r.status, r.stdout)


@needs_cpp
def test_c_metadata_and_scheduling_attacks_are_refused(any_pool, host_files):
    """The metadata, scheduling and fallocate attacks in C: every attempt fails, nothing on the host changes."""
    victim, folder = host_files
    owner = os.getpid()
    before = (os.getpriority(os.PRIO_PROCESS, owner), os.sched_getaffinity(owner), os.sched_getscheduler(owner))
    table = hostile_more.c_metadata_programs(owner, victim)
    results = dict(zip(table, any_pool.run([Program(code, "", "c") for code in table.values()]), strict=True))
    for name, r in results.items():
        assert r.status == "ok", (name, r.status, r.error, r.stderr[-500:])
        attempts = [line.split() for line in r.stdout.splitlines()]
        assert len(attempts) >= 11, (name, r.stdout)
        assert all(ret == "-1" for _, ret in attempts), (name, r.stdout)
    _untouched(victim, folder)
    assert (os.getpriority(os.PRIO_PROCESS, owner), os.sched_getaffinity(owner),
            os.sched_getscheduler(owner)) == before


def _cgroups_here() -> bool:
    from grpo_rewards.sandbox.jail import cgroups

    made = cgroups.PoolCgroups(1, owner=_dead_pid())
    try:
        return bool(made.version)
    finally:
        made.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="cgroups need root (or a delegated tree)")
def test_slot_cgroups_carry_the_limits_and_stale_ones_go():
    """Each slot's memory cgroup carries the run's memory limit (no swap) and its pids cgroup the task limit (plus the zygote);
    a dead pool's cgroup folders are removed when the next pool starts."""
    from grpo_rewards.sandbox.jail import cgroups

    if not _cgroups_here():
        pytest.skip("no writable memory and pids cgroups here")
    stale = cgroups.PoolCgroups(2, owner=_dead_pid())  # as a pool killed before close() leaves them
    left = [path for folders in stale.slots for path in folders.values()] + list(stale.bases)
    assert left and all(os.path.isdir(p) for p in left)
    with LocalSandbox(slots=1, limits=FAST) as box:
        assert "cgroup" in box.layers
        assert not any(os.path.isdir(p) for p in left)
        r = box.run_one(Program("print(1)", limits=FAST.with_(memory_mb=300, processes=20)))
        assert r.status == "ok"
        folders = box._cgroups.slots[0]
        files = ({"memory": "memory.limit_in_bytes", "pids": "pids.max"} if box._cgroups.version == 1
                 else {"memory": "memory.max", "pids": "pids.max"})
        with open(os.path.join(folders["memory"], files["memory"])) as fh:
            assert int(fh.read()) == 300 << 20
        with open(os.path.join(folders["pids"], files["pids"])) as fh:
            assert int(fh.read()) == 22  # the zygote and the template every child is forked from count too
        mine = list(folders.values())
    assert not any(os.path.isdir(p) for p in mine)  # removed at close
