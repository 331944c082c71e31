"""``grpo train --nproc 2`` (torchrun, gloo, CPU) end to end: a 2-process run killed with SIGKILL and resumed
with ``--resume`` ends with the same metrics and weights as an uninterrupted 2-process run; Ctrl-C finishes
the step on both ranks, checkpoints and exits; a config that 2 processes cannot run is refused in one line
before anything starts."""

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

from tests.core import test_trainer_resume as resume  # noqa: E402  (its tiny model and run config)

model_dir = resume.model_dir  # a fixture
write_config, TIMING_KEYS = resume.write_config, resume.TIMING_KEYS


def grpo(*args: str, sigint_ignored: bool = False) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    ignore = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if sigint_ignored else None
    return subprocess.Popen([sys.executable, "-m", "grpo_rewards", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True, preexec_fn=ignore)


def records(run_dir: Path) -> list[dict]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(line).items() if k not in TIMING_KEYS} for line in lines]


@pytest.mark.slow  # three torchrun launches of two processes each
def test_sigkill_then_resume_matches_an_uninterrupted_two_process_run(tmp_path: Path, model_dir: Path) -> None:
    import torch
    from safetensors.torch import load_file

    full_dir, killed_dir = tmp_path / "full", tmp_path / "killed"
    full = grpo("train", str(write_config(tmp_path, model_dir, full_dir)), "--nproc", "2")
    out, _ = full.communicate(timeout=400)
    assert full.returncode == 0, out[-4000:]

    config = write_config(tmp_path, model_dir, killed_dir)
    run = grpo("train", str(config), "--nproc", "2")
    deadline = time.monotonic() + 300
    while not (killed_dir / "checkpoints" / "step-00000002").exists():
        assert run.poll() is None, run.stdout.read()[-4000:]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)
    os.killpg(run.pid, signal.SIGKILL)  # the launcher and torchrun; the ranks (in sessions of their own) die with it
    run.wait(timeout=30)
    logged = (killed_dir / "metrics.jsonl").read_text()
    time.sleep(3)
    assert (killed_dir / "metrics.jsonl").read_text() == logged  # no rank is left training on its own
    assert not (killed_dir / "model").exists()  # it really died before the end
    assert (killed_dir / "checkpoints" / "step-00000002" / "rng-rank1.pt").exists()

    one = grpo("train", str(config), "--resume")  # another number of processes: refused, nothing changed
    out, _ = one.communicate(timeout=300)
    assert one.returncode == 2, out[-4000:]
    assert out.strip().splitlines()[-1] == (f"error: --resume: {killed_dir / 'checkpoints' / 'step-00000002'} was "
                                            "written by 2 process(es); resume it with the same number (this run "
                                            "has 1)")
    assert (killed_dir / "metrics.jsonl").read_text() == logged

    resumed = grpo("train", str(config), "--nproc", "2", "--resume")
    out, _ = resumed.communicate(timeout=400)
    assert resumed.returncode == 0, out[-4000:]

    full_records, resumed_records = records(full_dir), records(killed_dir)
    assert [r["step"] for r in resumed_records] == [1, 2, 3, 4]
    assert resumed_records == full_records  # rewards, losses, KL, lengths, LR... all identical
    assert full_records[-1]["kl"] > 0
    a, b = (load_file(d / "model" / "model.safetensors") for d in (full_dir, killed_dir))
    assert a.keys() == b.keys()
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=0, atol=0, msg=name)


def test_a_config_two_processes_cannot_run_is_refused_in_one_line(tmp_path: Path, model_dir: Path) -> None:
    config = write_config(tmp_path, model_dir, tmp_path / "odd", prompts_per_step=3)
    proc = grpo("train", str(config), "--nproc", "2")
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 2, out
    assert out.strip().splitlines()[-1] == (f"{config}: grpo.prompts_per_step: must be a multiple of the number of "
                                            "processes (2), got 3")
    assert not (tmp_path / "odd").exists()


@pytest.mark.parametrize("sigint_ignored", [False, True], ids=["terminal", "started-with-sigint-ignored"])
def test_ctrl_c_finishes_the_step_on_every_rank_checkpoints_and_exits(tmp_path: Path, model_dir: Path,
                                                                      sigint_ignored: bool) -> None:
    # started with SIGINT ignored, as a shell starts a background job (and so CI runners): a Ctrl-C sent to the
    # process group still stops the run the same way
    run_dir = tmp_path / "interrupted"
    run = grpo("train", str(write_config(tmp_path, model_dir, run_dir, max_steps=500, every=0)), "--nproc", "2",
               sigint_ignored=sigint_ignored)
    metrics = run_dir / "metrics.jsonl"
    deadline = time.monotonic() + 300
    while not (metrics.exists() and metrics.read_text().count("\n") >= 2):
        assert run.poll() is None, run.stdout.read()[-4000:]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)
    os.killpg(run.pid, signal.SIGINT)  # what Ctrl-C in a terminal does: the launcher, torchrun and the ranks
    out, _ = run.communicate(timeout=120)
    assert run.returncode == 130, out[-4000:]
    assert "Traceback" not in out and "ChildFailedError" not in out, out[-4000:]
    steps = [r["step"] for r in records(run_dir)]
    assert 2 <= steps[-1] < 500 and steps == list(range(1, steps[-1] + 1))
    checkpoints = sorted(p.name for p in (run_dir / "checkpoints").iterdir() if p.name.startswith("step-"))
    assert checkpoints == [f"step-{steps[-1]:08d}"]  # written after the last finished step, by both ranks' RNG
    assert (run_dir / "checkpoints" / checkpoints[0] / "rng-rank1.pt").exists()
    assert (run_dir / "model" / "model.safetensors").exists()
