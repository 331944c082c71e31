"""Soak: 1,000 runs at twice the core count in parallel leave no zombie, no slot process, no scratch folder."""

from __future__ import annotations

import os
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
        assert zombies_under(zygotes | {os.getpid()}) == []
        assert processes_of(pool.slot_uids) == []
        assert pool.scratch_entries() == []
        assert pool.metrics()["runs"] == 1000
        base = pool._base
        uids = pool.slot_uids
    assert not os.path.exists(base)
    assert processes_of(uids) == []
    print(f"1000 runs in {elapsed:.2f}s ({1000 / elapsed:.0f}/s)")
