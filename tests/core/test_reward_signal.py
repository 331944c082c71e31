"""``grpo signal CONFIG``: which rewards vary within a group on the run's own model (grpo_core.reward_signal).
The numbers are checked by hand on fixed scores, and end to end against the completions the command sampled,
rescored here with the public reward API."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from grpo_core.reward_signal import no_signal, signal_of
from grpo_rewards.command_line import main

pytest.importorskip("torch")
pytest.importorskip("transformers")


def test_signal_counts_groups_whose_scores_differ() -> None:
    scores = [1.0, 0.0, 0.0, 0.0,  0.0, 0.0, 0.0, 0.0,  0.5, 0.5, None, 0.5]
    s = signal_of("r", scores, 4)
    assert s.varied_groups == pytest.approx(1 / 3)  # only the first group differs; None is no difference
    assert s.nonzero == pytest.approx(4 / 12)
    assert s.unscored == pytest.approx(1 / 12)
    assert s.mean == pytest.approx(2.5 / 11)
    flat = signal_of("f", [0.0] * 8, 4)
    assert flat.varied_groups == 0 and flat.nonzero == 0 and no_signal([s, flat]) == ["f"]
    assert math.isnan(signal_of("n", [None, None], 2).mean)


@pytest.fixture(scope="module")
def model_dir(arithmetic_model_dir: Path) -> Path:
    return arithmetic_model_dir  # the demo's tiny model (tests/core/conftest.py), built once per session


CONFIG = """
[model]
name_or_path = "{model}"
dtype = "float32"

[data]
source = "demo:arithmetic?max_operand=9"
answer_field = "answer"
chat_template = false

[generation]
num_generations = 6
max_completion_length = 6
temperature = 1.5

[grpo]
seed = 3

[logging]
output_dir = "{out}"

[rewards.digits]
use = "integer_format"

[rewards.tags]
use = "strict_format"
"""


def test_grpo_signal_reports_what_varies_and_warns_about_what_never_does(
        model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from grpo_rewards import reward

    run = tmp_path / "run.toml"
    run.write_text(CONFIG.format(model=model_dir, out=tmp_path / "never-written"))
    assert main(["signal", str(run), "--prompts", "4", "--show", "24"]) == 0
    out, err = capsys.readouterr()
    texts = [eval(line[4:]) for line in out.splitlines() if line.startswith("--- ")]  # noqa: S307 (repr of str)
    assert len(texts) == 24
    digits = reward("integer_format")(texts)
    groups = [digits[i:i + 6] for i in range(0, 24, 6)]
    varied = sum(len(set(g)) > 1 for g in groups) / 4
    row = re.search(r"^digits\s+(\S+)\s+(\S+)%\s+(\S+)%", out, re.M)
    assert row is not None, out
    assert float(row[1]) == pytest.approx(sum(digits) / 24, abs=1e-3)
    assert float(row[3]) == pytest.approx(100 * varied, abs=0.1)
    assert re.search(r"^tags\s+0\.000\s+0\.0%\s+0\.0%", out, re.M)  # the tiny model never writes the tags
    assert "warning: tags took the same value across every group" in err
    assert not (tmp_path / "never-written").exists()


def test_grpo_signal_exits_1_when_no_reward_varies(model_dir: Path, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run.toml"
    run.write_text(CONFIG.format(model=model_dir, out=tmp_path / "out").split("[rewards.digits]")[0]
                   + '[rewards.tags]\nuse = "strict_format"\n')
    assert main(["signal", str(run), "--prompts", "2"]) == 1
    assert "warning: tags took the same value" in capsys.readouterr().err


@pytest.mark.parametrize("args", [["--prompts", "0"], ["--show", "-1"], ["--prompts", "many"]])
def test_grpo_signal_refuses_bad_counts_before_loading_anything(args: list[str], tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["signal", str(tmp_path / "absent.toml"), *args])
    assert exit_info.value.code == 2
    assert "expected a whole number >= " in capsys.readouterr().err
