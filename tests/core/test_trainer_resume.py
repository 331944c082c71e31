"""Failure handling of the GRPO loop, run as `grpo train` in subprocesses on a tiny model:
SIGINT finishes the step, checkpoints and exits cleanly; a run killed with SIGKILL and resumed with
``--resume`` ends with the same step count, metrics and weights as an uninterrupted run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

TIMING_KEYS = {"time", "step_time", "tokens_per_s", "peak_memory_gb"}


@pytest.fixture(scope="module")
def model_dir(arithmetic_model_dir: Path) -> Path:
    return arithmetic_model_dir  # the demo's tiny model (tests/core/conftest.py), built once per session


def write_config(tmp_path: Path, model_dir: Path, run_dir: Path, *, max_steps: int = 4, every: int = 2,
                 prompts_per_step: int = 4) -> Path:
    path = tmp_path / f"{run_dir.name}.toml"
    path.write_text(f"""
[model]
name_or_path = "{model_dir}"
dtype = "float32"
gradient_checkpointing = false
[data]
source = "demo:arithmetic?max_operand=9"
prompt_field = "prompt"
answer_field = "answer"
chat_template = false
[generation]
num_generations = 4
max_completion_length = 8
[grpo]
learning_rate = 1e-3
prompts_per_step = {prompts_per_step}
max_steps = {max_steps}
num_iterations = 2
beta = 0.04
gradient_accumulation_steps = 2
seed = 3
[logging]
output_dir = "{run_dir}"
progress = false
plot = false
sample_every = 2
[checkpoint]
every = {every}
keep_last = 2
[rewards.correct]
use = "exact_match"
reference_extract = "none"
[rewards.near]
use = "numeric_proximity"
reference_extract = "none"
""")
    return path


def grpo(*args: str, **kwargs) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen([sys.executable, "-m", "grpo_rewards", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, **kwargs)


def wait_for(predicate, proc: subprocess.Popen, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if proc.poll() is not None:
            raise AssertionError(f"grpo exited early ({proc.returncode}):\n{proc.stdout.read()}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("timed out")
        time.sleep(0.05)


def records(run_dir: Path) -> list[dict]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(line).items() if k not in TIMING_KEYS} for line in lines]


def weights(run_dir: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(run_dir / "model" / "model.safetensors")


def test_sigkill_then_resume_matches_an_uninterrupted_run(tmp_path, model_dir):
    import torch

    full_dir, killed_dir = tmp_path / "full", tmp_path / "killed"
    full = grpo("train", str(write_config(tmp_path, model_dir, full_dir, max_steps=6, every=2)))
    out, _ = full.communicate(timeout=300)
    assert full.returncode == 0, out

    config = write_config(tmp_path, model_dir, killed_dir, max_steps=6, every=2)
    run = grpo("train", str(config))
    wait_for(lambda: (killed_dir / "checkpoints" / "step-00000004").exists(), run)
    run.send_signal(signal.SIGKILL)
    run.wait(timeout=30)
    assert run.returncode == -signal.SIGKILL
    assert not (killed_dir / "model").exists()  # it really died before the end

    resumed = grpo("train", str(config), "--resume")
    out, _ = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, out

    full_records, resumed_records = records(full_dir), records(killed_dir)
    assert [r["step"] for r in resumed_records] == [1, 2, 3, 4, 5, 6]
    assert resumed_records == full_records  # rewards, losses, KL, lengths, LR... all identical
    assert full_records[-1]["kl"] > 0  # the reference model and the update were exercised
    a, b = weights(full_dir), weights(killed_dir)
    assert a.keys() == b.keys()
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=0, atol=0, msg=name)


def test_sigint_finishes_the_step_checkpoints_and_exits(tmp_path, model_dir):
    run_dir = tmp_path / "interrupted"
    run = grpo("train", str(write_config(tmp_path, model_dir, run_dir, max_steps=500, every=0)))
    wait_for(lambda: (run_dir / "metrics.jsonl").exists() and (run_dir / "metrics.jsonl").read_text().count("\n") >= 2,
             run)
    run.send_signal(signal.SIGINT)
    out, _ = run.communicate(timeout=120)
    assert run.returncode == 130, out
    assert "Traceback" not in out
    steps = [r["step"] for r in records(run_dir)]
    checkpoints = sorted(p.name for p in (run_dir / "checkpoints").iterdir() if p.name.startswith("step-"))
    assert 2 <= steps[-1] < 500
    assert checkpoints == [f"step-{steps[-1]:08d}"]  # written after the last finished step
    assert (run_dir / "model" / "model.safetensors").exists()
