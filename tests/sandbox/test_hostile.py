"""The hostile suite: every program tries to harm the machine; each must be contained.

Every bomb is bounded even if a layer failed (a fork bomb of at most 2**8 processes,
a memory bomb under RLIMIT_AS, a disk fill under RLIMIT_FSIZE and a capped tmpfs),
so a regression cannot take the machine down. The programs run in one parallel
batch; each test then checks its own result and the machine's state.
"""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
import threading
import time
import uuid

import pytest

from grpo_rewards.sandbox.program import Program

from .conftest import FAST, FOUND, PROFILE_OPTIONS, needs_default, needs_root, processes_of

pytestmark = needs_default

SECRET = "GRPO_SANDBOX_TEST_SECRET"


class Targets:
    """Things outside the sandbox that hostile programs aim at."""

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="grpo-victim-")
        os.chmod(self.dir, 0o777)  # the file system's own permissions would let anyone in
        self.victim = os.path.join(self.dir, "victim.txt")
        with open(self.victim, "w") as fh:
            fh.write("intact")
        os.chmod(self.victim, 0o666)
        self.secret = os.path.join(self.dir, "secret.txt")
        with open(self.secret, "w") as fh:
            fh.write("top secret")
        os.chmod(self.secret, 0o644)
        self.marker = os.path.join(self.dir, "marker")
        self.tmp_marker = f"/tmp/grpo-pwned-{uuid.uuid4().hex}"
        self.tcp = socket.create_server(("127.0.0.1", 0))
        self.tcp.setblocking(False)
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.udp.setblocking(False)
        self.abstract_name = f"grpo-test-{uuid.uuid4().hex}"
        self.abstract = socket.socket(socket.AF_UNIX)
        self.abstract.bind("\0" + self.abstract_name)
        self.abstract.listen()
        self.abstract.setblocking(False)
        self.unix_path = os.path.join(self.dir, "listener.sock")
        self.unix = socket.socket(socket.AF_UNIX)
        self.unix.bind(self.unix_path)
        os.chmod(self.unix_path, 0o777)
        self.unix.listen()
        self.unix.setblocking(False)

    def nothing_connected(self) -> list[str]:
        got = []
        for name, sock in (("tcp", self.tcp), ("abstract", self.abstract), ("unix", self.unix)):
            try:
                sock.accept()
                got.append(name)
            except BlockingIOError:
                pass
        try:
            self.udp.recv(100)
            got.append("udp")
        except BlockingIOError:
            pass
        return got

    def close(self) -> None:
        for sock in (self.tcp, self.udp, self.abstract, self.unix):
            sock.close()
        import shutil

        shutil.rmtree(self.dir, ignore_errors=True)


def programs(t: Targets) -> dict[str, tuple[str, set[str]]]:
    """name -> (program, acceptable statuses)."""
    tcp_port = t.tcp.getsockname()[1]
    udp_port = t.udp.getsockname()[1]
    return {
        "cpu_spin": ("while True:\n    pass", {"timeout"}),
        "sleep_forever": ("import time\ntime.sleep(10**6)", {"timeout"}),
        "fork_bomb": ("import os\nfor _ in range(8):\n    os.fork()\nprint('forked')", {"runtime_error"}),
        "ctypes_fork_bomb": ("import ctypes\nlibc = ctypes.CDLL(None)\nprint([libc.fork() for _ in range(8)])", {"ok"}),
        "double_fork_daemon": ("import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
                               "        time.sleep(10**6)\nprint('parent done')", {"runtime_error"}),
        "memory_bomb": ("x = bytearray(8 << 30)", {"memory"}),
        # zero-filling 512 MB can outlast the 2 s wall limit on a loaded box: either way it is contained
        "memory_creep": ("chunks = []\nwhile True:\n    chunks.append(bytearray(32 << 20))", {"memory", "timeout"}),
        "write_outside": (f"open({t.dir + '/new.txt'!r}, 'w').write('x')", {"runtime_error"}),
        "overwrite_outside": (f"open({t.victim!r}, 'w').write('pwned')", {"runtime_error"}),
        "delete_outside": (f"import os\nos.remove({t.victim!r})", {"runtime_error"}),
        "write_tmp": (f"open({t.tmp_marker!r}, 'w').write('x')", {"runtime_error"}),
        "read_shadow": ("print(open('/etc/shadow').read())", {"runtime_error"}),
        "read_outside": (f"print(open({t.secret!r}).read())", {"runtime_error"}),
        "read_passwd": ("print(open('/etc/passwd').read())", {"runtime_error"}),
        "env_secret": (f"import os\nprint(os.environ.get({SECRET!r}))\nprint(sorted(os.environ))", {"ok"}),
        "parent_proc_environ": (f"print(open('/proc/{os.getpid()}/environ', 'rb').read())", {"runtime_error"}),
        "zygote_proc_environ": ("import os\nprint(open(f'/proc/{os.getppid()}/environ', 'rb').read())", {"runtime_error"}),
        "list_proc": ("import os\nprint(os.listdir('/proc'))", {"runtime_error"}),
        "tcp_loopback": (f"import socket\nsocket.create_connection(('127.0.0.1', {tcp_port}), timeout=1)", {"runtime_error"}),
        "udp_loopback": (f"import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
                         f"s.sendto(b'x', ('127.0.0.1', {udp_port}))", {"runtime_error"}),
        "abstract_unix": (f"import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect('\\0{t.abstract_name}')",
                          {"runtime_error"}),
        "pathname_unix": (f"import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect({t.unix_path!r})",
                          {"runtime_error"}),
        "unix_dgram_sendto": (f"import socket\ns = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n"
                              f"s.sendto(b'x', {t.unix_path!r})", {"runtime_error"}),
        "subprocess": (f"import subprocess\nsubprocess.run(['touch', {t.marker!r}])", {"runtime_error"}),
        "os_system": (f"import os\nprint(os.system('touch {t.marker}'))", {"ok"}),
        "exec": ("import os\nos.execv('/bin/sh', ['sh', '-c', 'id'])", {"runtime_error"}),
        "stdout_flood": ("import sys\nblock = 'x' * (1 << 20)\nfor _ in range(512):\n    sys.stdout.write(block)",
                         {"output_limit"}),
        "stderr_flood": ("import os\nblock = b'x' * (1 << 20)\nfor _ in range(512):\n    os.write(2, block)",
                         {"output_limit"}),
        "signal_games": ("import signal\nfor s in (signal.SIGXCPU, signal.SIGTERM, signal.SIGINT, signal.SIGHUP):\n"
                         "    signal.signal(s, signal.SIG_IGN)\nwhile True:\n    pass", {"timeout"}),
        "kill_zygote": ("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)", {"runtime_error"}),
        "kill_init": ("import os, signal\nos.kill(1, signal.SIGKILL)", {"runtime_error"}),
        "thread_outlives": ("import threading, time\nthreading.Thread(target=time.sleep, args=(10**6,)).start()\n"
                            "print('main done')", {"timeout"}),
        "daemon_thread_spin": ("import threading, time\ndef spin():\n    while True:\n        pass\n"
                               "threading.Thread(target=spin, daemon=True).start()\ntime.sleep(10**6)", {"timeout"}),
        "ctypes_syscalls": (CTYPES_SYSCALLS, {"ok"}),
        "raise_rlimit": ("import resource\nresource.setrlimit(resource.RLIMIT_AS, (-1, -1))", {"runtime_error"}),
        "lower_then_raise_rlimit": ("import resource\nsoft, hard = resource.getrlimit(resource.RLIMIT_CPU)\n"
                                    "resource.setrlimit(resource.RLIMIT_CPU, (soft, hard + 100))", {"runtime_error"}),
        "setuid_root": ("import os\nos.setuid(0)", {"runtime_error"}),
        "fill_disk_one_file": ("f = open('big', 'wb')\nwhile True:\n    f.write(b'x' * (1 << 20))", {"runtime_error"}),
        # a full tmpfs (ENOSPC), or the scratch quota where there is no tmpfs (default)
        "fill_disk_many_files": ("i = 0\nwhile True:\n    open(f'f{i}', 'wb').write(b'x' * (7 << 20))\n    i += 1",
                                 {"runtime_error", "output_limit"}),
        "fill_fds": ("fds = []\nwhile True:\n    fds.append(open('/dev/null'))", {"runtime_error"}),
        "symlink_escape": ("import os\nos.symlink('/etc/hostname', 'link')\nprint(open('link').read())", {"runtime_error"}),
        "climb_out_of_scratch": ("import os\nprint(os.listdir('..'))", {"runtime_error"}),
        "raw_device": ("print(open('/dev/mem', 'rb').read(10))", {"runtime_error"}),
        "write_dev_null_ok": ("open('/dev/null', 'w').write('fine')\nprint('ok')", {"ok"}),
        "sysv_shm_stash": ("import ctypes\nlibc = ctypes.CDLL(None)\nshm = libc.shmget(0x5EED, 4096, 0o1666)\n"
                           "assert shm >= 0, 'shmget refused'", {"runtime_error"}),
        "sysv_msg_stash": ("import ctypes\nlibc = ctypes.CDLL(None)\nassert libc.msgget(0x5EED, 0o1666) >= 0",
                           {"runtime_error"}),
    }


# each call prints "<name> <return> <errno>"; every one must fail
CTYPES_SYSCALLS = r"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
calls = {
    "fork": (57,), "vfork": (58,), "clone_process": (56, 17, 0, 0, 0, 0), "clone3": (435, 0, 0),
    "ptrace_attach_parent": (101, 16, os.getppid(), 0, 0), "process_vm_readv": (310, os.getppid(), 0, 0, 0, 0, 0),
    "unshare_user": (272, 0x10000000), "setns": (308, 0, 0), "mount": (165, 0, 0, 0, 0, 0), "chroot": (161, 0),
    "bpf": (321, 0, 0, 0), "io_uring_setup": (425, 8, 0), "shmget": (29, 0x5EED, 4096, 0o1666),
    "mq_open": (240, 0, 0o100, 0o600, 0), "userfaultfd": (323, 0), "perf_event_open": (298, 0, 0, 0, 0, 0),
    "socket_inet": (41, 2, 1, 0), "socket_inet6": (41, 10, 2, 0), "socket_netlink": (41, 16, 3, 0),
    "setrlimit": (160, 7, 0), "keyctl": (250, 0, 0), "init_module": (175, 0, 0, 0), "reboot": (169, 0, 0, 0, 0),
}
for name, args in calls.items():
    r = libc.syscall(*[ctypes.c_long(a) for a in args])
    print(name, r, ctypes.get_errno())
"""


# the whole suite runs under every profile this machine has: "default" (what a non-root user gets),
# "hardened" (root, what a CI box without bubblewrap gets) and "strict" (bubblewrap) where available
SUITE_PROFILES = list(PROFILE_OPTIONS) or ["auto"]


@pytest.fixture(scope="module", params=SUITE_PROFILES)
def hostile_pool(request):
    from grpo_rewards.sandbox.pool import LocalSandbox

    with LocalSandbox(slots=2, limits=FAST, **PROFILE_OPTIONS.get(request.param, {})) as pool:
        yield pool


@pytest.fixture(scope="module")
def hostile(hostile_pool):
    targets = Targets()
    table = programs(targets)
    names = list(table)
    t0 = time.monotonic()
    results = hostile_pool.run([Program(table[n][0]) for n in names])
    elapsed = time.monotonic() - t0
    yield targets, table, dict(zip(names, results, strict=True)), elapsed
    targets.close()
    for path in (targets.tmp_marker,):
        if os.path.exists(path):
            os.remove(path)


def _names() -> list[str]:
    t = Targets()
    try:
        return list(programs(t))
    finally:
        t.close()


@pytest.mark.parametrize("name", _names())
def test_contained(hostile, name):
    _, table, results, _ = hostile
    result = results[name]
    assert result.status in table[name][1], f"{name}: {result.status} {result.error} {result.stderr[-300:]}"
    assert result.status != "sandbox_error"
    assert len(result.stdout) <= FAST.output_bytes and len(result.stderr) <= FAST.output_bytes


def test_bounded_in_time(hostile):
    *_, elapsed = hostile
    # ~45 programs, a handful of which run to the 2 s wall limit, on 2 slots
    assert elapsed < 30, elapsed


def test_nothing_outside_was_touched(hostile):
    targets, _, results, _ = hostile
    with open(targets.victim) as fh:
        assert fh.read() == "intact"
    assert sorted(os.listdir(targets.dir)) == ["listener.sock", "secret.txt", "victim.txt"]
    assert not os.path.exists(targets.tmp_marker)
    assert targets.nothing_connected() == []
    assert "top secret" not in results["read_outside"].stdout


def test_no_secrets_inside(hostile):
    _, _, results, _ = hostile
    env = results["env_secret"].stdout
    assert env.startswith("None\n")
    assert "hunter2" not in env and SECRET not in env
    for name in ("parent_proc_environ", "zygote_proc_environ"):
        assert "hunter2" not in results[name].stdout


def test_forks_and_syscalls_denied(hostile):
    _, _, results, _ = hostile
    assert results["ctypes_fork_bomb"].stdout.strip() == str([-1] * 8)
    lines = results["ctypes_syscalls"].stdout.split("\n")
    calls = [line.split() for line in lines if line.strip()]
    assert len(calls) == 23
    for name, ret, _errno in calls:
        assert int(ret) == -1, f"{name} succeeded inside the sandbox"
    assert int(results["os_system"].stdout.strip()) != 0
    assert "forked" not in results["fork_bomb"].stdout


def test_floods_are_capped(hostile):
    _, _, results, _ = hostile
    for name in ("stdout_flood", "stderr_flood"):
        r = results[name]
        assert r.status == "output_limit"
        assert r.wall < 2.0  # stopped at the cap, not at the deadline


def test_deadline_holds_for_sleepers_and_threads(hostile):
    _, _, results, _ = hostile
    for name in ("sleep_forever", "thread_outlives"):  # these burn no CPU: only the wall clock stops them
        assert FAST.wall_seconds <= results[name].wall < FAST.wall_seconds + 5, name  # generous: a loaded box
    assert results["daemon_thread_spin"].wall < FAST.wall_seconds + 5  # CPU or wall limit, whichever first
    assert results["cpu_spin"].cpu < FAST.cpu_seconds + 2.5


@needs_root
def test_no_slot_process_left(hostile, hostile_pool):
    assert processes_of(hostile_pool.slot_uids) == []
    assert hostile_pool.scratch_entries() == []


def test_pool_still_serves_after_the_suite(hostile, hostile_pool):
    r = hostile_pool.run_one(Program("print(sum(range(10)))"))
    assert (r.status, r.stdout) == ("ok", "45\n")


@needs_root
def test_kill_all_reaches_only_its_own_slot(box):
    """kill(-1) inside one slot: the other slot's program and a root process outside survive."""
    canary = subprocess.Popen(["sleep", "30"])
    try:
        out = {}
        t = threading.Thread(target=lambda: out.setdefault("r", box.run_one(
            Program("import time\ntime.sleep(1.0)\nprint('alive')"))))
        t.start()
        time.sleep(0.3)
        killer = box.run_one(Program("import os, signal\nos.kill(-1, signal.SIGKILL)\nprint('sent')"))
        t.join()
        assert killer.status in ("ok", "runtime_error")
        assert (out["r"].status, out["r"].stdout) == ("ok", "alive\n")
        assert canary.poll() is None
    finally:
        canary.kill()
        canary.wait()


@needs_root
def test_double_fork_daemon_is_swept_without_seccomp():
    """With fork allowed (seccomp off), a double-forked daemon escapes the process group; the uid sweep kills it."""
    from grpo_rewards.sandbox.pool import LocalSandbox

    code = ("import os, time\nr, w = os.pipe()\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
            "        os.write(w, str(os.getpid()).encode())\n        time.sleep(10**6)\n    os._exit(0)\n"
            "os.close(w)\nprint(os.read(r, 32).decode())")
    with LocalSandbox(slots=1, limits=FAST, disable=("seccomp",), allow_unsafe=True) as pool:
        assert "seccomp" not in pool.layers
        r = pool.run_one(Program(code))
        assert r.status == "ok", r
        assert int(r.stdout) > 0  # the daemon ran (its pid, maybe in a pid namespace)
        assert processes_of(pool.slot_uids) == [], "the daemon outlived its run"
        bomb = pool.run_one(Program("import os\nfor _ in range(8):\n    os.fork()\nimport time\ntime.sleep(0.2)"))
        assert bomb.status in ("ok", "runtime_error")  # RLIMIT_NPROC bounds it at 64
        assert processes_of(pool.slot_uids) == []


def test_layers_reported(box):
    assert {"rlimits", "setsid", "landlock-fs", "seccomp"} <= set(box.layers)
    assert box.metrics()["layers"] == box.layers
    if "uid" in FOUND.layers:
        assert box.profile in ("hardened", "strict")


# Scans the memory this child inherited from its zygote for an earlier run's output and source
# (probing pages through a pipe, so unmapped ones give EFAULT instead of a crash). The zygote's
# own strings ("scratch_inodes", from its config) must be found: that proves the scan works.
SCAN = r'''
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.write.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
libc.sbrk.restype = ctypes.c_void_p
PAGE = 4096
r, w = os.pipe()
os.set_blocking(r, False)
def readable(addr):
    if libc.write(w, addr, 1) == 1:
        os.read(r, 16)
        return True
    return False
buf = bytearray(PAGE)
cbuf = (ctypes.c_char * PAGE).from_buffer(buf)
buf_addr = ctypes.addressof(cbuf)
needles = [bytes(reversed(x)) for x in (b"9e1c7-NEKOTTUO", b"2ba15-NEKOTEDOC", b"sedoni_hctarcs")]
skip = [(buf_addr, buf_addr + PAGE)] + [(id(n), id(n) + 64 + len(n)) for n in needles]
found = [False] * len(needles)
anchors = [id(object()), id(b"x" * 100000), libc.sbrk(0), id(int), id(os)]
seen = set()
for anchor in anchors:
    base = anchor - anchor % PAGE
    for step in (PAGE, -PAGE):
        misses, addr = 0, base
        while misses < 256 and abs(addr - base) < (256 << 20):
            if addr not in seen:
                seen.add(addr)
                if readable(addr):
                    misses = 0
                    ctypes.memmove(buf_addr, addr, PAGE)
                    for k, n in enumerate(needles):
                        i = buf.find(n)
                        while i >= 0:
                            if not any(lo <= addr + i < hi for lo, hi in skip):
                                found[k] = True
                            i = buf.find(n, i + 1)
                else:
                    misses += 1
            addr += step
print(found, len(seen))
'''


def test_no_earlier_run_data_in_inherited_memory():
    """The zygote never holds a program's code or output, so the next child cannot copy them."""
    from grpo_rewards.sandbox.pool import LocalSandbox

    with LocalSandbox(slots=1, limits=FAST) as pool:
        first = pool.run_one(Program("x = 'CODE' 'TOKEN-51ab2 in my source'\nprint('OUT' + 'TOKEN-7c1e9' * 3)"))
        assert first.status == "ok" and "OUTTOKEN-7c1e9" in first.stdout
        scan = pool.run_one(Program(SCAN))
    assert scan.status == "ok", scan.stderr[-500:]
    found = scan.stdout.split("]")[0] + "]"
    assert found == "[False, False, True]", scan.stdout
