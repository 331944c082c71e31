"""Defaults and failures that must not lose work: a checkpoint cadence by default, a resumed run saying what it
restored, a model save killed midway leaving no partial folder, and a full disk (a real one: a small tmpfs) during
a checkpoint, the final model or a metrics write leaving the last good checkpoint resumable, said in one line."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from grpo_core.config import CheckpointConfig
from grpo_core.run_folder.checkpoints import DiskFullError, list_checkpoints
from grpo_rewards import hookimpl
from tests.core import test_trainer_resume as resume

model_dir = resume.model_dir  # the demo's tiny model, built once for this module


def config(tmp_path: Path, model: Path, run_dir: Path, *, max_steps: int, every: int = 2, extra: str = "",
           lora: bool = False) -> Path:
    path = resume.write_config(tmp_path, model, run_dir, max_steps=max_steps, every=every)
    text = path.read_text().replace("keep_last = 2", "keep_last = 3\n" + extra)
    path.write_text(text + ("\n[lora]\nenabled = true\nr = 4\n" if lora else ""))
    return path


def train(path: Path, *, resume_run: bool = False, registry: Any = None) -> dict:
    from grpo_core.config import as_run_config
    from grpo_core.trainer import Trainer

    return Trainer(as_run_config(path), resume=resume_run, registry=registry).train()


def test_the_default_config_checkpoints_by_time_and_keeps_a_few() -> None:
    default = CheckpointConfig()
    assert default.every_minutes > 0 and default.keep_last >= 3  # a crash loses at most every_minutes of work


def test_a_time_based_cadence_checkpoints_without_a_step_cadence(tmp_path: Path, model_dir: Path) -> None:
    run = tmp_path / "run"
    train(config(tmp_path, model_dir, run, max_steps=3, every=0, extra="every_minutes = 0.00001\n"))
    assert [c.step for c in list_checkpoints(run)] == [1, 2, 3]
    run2 = tmp_path / "run2"
    train(config(tmp_path, model_dir, run2, max_steps=3, every=0, extra="every_minutes = 0\n"))
    assert [c.step for c in list_checkpoints(run2)] == [3]  # 0 and 0: only the last one


def test_a_resumed_run_says_which_checkpoint_and_step(tmp_path: Path, model_dir: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    train(config(tmp_path, model_dir, run, max_steps=2))
    capsys.readouterr()
    train(config(tmp_path, model_dir, run, max_steps=3), resume_run=True)
    err = capsys.readouterr().err
    assert f"resumed from {run / 'checkpoints' / 'step-00000002'} at step 2 (epoch 0, row 8 of its order)" in err


KILLED_SAVE = """
import os, signal, sys
from pathlib import Path
from grpo_core.policy.models import save_model

class Model:
    def save_pretrained(self, out):
        (Path(out) / "config.json").write_text("{}")  # a first file, then the process dies
        if os.environ.get("DIE") == "1":
            os.kill(os.getpid(), signal.SIGKILL)
        (Path(out) / "model.safetensors").write_text("weights")

save_model(Model(), None, sys.argv[1], merged=True)
"""


def test_a_model_save_killed_midway_leaves_no_partial_folder(tmp_path: Path) -> None:
    script = tmp_path / "save.py"
    script.write_text(textwrap.dedent(KILLED_SAVE))
    out = tmp_path / "run" / "merged"
    env = {**os.environ, "DIE": "1"}
    proc = subprocess.run([sys.executable, str(script), str(out)], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert not out.exists()  # neither empty nor partial
    assert [p.name.startswith(".tmp-merged-") for p in out.parent.iterdir()] == [True]
    proc = subprocess.run([sys.executable, str(script), str(out)], env={**env, "DIE": "0"}, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "model.safetensors"]
    assert [p.name for p in out.parent.iterdir()] == ["merged"]  # the killed save's leftovers removed


def test_a_failing_model_save_keeps_the_earlier_folder(tmp_path: Path) -> None:
    from grpo_core.policy.models import save_model

    class Failing:
        def save_pretrained(self, out: str) -> None:
            (Path(out) / "config.json").write_text("{}")
            raise OSError(28, "No space left on device")

    out = tmp_path / "model"
    out.mkdir()
    (out / "model.safetensors").write_text("the earlier save")
    with pytest.raises(OSError, match="No space"):
        save_model(Failing(), None, out)
    assert [p.name for p in out.iterdir()] == ["model.safetensors"]
    assert [p.name for p in tmp_path.iterdir()] == ["model"]


# ---------------------------------------------------------------- a full disk, for real ----

@pytest.fixture
def small_disk(tmp_path: Path) -> Any:
    """A 4 MiB tmpfs mounted for the test (needs root and mount rights: skipped otherwise)."""
    where = tmp_path / "disk"
    where.mkdir()
    if shutil.which("mount") is None or os.geteuid() != 0:
        pytest.skip("a real full disk needs a tmpfs: mount as root (not root here)")
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(where)], capture_output=True,
                          text=True)
    if proc.returncode != 0:
        pytest.skip(f"a real full disk needs a tmpfs: mount failed ({proc.stderr.strip()})")
    yield where
    subprocess.run(["umount", "-l", str(where)], check=False)


def fill(disk: Path, leave: int) -> None:
    """Fill ``disk`` until ``leave`` bytes are free."""
    st = os.statvfs(disk)
    free = st.f_bavail * st.f_frsize
    with open(disk / "filler", "ab") as fh, contextlib.suppress(OSError):
        fh.write(b"\0" * max(0, free - leave))


def size_of(folder: Path) -> int:
    return sum(-(-p.stat().st_size // 4096) * 4096 for p in folder.rglob("*") if p.is_file())


class FillAfterCheckpoint:
    """Fills the disk once the checkpoint of ``step`` is written, leaving ``leave`` bytes."""

    def __init__(self, disk: Path, step: int, leave: int | None = None):
        self.disk, self.step, self.leave = disk, step, leave

    @hookimpl
    def grpo_on_checkpoint(self, step: int, path: str) -> None:
        if step != self.step:
            return
        if self.leave == 0:  # the records' last pages full too (blank lines, which readers skip): the next
            for name in ("metrics.jsonl", "samples.jsonl"):  # line needs a page the disk no longer has
                record = Path(path).parents[1] / name
                with open(record, "a") as fh:
                    fh.write("\n" * (-record.stat().st_size % 4096))
        fill(self.disk, size_of(Path(path)) + 32 * 1024 if self.leave is None else self.leave)


def registry_with(plugin: Any) -> Any:
    from grpo_rewards.plugins import load_registry

    return load_registry(extra_plugins=[("fill_disk", plugin)])


@pytest.mark.parametrize(("fill_at", "leave", "what", "good"), [
    (2, 0, "metrics.jsonl", 2),             # the next metrics write fails
    (2, 12 * 1024, "step-00000004", 2),     # room for the records, not for the next checkpoint
    (4, None, "run/model", 6),              # room for the last checkpoint, not for the final model
])
def test_a_full_disk_leaves_the_last_good_checkpoint_resumable(tmp_path: Path, model_dir: Path, small_disk: Path,
                                                              fill_at: int, leave: int | None, what: str,
                                                              good: int) -> None:
    run = small_disk / "run"
    path = config(tmp_path, model_dir, run, max_steps=6, extra="save_merged = true\n", lora=True)
    with pytest.raises(DiskFullError) as caught:
        train(path, registry=registry_with(FillAfterCheckpoint(small_disk, fill_at, leave)))
    message = str(caught.value)
    assert "\n" not in message and "disk full" in message and what in message, message
    assert f"step-{good:08d} (step {good}), is intact" in message and "--resume" in message, message
    assert list_checkpoints(run)[-1].step == good
    assert not [p for p in run.rglob(".tmp-*")]  # nothing half-written left behind
    assert not (run / "merged").exists()

    (small_disk / "filler").unlink()  # space freed: the run continues from the good checkpoint to the end
    result = train(path, resume_run=True)
    assert result["step"] == 6 and not result["interrupted"]
    assert (run / "merged" / "config.json").is_file()
    assert [r["step"] for r in resume.records(run)] == [1, 2, 3, 4, 5, 6]
