"""A run folder is one run's at a time, with real processes: a second ``grpo train`` into a folder a run is
writing is refused in one line (exit 2), ``--overwrite`` and ``--resume`` too, and the running run's records stay
whole; a run killed with SIGKILL leaves a lock the next run takes over and names; the Python API and ``grpo eval
--out`` are refused the same way. And ``--overwrite`` removes only what the run folder's layout names."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from grpo_core.run_folder.checkpoints import RunFolderError
from grpo_core.run_folder.layout import LOCK_FILE
from grpo_core.run_folder.lock import acquire, hold, release
from tests.core import test_trainer_resume as resume

model_dir = resume.model_dir  # the demo's tiny model, built once for this module

HOLDER = """
import sys, time
from pathlib import Path
from grpo_core.run_folder.lock import acquire
acquire(sys.argv[1], folder=sys.argv[2] == "folder", command="a holder")
Path(sys.argv[3]).write_text("held")
time.sleep(600)
"""


def holder(tmp_path: Path, target: Path, *, folder: bool = True) -> subprocess.Popen:
    """A real process holding the lock of ``target`` until killed."""
    script, ready = tmp_path / "holder.py", tmp_path / f"held-{target.name}"
    script.write_text(textwrap.dedent(HOLDER))
    proc = subprocess.Popen([sys.executable, str(script), str(target), "folder" if folder else "file", str(ready)],
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}, stderr=subprocess.PIPE,
                            text=True)
    resume.wait_for(ready.exists, proc, timeout=60)
    return proc


def steps(run_dir: Path) -> list[int]:
    return [json.loads(line)["step"] for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line]


@pytest.mark.slow  # real `grpo train` processes
def test_a_second_run_into_a_folder_being_written_is_refused_and_the_first_keeps_its_records(
        tmp_path: Path, model_dir: Path) -> None:
    run_dir = tmp_path / "run"
    config = resume.write_config(tmp_path, model_dir, run_dir, max_steps=500, every=0)
    first = resume.grpo("train", str(config))
    resume.wait_for(lambda: (run_dir / "metrics.jsonl").exists() and len(steps(run_dir)) >= 1, first)
    for extra in ([], ["--overwrite"], ["--resume"]):
        second = resume.grpo("train", str(config), *extra)
        out, _ = second.communicate(timeout=120)
        lines = [line for line in out.splitlines() if "being written" in line]
        assert second.returncode == 2 and "Traceback" not in out, out
        assert len(lines) == 1 and f"logging.output_dir: {run_dir} is being written by another run (pid {first.pid} on " \
            in lines[0], out
        assert f"(grpo train {config}))" in lines[0]  # what holds it, as its command line
    seen = steps(run_dir)
    assert seen == list(range(1, len(seen) + 1))  # --overwrite removed nothing, no record interleaved
    resume.wait_for(lambda: len(steps(run_dir)) > len(seen), first)  # and the first run goes on writing
    first.send_signal(signal.SIGINT)
    out, _ = first.communicate(timeout=120)
    assert first.returncode == 130, out
    assert steps(run_dir) == list(range(1, steps(run_dir)[-1] + 1))
    assert not (run_dir / LOCK_FILE).exists()  # released on exit


@pytest.mark.slow  # real `grpo train` processes
def test_two_runs_started_at_once_one_trains_the_other_is_refused(tmp_path: Path, model_dir: Path) -> None:
    run_dir = tmp_path / "run"
    config = resume.write_config(tmp_path, model_dir, run_dir, max_steps=3, every=0)
    procs = [resume.grpo("train", str(config)) for _ in range(2)]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 2], outs
    refused = outs[[p.returncode for p in procs].index(2)]
    errors = [line for line in refused.splitlines() if "logging.output_dir:" in line]
    assert len(errors) == 1 and ("is being written by another run" in errors[0] or "holds an earlier run" in errors[0])
    assert "Traceback" not in refused, refused
    assert steps(run_dir) == [1, 2, 3]  # one run's records, not two interleaved


@pytest.mark.slow  # real `grpo train` processes
def test_a_killed_runs_lock_is_taken_over_and_named(tmp_path: Path, model_dir: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    proc = holder(tmp_path, run_dir)
    with pytest.raises(RunFolderError, match=f"being written by another run \\(pid {proc.pid} on .* \\(a holder\\)"):
        acquire(run_dir, error=RunFolderError)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert (run_dir / LOCK_FILE).exists()  # left behind by the killed process ...
    config = resume.write_config(tmp_path, model_dir, run_dir, max_steps=1, every=0)
    run = resume.grpo("train", str(config))
    out, _ = run.communicate(timeout=300)
    assert run.returncode == 0, out  # ... and taken over, saying whose it was
    assert f"a stale lock left by pid {proc.pid} on" in out and "(no longer running) taken over" in out
    assert not (run_dir / LOCK_FILE).exists()


def test_the_python_api_and_grpo_eval_are_refused_while_another_process_writes(
        tmp_path: Path, model_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from grpo_core.config import as_run_config
    from grpo_core.trainer import Trainer
    from grpo_rewards.command_line import main

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    proc = holder(tmp_path, run_dir)
    try:
        trainer = Trainer(as_run_config(resume.write_config(tmp_path, model_dir, run_dir, max_steps=1)))
        with pytest.raises(RunFolderError, match=f"pid {proc.pid} on"):
            trainer.train()
        assert sorted(p.name for p in run_dir.iterdir()) == [LOCK_FILE]  # nothing written
    finally:
        proc.kill()
        proc.wait()

    out = tmp_path / "samples.jsonl"
    rows, rewards = tmp_path / "rows.jsonl", tmp_path / "r.toml"
    rows.write_text('{"prompt": "1+1=", "answer": "2"}\n')
    rewards.write_text('[rewards.m]\nuse = "exact_match"\nreference_extract = "none"\n')
    proc = holder(tmp_path, out, folder=False)
    try:
        capsys.readouterr()
        code = main(["eval", str(model_dir), "--data", str(rows), "--rewards", str(rewards), "--out", str(out),
                     "--no-chat-template", "--max-new-tokens", "2"])
        err = capsys.readouterr().err
        assert code == 2 and f"--out: {out} is being written by another command (pid {proc.pid} on" in err, err
        assert not out.exists()
    finally:
        proc.kill()
        proc.wait()


def test_the_lock_is_counted_per_process_and_removes_a_folder_it_made_for_nothing(tmp_path: Path) -> None:
    run_dir = tmp_path / "a" / "run"
    with hold(run_dir):
        acquire(run_dir)  # the command line and the trainer it starts: the same process asks twice
        release(run_dir)
        assert (run_dir / LOCK_FILE).is_file()
    assert not (tmp_path / "a").exists()  # made for the lock, nothing else written: gone again
    with hold(run_dir):
        (run_dir / "metrics.jsonl").write_text("")
    assert sorted(p.name for p in run_dir.iterdir()) == ["metrics.jsonl"]


@pytest.mark.slow  # real `grpo train` processes
def test_overwrite_removes_only_what_the_layout_names(tmp_path: Path, model_dir: Path) -> None:
    run_dir = tmp_path / "run"
    config = resume.write_config(tmp_path, model_dir, run_dir, max_steps=1, every=1)
    rows = run_dir / "my_rows.jsonl"
    run_dir.mkdir()
    rows.write_text("".join(json.dumps({"prompt": f"{i}+{i}=", "answer": str(2 * i)}) + "\n" for i in range(8)))
    (run_dir / "notes.txt").write_text("mine\n")
    text = config.read_text().replace('source = "demo:arithmetic?max_operand=9"', f'source = "{rows}"')
    config.write_text(text)
    for extra in ([], ["--overwrite"]):
        proc = resume.grpo("train", str(config), *extra)
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, out
        assert rows.is_file() and (run_dir / "notes.txt").read_text() == "mine\n"
    assert steps(run_dir) == [1]


def test_a_second_demo_into_a_folder_being_written_is_refused_before_anything_is_built(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from grpo_rewards.command_line import main

    demo_dir = tmp_path / "demo"
    demo_dir.mkdir()
    proc = holder(tmp_path, demo_dir)
    try:
        capsys.readouterr()
        code = main(["demo", "--output-dir", str(demo_dir), "--set", "grpo.max_steps=1"])
        err = capsys.readouterr().err
        assert code == 2 and f"{demo_dir} is being written by another run (pid {proc.pid} on" in err, err
        assert sorted(p.name for p in demo_dir.iterdir()) == [LOCK_FILE]  # no base, warm or run folder
    finally:
        proc.kill()
        proc.wait()
