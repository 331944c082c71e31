"""``benchmarks/vs_trl.py`` runs end to end at a toy size: both trainers train in their own processes on the
same completions, and the table, floor and ``summary`` lines come out parseable (the figures themselves are
measured by running the script at the reference size, never asserted in a test)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "vs_trl.py"


def test_benchmark_runs_both_sides_and_prints_summary_lines():
    cmd = [sys.executable, str(SCRIPT), "--lengths", "16", "--vocab", "600", "--hidden", "32", "--intermediate",
           "64", "--layers", "1", "--generations", "4", "--lora-rank", "4", "--micro-batch-tokens", "48",
           "--timeout", "300"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    for length in (16,):
        for side in ("ours", "trl"):
            assert re.search(rf"^tokens={length}\s+{side}\s+peak \d+\.\d\d GB", out, re.M), out
        assert re.search(rf"^floor tokens={length}: .* GB above it", out, re.M), out
        match = re.search(rf"^summary tokens={length} peak_ratio=(\d+\.\d+) time_ratio=(\d+\.\d+)$", out, re.M)
        assert match, out
        assert float(match.group(1)) > 0 and float(match.group(2)) > 0
    assert "malloc mmap threshold 1048576" in out
