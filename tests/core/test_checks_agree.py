"""`grpo config validate` and `grpo train --dry-run` make one set of checks (grpo_core.cli.checks.run_checks) with one
path rule for models and data (as given, else next to the config file): each case gets the same verdict and the same
first error line from both, and a hub dataset that cannot be fetched fails `grpo train` (and --dry-run) in seconds
with file:line."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from grpo_rewards.command_line import main

CONFIG = """\
[model]
name_or_path = "{model}"
dtype = "float32"
gradient_checkpointing = false

[data]
source = "{data}"
prompt_field = "question"
chat_template = false

[logging]
output_dir = "{out}"

[rewards.short]
use = "core_len"
"""


def both(config: Path, capsys: pytest.CaptureFixture[str]) -> list[tuple[int, str]]:
    """(exit status, first stderr line that is an error) of validate and of --dry-run."""
    out = []
    for argv in (["config", "validate", str(config)], ["train", str(config), "--dry-run"]):
        code = main(argv)
        lines = capsys.readouterr().err.splitlines()  # train's summary line starts "<config>: model ..."
        errors = [line for line in lines if line.startswith(("error:", f"{config}:"))
                  and not line.startswith(f"{config}: model ")]
        out.append((code, errors[0] if errors else ""))
    return out


@pytest.fixture
def case(tmp_path: Path, tiny_model_dir: Path, use_core_registry: object, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A config folder holding a model folder and a data file, run from another working folder."""
    folder = tmp_path / "project"
    folder.mkdir()
    shutil.copytree(tiny_model_dir, folder / "models" / "tiny")
    (folder / "rows.jsonl").write_text('{"question": "What is 1 plus 1?"}\n')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return folder


def write(folder: Path, *, model: str = "models/tiny", data: str = "rows.jsonl", out: str = "") -> Path:
    path = folder / "run.toml"
    path.write_text(CONFIG.format(model=model, data=data, out=out or str(folder / "runs" / "a")))
    return path


def test_a_model_path_resolves_like_a_data_path(case: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # both relative to the config's folder, neither with ./ : found, by both commands
    assert [code for code, _ in both(write(case), capsys)] == [0, 0]


@pytest.mark.parametrize(("model", "why"), [
    ("models/missing", "folder not found"),          # without ./ : checked too (models/ is a local folder)
    ("rows.jsonl", "is a file"),                     # a file, not a model folder
    ("./models", "folder without config.json"),      # a folder that is not a model
])
def test_a_bad_model_path_is_refused_alike(case: Path, capsys: pytest.CaptureFixture[str], model: str,
                                           why: str) -> None:
    config = write(case, model=model)
    (validate, dry_run) = both(config, capsys)
    assert validate[0] == dry_run[0] == 2, (validate, dry_run)
    assert why in validate[1] and "model.name_or_path" in validate[1], validate
    assert validate[1] == dry_run[1]


def test_an_output_folder_that_cannot_be_written_is_refused_alike(case: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    (case / "blocker").write_text("a file where a folder must go")
    config = write(case, out=str(case / "blocker" / "run"))
    (validate, dry_run) = both(config, capsys)
    assert validate[0] == dry_run[0] == 2
    assert "logging.output_dir" in validate[1] and "blocker" in validate[1], validate
    assert validate[1] == dry_run[1]


def test_an_unreachable_hub_dataset_fails_fast_with_file_and_line(case: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    config = write(case, data="someone/not-cached-dataset")
    assert main(["config", "validate", str(config)]) == 0  # validate reads a config offline: the hub is not asked
    capsys.readouterr()
    for argv in (["train", str(config), "--dry-run"], ["train", str(config)]):
        start = time.monotonic()
        assert main(argv) == 2
        took = time.monotonic() - start
        err = capsys.readouterr().err
        assert f"{config}:7: data.source: hub dataset 'someone/not-cached-dataset'" in err, err
        assert took < 5, took
