"""Soak: 1,000 runs at twice the core count in parallel leave no zombie, no slot process, no scratch folder."""

from __future__ import annotations

import os
import tempfile
import time

from grpo_rewards.sandbox.pool import LocalSandbox
from grpo_rewards.sandbox.program import Limits, Program

from .conftest import needs_default, processes_of, zombies_under, zygote_pids

pytestmark = needs_default

MIX = [
    (Program("print(sum(range(100)))"), "ok"),
    (Program("print(input()[::-1])", stdin="abc\n"), "ok"),
    (Program("raise RuntimeError('x')"), "runtime_error"),
    (Program("import os\nos.fork()"), "runtime_error"),
    (Program("x = bytearray(2 << 30)"), "memory"),
    (Program("import sys\nsys.stdout.write('y' * (3 << 20))"), "output_limit"),
]


def test_soak_leaves_nothing_behind():
    cores = os.cpu_count() or 1
    limits = Limits(cpu_seconds=2, wall_seconds=5, memory_mb=512, output_bytes=1 << 20)
    with LocalSandbox(slots=2 * cores, limits=limits) as pool:
        programs, expected = [], []
        for i in range(1000):
            program, status = MIX[0] if i % 10 else MIX[(i // 10) % len(MIX)]
            programs.append(program)
            expected.append(status)
        t0 = time.perf_counter()
        results = pool.run(programs)
        elapsed = time.perf_counter() - t0
        assert [r.status for r in results] == expected
        zygotes = zygote_pids(pool)
        assert len(zygotes) == 2 * cores  # none died and was restarted
        # below the zygotes only: this process's own zombies may come from other libraries (a multiprocessing
        # worker another test started); a zygote that died shows in the count above
        assert zombies_under(zygotes) == []
        assert processes_of(pool.slot_uids) == []
        assert pool.scratch_entries() == []
        assert pool.metrics()["runs"] == 1000
        base = pool._base
        uids = pool.slot_uids
    assert not os.path.exists(base)
    assert processes_of(uids) == []
    print(f"1000 runs in {elapsed:.2f}s ({1000 / elapsed:.0f}/s)")


KILLED_TRAINER = """
import sys
from grpo_rewards.sandbox.pool import LocalSandbox
from grpo_rewards.sandbox.program import Limits, Program
box = LocalSandbox(slots=2, limits=Limits(cpu_seconds=60, wall_seconds=60), disable=tuple(sys.argv[1:]))
print(",".join(map(str, box.slot_uids)), flush=True)
box.run([Program("import time\\ntime.sleep(60)")] * 2)
"""


def _jail_processes() -> list[int]:
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/cmdline", "rb") as fh:
                    if b"_grpo_jail" in fh.read():
                        out.append(int(name))
            except OSError:
                continue
    return out


def _descendants(root: int) -> set[int]:
    """The processes below ``root`` now (from each process's parent in /proc)."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as fh:
                    parent = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(parent, []).append(int(name))
    found, todo = set(), [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def test_a_killed_trainer_leaves_nothing(tmp_path):
    """SIGKILL the process that owns a pool mid-run: zygotes and their programs go within a few seconds."""
    import signal
    import subprocess
    import sys

    from .conftest import FOUND

    if "uid" not in FOUND.layers:
        import pytest

        pytest.skip("needs slot uids (root) to find the programs by uid")
    limits_small = Limits(cpu_seconds=1, wall_seconds=2)
    for disable in ([], ["bwrap"]):
        proc = subprocess.Popen([sys.executable, "-c", KILLED_TRAINER, *disable], stdout=subprocess.PIPE, text=True)
        uids = [int(u) for u in proc.stdout.readline().split(",")]
        deadline = time.monotonic() + 10
        while len(processes_of(uids)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(processes_of(uids)) == 2  # both programs are running
        # this pool's zygotes (other tests' pools may run beside this one: only its own are watched)
        owned = set(_jail_processes()) & _descendants(proc.pid)
        assert owned, "no zygote found below the pool's process"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 10
        while (processes_of(uids) or owned & set(_jail_processes())) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert processes_of(uids) == [], disable
        assert owned & set(_jail_processes()) == set(), disable
        stale = [d for d in os.listdir(tempfile.gettempdir()) if d.startswith(f"grpo-sandbox-{proc.pid}-")]
        assert len(stale) == 1  # the killed pool could not clean up ...
        LocalSandbox(slots=1, limits=limits_small).close()
        assert not os.path.exists(os.path.join(tempfile.gettempdir(), stale[0]))  # ... the next pool does


def test_a_dead_zygote_is_the_programs_failure_then_replaced():
    """Kill a zygote mid-run: a program could have caused that, so the run is its failure (a runtime
    error, never None), counted as a zygote death, and the slot comes back."""
    import signal
    import threading

    with LocalSandbox(slots=1, limits=Limits(cpu_seconds=5, wall_seconds=10)) as pool:
        victim = pool._slots[0].proc.pid
        out = {}
        t = threading.Thread(target=lambda: out.setdefault("r", pool.run_one(Program("import time\ntime.sleep(5)"))))
        t.start()
        time.sleep(0.5)
        os.kill(victim, signal.SIGKILL)
        t.join(timeout=20)
        assert out["r"].status == "runtime_error" and "sandbox process" in out["r"].error
        again = pool.run_one(Program("print('back')"))
        assert (again.status, again.stdout) == ("ok", "back\n")
        assert pool._slots[0].proc.pid != victim
        assert pool.metrics()["sandbox_error_rate"] == 0.0 and pool.metrics()["zygote_deaths"] == 1
        if pool.slot_uids:
            deadline = time.monotonic() + 5
            while processes_of(pool.slot_uids) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert processes_of(pool.slot_uids) == []  # the orphaned sleeper died with its zygote
