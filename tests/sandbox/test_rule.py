"""The rule: whatever a program can cause is its failure and scores as one, never above a plain wrong
answer and never None. Every hostile program of every suite runs through a code reward, in every profile."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from grpo_rewards.sandbox.pool import LocalSandbox
from grpo_rewards.sandbox.program import Limits

from . import hostile_more
from .conftest import PROFILE_OPTIONS, needs_default
from .test_hostile import Targets, programs

pytestmark = needs_default

STDIO_TESTS = json.dumps({"inputs": ["1 2\n"], "outputs": ["3\n"]})
CALL_TESTS = json.dumps({"fn_name": "add", "inputs": [[1, 2]], "outputs": [3]})
PLAIN_WRONG = "print(4)"
RIGHT = "a, b = map(int, input().split())\nprint(a + b)"
C_RIGHT = "#include <stdio.h>\nint main(void){ int a, b; scanf(\"%d %d\", &a, &b); printf(\"%d\\n\", a + b); }"
LIMITS = Limits(cpu_seconds=1.0, wall_seconds=2.0, memory_mb=512, output_bytes=1 << 20, file_size_mb=8)


def fenced(code: str, language: str = "python") -> str:
    return f"```{language}\n{code}\n```"


def every_hostile_program(targets: Targets, canary: int) -> dict[str, str]:
    out = {f"suite:{name}": code for name, (code, _) in programs(targets).items()}
    out.update({f"more:{name}": code for name, code in hostile_more.STDIO.items()})
    out["more:signals"] = hostile_more.signal_program(canary, os.getpid())
    out["more:metadata"] = hostile_more.metadata_program(targets.victim, targets.dir)
    out["more:shared_uid"] = hostile_more.shared_uid_program({"owner": os.getpid(), "canary": canary})
    out["more:memfd_hoard"] = hostile_more.MEMFD_HOARD
    out["more:shm_hoard"] = hostile_more.SHM_HOARD
    return out


@pytest.mark.parametrize("profile", list(PROFILE_OPTIONS))
def test_no_hostile_program_scores_above_a_wrong_answer(profile):
    from grpo_rewards import reward

    targets = Targets()
    canary = subprocess.Popen(["sleep", "60"])
    try:
        stdio = every_hostile_program(targets, canary.pid)
        with LocalSandbox(slots=4, limits=LIMITS, **PROFILE_OPTIONS[profile]) as box:
            r = reward("code_execution", cpu_seconds=1.0, wall_seconds=2.0, memory_mb=512)
            r._backend = box
            names = [*stdio, "plain_wrong", "right"]
            scores = r([fenced(c) for c in (*stdio.values(), PLAIN_WRONG, RIGHT)],
                       verification_info=[STDIO_TESTS] * len(names))
            calls = r([fenced(c) for c in hostile_more.JUDGE_CRASHERS.values()],
                      verification_info=[CALL_TESTS] * len(hostile_more.JUDGE_CRASHERS))
            c_scores = []
            if {"c", "cpp"} <= box.compilers.keys():
                rc = reward("code_execution", cpu_seconds=1.0, wall_seconds=2.0, memory_mb=512, language="c")
                rc._backend = box
                c_code = hostile_more.c_programs(canary.pid, targets.tmp_marker, targets.victim)
                c_code.update(hostile_more.C_LIMITS)
                c_code.update(hostile_more.c_metadata_programs(canary.pid, targets.victim))
                c_code["c_memfd_hoard"] = hostile_more.C_MEMFD_HOARD
                c_code["c_compile_error"] = "int main( {"
                c_code["c_plain_wrong"] = "#include <stdio.h>\nint main(void){ puts(\"4\"); return 0; }"
                c_scores = rc([fenced(c, "c") for c in c_code.values()], verification_info=[STDIO_TESTS] * len(c_code))
                assert rc([fenced(C_RIGHT, "c")], verification_info=[STDIO_TESTS]) == [1.0]
            assert box.metrics()["status_counts"].get("sandbox_error", 0) == 0
        by_name = dict(zip(names, scores, strict=True))
        assert by_name.pop("right") == 1.0  # the batch is scored: a right answer still passes
        wrong = by_name.pop("plain_wrong")
        assert wrong == 0.0
        bad = {n: s for n, s in by_name.items() if s is None or s > wrong}
        assert bad == {}, bad
        assert calls == [0.0] * len(hostile_more.JUDGE_CRASHERS)
        assert all(score == 0.0 for score in c_scores), c_scores
    finally:
        canary.kill()
        canary.wait()
        targets.close()
