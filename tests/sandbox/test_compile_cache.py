"""What outlives a program: binaries it leaves in the compile cache are the pool's (bounded by bytes), never
memory charged to its slot that a later, correct program pays for with a sandbox error; a compile runs
under the program's own limits (a template bomb costs what a test may cost); a slot whose cgroup cannot be
set restarts, with a fresh cgroup, and runs the program that came next. In every profile, through the pool,
the code reward and the command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from grpo_rewards import reward
from grpo_rewards.command_line import main
from grpo_rewards.sandbox.pool import LocalSandbox, compilers
from grpo_rewards.sandbox.program import Program

from .conftest import FAST, PROFILE_OPTIONS, needs_default
from .hostile_state import BIG, BIG_LIMITS, BOMB, BOMB_LIMITS

pytestmark = needs_default
needs_c = pytest.mark.skipif("c" not in compilers(), reason="gcc is not installed")
needs_cpp = pytest.mark.skipif("cpp" not in compilers(), reason="g++ is not installed")

@pytest.fixture(scope="module", params=list(PROFILE_OPTIONS))
def profile(request):
    return request.param


def _slot_usage(box: LocalSandbox) -> int | None:
    cgroups = box._cgroups
    if cgroups is None or not cgroups.version:
        return None
    folder = cgroups.slots[0]["memory"]
    name = "memory.usage_in_bytes" if cgroups.version == 1 else "memory.current"
    with open(os.path.join(folder, name)) as fh:
        return int(fh.read())


@needs_c
def test_cached_binaries_are_the_pools_and_bounded(profile):
    """Four 20 MB binaries in the cache: none of it is the slot's, a 64 MB program runs after them, and the
    cache holds at most its bound."""
    with LocalSandbox(slots=1, limits=FAST, compile_cache_mb=48, **PROFILE_OPTIONS[profile]) as box:
        for n in range(1, 5):
            r = box.run_one(Program(BIG.format(n=n), "", "c", BIG_LIMITS))
            assert (r.status, r.stdout) == ("ok", f"{n}\n"), (r.status, r.error)
        cached = box.metrics()["compile_cache_bytes"]
        assert 20 << 20 <= cached <= 48 << 20, cached
        usage = _slot_usage(box)
        assert usage is None or usage < 32 << 20, usage  # the binaries' pages are not the slot's
        after = box.run_one(Program("print(6 * 7)", limits=FAST.with_(memory_mb=64)))
        assert (after.status, after.stdout) == ("ok", "42\n"), (after.status, after.error)
        again = box.run_one(Program(BIG.format(n=4), "", "c", BIG_LIMITS))  # still cached: no compile
        assert again.status == "ok" and again.stdout == "4\n"
        assert box.metrics()["slot_restarts"] == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="moving a process into the slot's cgroup needs root")
def test_a_cgroup_that_cannot_be_set_restarts_the_slot(profile):
    """Memory pinned in the slot's cgroup by something else (here a process moved in, holding 100 MB): the
    next run's 64 MB limit cannot be set (cgroup v1 refuses a limit below the usage). The program that
    came next runs on a fresh slot and cgroup, and scores as itself, not as a sandbox error."""
    with LocalSandbox(slots=1, limits=FAST, **PROFILE_OPTIONS[profile]) as box:
        if "cgroup" not in box.layers:
            pytest.skip("no cgroup here")
        folder = box._cgroups.slots[0]["memory"]
        holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nsys.stdin.readline()\n"
                                   "x = bytearray(100 << 20)\nx[::4096] = b'y' * len(x[::4096])\n"
                                   "print('held', flush=True)\ntime.sleep(60)"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            with open(os.path.join(folder, "cgroup.procs"), "w") as fh:
                fh.write(str(holder.pid))
            holder.stdin.write("go\n")
            holder.stdin.flush()
            assert holder.stdout.readline() == "held\n"
            r = box.run_one(Program("print(6 * 7)", limits=FAST.with_(memory_mb=64)))
            assert (r.status, r.stdout) == ("ok", "42\n"), (r.status, r.error)
            if box._cgroups.version == 1:  # v2 reclaims or OOM-kills to meet a lower limit instead
                assert box.metrics()["slot_restarts"] == 1 and box._cgroups.slots[0]["memory"] != folder
        finally:
            holder.kill()
            holder.wait()
        assert box.run_one(Program("print(1)")).stdout == "1\n"


@needs_cpp
def test_a_template_bomb_compiles_under_the_programs_limits(profile):
    with LocalSandbox(slots=1, limits=FAST, **PROFILE_OPTIONS[profile]) as box:
        t0 = time.monotonic()
        r = box.run_one(Program(BOMB, "", "cpp", BOMB_LIMITS))
        took = time.monotonic() - t0
        assert r.status == "compile_error" and r.extra["compile_status"] in ("timeout", "memory"), (r.status, r.error)
        assert r.wall <= BOMB_LIMITS.wall_seconds + 1.0 and took < BOMB_LIMITS.wall_seconds + 4.0, (r.wall, took)
        honest = box.run_one(Program("#include <cstdio>\nint main(){ puts(\"ok\"); }", "", "cpp", BIG_LIMITS))
        assert (honest.status, honest.stdout) == ("ok", "ok\n")


@needs_cpp
def test_a_compiler_stopped_by_its_cpu_or_memory_limit_is_told_from_compiler_errors(profile):
    """The compiler's own process (cc1plus) hits the limit, not the driver: g++ exits with an error. Given
    the wall clock to reach it (an idle machine), the CPU limit is a timeout and the memory limit memory,
    never "the compiler reported errors"; a source with a real error still is one."""
    roomy = BOMB_LIMITS.with_(wall_seconds=120.0)
    with LocalSandbox(slots=1, limits=FAST, **PROFILE_OPTIONS[profile]) as box:
        cpu = box.run_one(Program(BOMB, "", "cpp", roomy))
        assert (cpu.status, cpu.extra["compile_status"]) == ("compile_error", "timeout"), (cpu.error, cpu.stderr[-300:])
        assert cpu.wall < roomy.wall_seconds and "CPU limit" in cpu.error
        memory = box.run_one(Program(BOMB, "", "cpp", roomy.with_(cpu_seconds=60.0, memory_mb=150)))
        assert (memory.status, memory.extra["compile_status"]) == ("compile_error", "memory"), (memory.error,
                                                                                                memory.stderr[-300:])
        wrong = box.run_one(Program("int main(){ return x; }", "", "cpp", roomy))
        assert (wrong.status, wrong.extra["compile_status"]) == ("compile_error", "runtime_error"), wrong.error
        assert "the compiler reported errors" in wrong.error and "was not declared" in wrong.stderr


@needs_cpp
def test_a_template_bomb_costs_the_reward_and_the_command_line_no_more(tmp_path, capsys):
    tests = json.dumps({"language": "cpp", "test_cases": [{"input": "", "output": "0\n"}]})
    code_reward = reward("code_execution", language="cpp", cpu_seconds=2.0, wall_seconds=4.0, memory_mb=512)
    t0 = time.monotonic()
    assert code_reward([f"```cpp\n{BOMB}\n```"], verification_info=[tests]) == [0.0]
    assert time.monotonic() - t0 < 12.0
    assert code_reward.last_details[0]["statuses"] == ["compile_error"]
    source = tmp_path / "bomb.cpp"
    source.write_text(BOMB)
    t0 = time.monotonic()
    assert main(["sandbox", "run", str(source), "--cpu-seconds", "2", "--wall-seconds", "4", "--json"]) == 1
    assert time.monotonic() - t0 < 12.0
    assert json.loads(capsys.readouterr().out)["status"] == "compile_error"


@needs_c
def test_a_served_pool_keeps_binaries_out_of_its_slots():
    """``grpo sandbox serve``: four 20 MB binaries compiled through the server, then a program under a 64 MB
    limit on the same slot: it runs (before, the cached binaries were charged to the slot and it scored as a
    sandbox error)."""
    import re
    import signal

    from grpo_rewards.sandbox.backends.sandboxfusion import SandboxFusionBackend

    proc = subprocess.Popen([sys.executable, "-m", "grpo_rewards", "sandbox", "serve", "--port", "0", "--slots", "1",
                             "--cpu-seconds", "20", "--wall-seconds", "60", "--memory-mb", "1024"],
                            stdout=subprocess.PIPE, text=True)
    try:
        url = re.search(r"http://\S+", proc.stdout.readline()).group(0)
        with SandboxFusionBackend(url, retries=0) as client:
            for n in range(1, 5):
                r = client.run_one(Program(BIG.format(n=n), "", "c", BIG_LIMITS))
                assert (r.status, r.stdout) == ("ok", f"{n}\n"), (r.status, r.error)
            after = client.run_one(Program("print(6 * 7)", limits=BIG_LIMITS.with_(memory_mb=64)))
            assert (after.status, after.stdout) == ("ok", "42\n"), (after.status, after.error)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
