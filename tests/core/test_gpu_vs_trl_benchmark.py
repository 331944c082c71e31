"""``benchmarks/gpu_vs_trl.py`` runs end to end on the CPU at its toy size (``--device cpu --small``): both
trainers train in their own processes (one (mode, checkpointing) pair, ``plan``: the others differ only in the
flags they hand the same side runner, ``tests/core/test_bench_sides_config.py``), the two samplers run in theirs,
the cap search trains each side, and the table, ``plan`` and ``summary`` lines come out parseable, the ``plan``
line naming what our step planner chose with none of its keys pinned. The figures themselves are measured by
running the script on a GPU, never asserted here."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_vs_trl.py"
NUMBER = r"\d+\.\d+"


def printed_ratio_fits(ratio: float, top: float, bottom: float, top_step: float, bottom_step: float) -> bool:
    """Whether a ratio printed to 2 decimals is top / bottom for some values that print as ``top`` and
    ``bottom`` at their precisions (each off by at most half its last digit)."""
    low = (top - top_step / 2) / (bottom + bottom_step / 2)
    high = (top + top_step / 2) / max(bottom - bottom_step / 2, 1e-12)
    return low - 0.005 <= ratio <= high + 0.005


@pytest.mark.slow
def test_the_gpu_benchmark_runs_every_part_on_the_cpu() -> None:
    cmd = [sys.executable, str(SCRIPT), "--device", "cpu", "--small", "--lengths", "16", "--steps", "2",
           "--generations", "4", "--lora-rank", "4", "--modes", "lora", "--checkpointing", "plan", "--sample-prompts", "2", "--sample-length", "8",
           "--memory-limit-gb", "24", "--cap-lengths", "16,16", "--timeout", "600"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3000)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    assert "vocab 600, hidden 56, 1 layers" in out and "device cpu" in out
    assert "ours: micro_batch_tokens planned, logprob_chunk_size planned" in out
    for mode in ("lora",):
        for ckpt in ("plan",):
            row = rf"^\| {mode} \| {ckpt} \| 16 \| ({NUMBER}) s \| ({NUMBER}) s \| ({NUMBER}) \| ({NUMBER}) GiB \| " \
                  rf"({NUMBER}) GiB \| ({NUMBER}) \|$"
            found = re.search(row, out, re.M)
            assert found, out
            ours, trl, ratio = (float(found.group(i)) for i in (1, 2, 3))
            assert ours > 0 and trl > 0 and printed_ratio_fits(ratio, ours, trl, 0.001, 0.001), found.group(0)
            assert re.search(rf"^summary mode={mode} checkpointing={ckpt} tokens=16 time_ratio={NUMBER} "
                             rf"peak_ratio={NUMBER}$", out, re.M), out
            plan = re.search(rf"^plan mode={mode} checkpointing={ckpt} tokens=16 micro_batch_tokens=(\d+) "
                             rf"gradient_checkpointing=(true|false) mlp_chunk_tokens=(\d+) logprob_chunk_size=(\d+) "
                             rf"packing_kernel=(\w+) autocast=(\w+) estimated_peak_gib=({NUMBER}) set=(\S+) "
                             rf"ours_peak_gib=({NUMBER})$", out, re.M)
            assert plan, out
            assert int(plan.group(1)) >= 0 and int(plan.group(4)) > 0 and float(plan.group(7)) > 0, plan.group(0)
            assert plan.group(8) == "none", plan.group(0)  # the planner chose every planned key, none was pinned
    sampling = re.search(rf"^summary sampling prompts=2 generations=4 length=8 ours_tps=({NUMBER}) "
                         rf"generate_tps=({NUMBER}) speedup=({NUMBER})$", out, re.M)
    assert sampling, out
    assert printed_ratio_fits(float(sampling.group(3)), float(sampling.group(1)), float(sampling.group(2)), 0.1, 0.1)
    assert re.search(r"^cap ours: L=16 trained, micro_batch_tokens=\d+ .* set=none$", out, re.M), out
    for side in ("ours", "trl"):
        assert re.search(rf'^summary cap side={side} cap="24.0 GB address space" longest_tokens=16$', out, re.M), out
