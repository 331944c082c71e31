"""benchmarks/shared_prompts_kernels.py at its toy size on the CPU: every way runs (flex left out, torch has no
flex backward here), the packed log-probs agree with the unpacked ones, and the summary prints each ratio."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import shared_prompts_kernels  # noqa: E402


def test_the_benchmark_runs_each_way_and_prints_ratios(capsys: pytest.CaptureFixture[str]) -> None:
    assert shared_prompts_kernels.main(["--small", "--repeats", "1", "--device", "cpu"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "4 x 16 tokens behind a 24-token prompt on cpu"
    gaps = {line.split()[0]: float(line.rsplit(" ", 1)[1]) for line in out[1:-1]}
    assert set(gaps) == {"unpacked", "dense_mask"} and gaps["dense_mask"] < 1e-5
    assert re.fullmatch(r"summary dense_mask_time=\d+\.\d{3}", out[-1])
