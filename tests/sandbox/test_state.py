"""No program learns an earlier program's result: what the slot held while serving the previous run
(its status, output size, exit code, the reply built from them) is not reachable from the next program,
in live objects, in raw memory, in descriptors, in the environment or in /proc; in every profile, through
the pool, the code reward, ``grpo rewards score`` and ``grpo sandbox serve``."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys

import pytest

from grpo_rewards import reward
from grpo_rewards.command_line import main
from grpo_rewards.sandbox.jail.child import CHILD_ENV
from grpo_rewards.sandbox.pool import LocalSandbox, compilers
from grpo_rewards.sandbox.program import Limits, Program

from . import hostile_state as H
from .conftest import FAST, PROFILE_OPTIONS, needs_default

pytestmark = needs_default
needs_c = pytest.mark.skipif("c" not in compilers(), reason="gcc is not installed")

PROBE_LIMITS = Limits(cpu_seconds=20.0, wall_seconds=60.0, memory_mb=1024, output_bytes=1 << 20, file_size_mb=8)
COMPILING = Limits(cpu_seconds=20.0, wall_seconds=60.0, memory_mb=1024, output_bytes=1 << 20, file_size_mb=8)
CHILD_NAMES = sorted({*CHILD_ENV, "HOME", "TMPDIR"})


@pytest.fixture(scope="module", params=list(PROFILE_OPTIONS))
def one_slot(request):
    with LocalSandbox(slots=1, limits=FAST, **PROFILE_OPTIONS[request.param]) as box:
        yield box


def assert_nothing_found(got: dict, python: bool = True) -> None:
    if python:
        assert got["control"] and got["pages_scanned"] > 50, got  # the scan sees the heap
        assert got["frame_results"] == [] and got["gc_results"] == [], got
        assert got["memory_results"] == [], got
    assert set(got["fds"]) <= (set() if python else {5}), got  # a compiled program keeps its own binary's memfd
    assert sorted(got["env"]) == CHILD_NAMES, got
    assert not [p for p, state in got["proc"].items() if state == "read"], got


def _first(box: LocalSandbox, language: str = "python") -> None:
    first = box.run_one(Program(H.FIRST if language == "python" else H.FIRST_C, "", language, COMPILING))
    assert (first.status, first.exit_code, len(first.stdout)) == ("runtime_error", H.CODE, H.SIZE), first.error


def test_a_python_program_finds_nothing_of_the_previous_run(one_slot):
    for language in ["python", *(["c"] if "c" in compilers() else [])]:
        _first(one_slot, language)
        probe = one_slot.run_one(Program(H.PROBE, "", "python", PROBE_LIMITS))
        assert probe.status == "ok", (probe.error, probe.stderr[-500:])
        assert_nothing_found(H.found(probe.stdout))


@needs_c
def test_a_c_program_finds_nothing_of_the_previous_run(one_slot):
    _first(one_slot)
    probe = one_slot.run_one(Program(H.PROBE_C, "", "c", COMPILING))
    assert probe.status == "ok", (probe.error, probe.stderr[-500:])
    got = H.found(probe.stdout)
    assert_nothing_found(got, python=False)


def _oracle_rows() -> tuple[list[str], list[str]]:
    fence = "```python\n{}\n```"
    completions = [fence.format(H.ORACLE_FIRST)] + [fence.format(H.ORACLE_SIBLING)] * 3
    return completions, [json.dumps(H.ORACLE_TESTS)] * 4


def test_a_grpo_group_gets_no_oracle_from_its_slot():
    """Four siblings in one slot: the first solves and says its answer in its output size; the others
    compute nothing and look for that size. Only the first scores."""
    code_reward = reward("code_execution", slots=1, cpu_seconds=2.0, wall_seconds=4.0, memory_mb=512)
    completions, tests = _oracle_rows()
    assert code_reward(completions, verification_info=tests) == [1.0, 0.0, 0.0, 0.0]


def test_a_grpo_group_gets_no_oracle_through_the_command_line(tmp_path):
    config = tmp_path / "rewards.toml"
    config.write_text('[rewards.tests]\nuse = "code_execution"\nslots = 1\ncpu_seconds = 2.0\nwall_seconds = 4.0\n')
    completions, tests = _oracle_rows()
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps({"completion": c, "verification_info": t}) + "\n"
                            for c, t in zip(completions, tests)))
    out = tmp_path / "scored.jsonl"
    assert main(["rewards", "score", str(config), "--input", str(data), "--output", str(out)]) == 0
    assert [json.loads(line)["tests"] for line in out.read_text().splitlines()] == [1.0, 0.0, 0.0, 0.0]


def test_a_served_program_finds_nothing_of_the_previous_request():
    from grpo_rewards.sandbox.backends.sandboxfusion import SandboxFusionBackend

    proc = subprocess.Popen([sys.executable, "-m", "grpo_rewards", "sandbox", "serve", "--port", "0", "--slots", "1",
                             "--cpu-seconds", "20", "--wall-seconds", "60"], stdout=subprocess.PIPE, text=True)
    try:
        url = re.search(r"http://\S+", proc.stdout.readline()).group(0)
        with SandboxFusionBackend(url, retries=0) as client:
            first = client.run_one(Program(H.FIRST))
            assert first.exit_code == H.CODE and len(first.stdout) == H.SIZE
            probe = client.run_one(Program(H.PROBE))
            assert probe.status == "ok", probe.stderr[-500:]
            assert_nothing_found(H.found(probe.stdout))
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
