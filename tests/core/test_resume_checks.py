"""Resume checks what it loads and loses nothing: a damaged checkpoint (truncated weights, a garbage optimizer
state), a changed LoRA rank or a changed model is one line naming the checkpoint and what differs, exit 2; the
final model is replaced in one step, and a run killed (SIGKILL, a real process) while saving it keeps the
earlier model and writes the new one on ``--resume``."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from grpo_core.atomic_folders import atomic_folder
from grpo_core.run_folder.checkpoints import list_checkpoints
from grpo_rewards.command_line import main
from tests.core import test_trainer_resume as resume

model_dir = resume.model_dir  # the demo's tiny model, built once for this module


def lora_config(tmp_path: Path, model: Path, run_dir: Path, *, max_steps: int) -> Path:
    path = resume.write_config(tmp_path, model, run_dir, max_steps=max_steps, every=1)
    path.write_text(path.read_text() + "\n[lora]\nenabled = true\nr = 4\nalpha = 8\n")
    return path


@pytest.fixture(scope="module")
def one_step_run(tmp_path_factory: pytest.TempPathFactory, model_dir: Path) -> Path:
    """A LoRA run of one step with its checkpoint, trained once; each test resumes a copy."""
    from grpo_core.config import as_run_config
    from grpo_core.trainer import Trainer

    root = tmp_path_factory.mktemp("one_step")
    Trainer(as_run_config(lora_config(root, model_dir, root / "run", max_steps=1))).train()
    return root / "run"


def resumed(tmp_path: Path, one_step_run: Path, model: Path, capsys: pytest.CaptureFixture[str],
            *sets: str, change: Any = None) -> tuple[int, list[str], Path]:
    run = tmp_path / "run"
    shutil.copytree(one_step_run, run)
    if change is not None:
        change(run)
    config = lora_config(tmp_path, model, run, max_steps=2)
    capsys.readouterr()
    argv = ["train", str(config), "--resume", "--set", "logging.progress=false"]
    for item in sets:
        argv += ["--set", item]
    code = main(argv)
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    return code, [line for line in err.splitlines() if "--resume:" in line or "error" in line.lower()], run


def damage(name: str, how: str) -> Any:
    def change(run: Path) -> None:
        file = list_checkpoints(run)[-1].path / name
        data = file.read_bytes()
        file.write_bytes(data[: len(data) // 2] if how == "truncate" else b"\x00garbage" * 40)
    return change


@pytest.mark.parametrize(("name", "how", "what"), [
    ("weights.safetensors", "truncate", "weights"),
    ("weights.safetensors", "garbage", "weights"),
    ("optimizer.pt", "garbage", "optimizer state"),
    ("rng.pt", "truncate", "random generator state"),
])
def test_a_damaged_checkpoint_is_one_line_naming_it(tmp_path: Path, one_step_run: Path, model_dir: Path,
                                                    capsys: pytest.CaptureFixture[str], name: str, how: str,
                                                    what: str) -> None:
    code, lines, run = resumed(tmp_path, one_step_run, model_dir, capsys, change=damage(name, how))
    file = run / "checkpoints" / "step-00000001" / name
    assert code == 2
    assert len(lines) == 1 and f"{file}: the checkpoint's {what} cannot be read (" in lines[0], lines
    assert "remove step-00000001 to resume from the one before it" in lines[0]


def test_a_changed_lora_rank_is_one_line_naming_the_checkpoint_and_the_shapes(
        tmp_path: Path, one_step_run: Path, model_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, run = resumed(tmp_path, one_step_run, model_dir, capsys, "lora.r=8")
    checkpoint = run / "checkpoints" / "step-00000001"
    assert code == 2 and len(lines) == 1, lines
    assert f"--resume: {checkpoint}: " in lines[0] and "lora_A" in lines[0] and "has shape [4, " in lines[0]
    assert "[8, " in lines[0] and "in this run; was [lora] r or the model changed?" in lines[0]


def test_a_changed_model_is_one_line_naming_what_differs(tmp_path: Path, one_step_run: Path, model_dir: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path / "other_model"
    shutil.copytree(model_dir, other)  # the same shapes: only the adapter's base model tells them apart
    code, lines, run = resumed(tmp_path, one_step_run, other, capsys)
    assert code == 2 and len(lines) == 1, lines
    assert f"{run / 'checkpoints' / 'step-00000001'}: the checkpoint's adapter differs from this run's: " \
           f"base_model_name_or_path '{model_dir}' in the checkpoint, '{other}' in this run" in lines[0]


def test_a_checkpoint_that_fits_resumes(tmp_path: Path, one_step_run: Path, model_dir: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, run = resumed(tmp_path, one_step_run, model_dir, capsys)
    assert code == 0, lines
    assert [c.step for c in list_checkpoints(run)] == [1, 2] and (run / "model" / "adapter_config.json").is_file()


SWAP = """
import os, pathlib, signal, sys
from grpo_core import atomic_folders

atomic_folders.exchange = lambda a, b: False  # a file system without an atomic exchange: the two-rename path
real = pathlib.Path.rename

def rename(self, target):
    if pathlib.Path(target).name == "model" and os.environ.get("DIE") == "1":
        os.kill(os.getpid(), signal.SIGKILL)  # the old folder is set aside, the new one not yet renamed in
    return real(self, target)

pathlib.Path.rename = rename
with atomic_folders.atomic_folder(sys.argv[1]) as tmp:
    (tmp / "weights").write_text(sys.argv[2])
"""


def test_a_replacement_killed_between_its_renames_keeps_the_earlier_folder(tmp_path: Path) -> None:
    final = tmp_path / "run" / "model"
    with atomic_folder(final) as tmp:
        (tmp / "weights").write_text("old")
    script = tmp_path / "swap.py"
    script.write_text(textwrap.dedent(SWAP))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "DIE": "1"}
    proc = subprocess.run([sys.executable, str(script), str(final), "new"], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    with atomic_folder(final) as tmp:  # the next save (a --resume's) finds the earlier folder set aside ...
        assert (final / "weights").read_text() == "old"  # ... and has put it back before writing
        (tmp / "weights").write_text("newer")
    assert (final / "weights").read_text() == "newer" and [p.name for p in final.parent.iterdir()] == ["model"]
    # and where the kernel can swap two folders in one step, no moment is without the folder at all
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(SWAP).replace(
        "atomic_folders.exchange = lambda a, b: False", ""), str(final), "newest"], env=env, capture_output=True,
        text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (final / "weights").read_text() == "newest" and [p.name for p in final.parent.iterdir()] == ["model"]


DIE_IN_FINAL_SAVE = """
import os, signal, sys
from transformers import PreTrainedTokenizerBase

def dying(self, *args, **kwargs):  # the final model's weights are written, its tokenizer not yet: killed
    os.kill(os.getpid(), signal.SIGKILL)

if os.environ.get("DIE_IN_SAVE") == "1":
    PreTrainedTokenizerBase.save_pretrained = dying
from grpo_rewards.command_line import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow  # three real `grpo train` processes
def test_a_run_killed_while_saving_its_final_model_keeps_the_earlier_one_and_resume_writes_it(
        tmp_path: Path, model_dir: Path) -> None:
    from safetensors.torch import load_file

    run = tmp_path / "run"
    script = tmp_path / "grpo_dying.py"
    script.write_text(textwrap.dedent(DIE_IN_FINAL_SAVE))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "OMP_NUM_THREADS": "1"}

    def grpo(*args: str, die: bool = False) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(script), *args], env={**env, "DIE_IN_SAVE": "1" if die else "0"},
                              capture_output=True, text=True, timeout=600)

    first = grpo("train", str(resume.write_config(tmp_path, model_dir, run, max_steps=1, every=1)))
    assert first.returncode == 0, first.stderr
    before = load_file(run / "model" / "model.safetensors")
    config = resume.write_config(tmp_path, model_dir, run, max_steps=2, every=1)
    killed = grpo("train", str(config), "--resume", die=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert list_checkpoints(run)[-1].step == 2  # killed in the final save, after the last checkpoint
    kept = load_file(run / "model" / "model.safetensors")  # the earlier final model: whole, untouched
    assert kept.keys() == before.keys() and all(kept[k].equal(before[k]) for k in kept)
    assert (run / "model" / "tokenizer_config.json").is_file()
    again = grpo("train", str(config), "--resume")
    assert again.returncode == 0, again.stderr
    after = load_file(run / "model" / "model.safetensors")
    assert any(not after[k].equal(before[k]) for k in after)  # step 2's model, written by the resume
    assert not [p for p in run.iterdir() if p.name.startswith((".tmp-", ".old-"))]
