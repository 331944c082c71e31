"""grpo_core.run_folder.progress: a readable line per logged step when stdout is not a terminal (a pipe: a cluster
job, nohup), and a live display legible in an 80-column terminal, with the step in progress shown."""

from __future__ import annotations

import io
import json
import re
import subprocess
import textwrap
from pathlib import Path

import pytest

from grpo_core.config import LoggingConfig
from grpo_core.run_folder.metrics import MetricsLogger
from tests.core import test_cli_train as cli


def test_a_run_with_stdout_a_pipe_prints_one_readable_line_per_logged_step(tiny_model_dir: Path,
                                                                            tmp_path: Path) -> None:
    (tmp_path / "stop_plugin.py").write_text(textwrap.dedent(cli.PLUGIN))
    (tmp_path / "runner.py").write_text(textwrap.dedent(cli.RUNNER))
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"question": f"What is {i} plus {i}?", "answer": str(2 * i)}) + "\n"
                            for i in range(5)))
    config = cli.CONFIG.format(model=tiny_model_dir, rows=rows).replace("progress = false", "progress = true")
    (tmp_path / "run.toml").write_text(config.replace("max_steps = 6", "max_steps = 4"))
    cmd, env = cli.grpo_cmd(tmp_path, tmp_path / "run", "--set", "logging.log_every=2",
                            "--set", "logging.num_samples=0")
    env["COLUMNS"] = "80"
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [line for line in proc.stdout.splitlines() if line.startswith("step ")]
    assert [line.split()[1] for line in lines] == ["2/4", "4/4"], proc.stdout
    for line in lines:
        fields = dict(re.findall(r"(\S+?)=(\S+)", line))
        assert {"reward", "kl", "length", "step_time", "tokens/s", "elapsed"} <= set(fields), line
        float(fields["reward"])
        assert "…" not in line
    assert "━" not in proc.stdout and "\x1b[" not in proc.stdout  # no bar drawn into a file


def _metrics(step: int) -> dict:
    return {"reward/mean": 0.25 * step, "kl": 0.001 * step, "completion_length/mean": 41.5, "step_time": 91.2,
            "tokens_per_s": 310.0, "loss": 0.1}


def test_the_terminal_display_stays_legible_at_80_columns(tmp_path: Path) -> None:
    from rich.console import Console

    screen = Console(file=io.StringIO(), force_terminal=True, width=80, color_system=None)
    logger = MetricsLogger(tmp_path, LoggingConfig(progress=True, plot=False), total_steps=10, console=screen)
    try:
        for step in (1, 2, 3):
            logger.log(step, _metrics(step))
        logger.phase("step 4: generating 8 prompts x 4, scoring")
        shot = Console(file=io.StringIO(), width=80, color_system=None, record=True)
        shot.print(logger._progress)
        text = shot.export_text()
    finally:
        logger.close()
    lines = text.splitlines()
    assert all(len(line) <= 80 for line in lines)
    assert lines[0].startswith("GRPO ") and "3/10" in lines[0] and "left" in lines[0], text
    assert "step 4: generating 8 prompts x 4, scoring ... 0:00:0" in text
    shown = " ".join(lines[2:])
    for part in ("reward=0.75", "kl=0.003", "length=41.5", "step_time=91.2s", "tokens/s=310"):
        assert part in shown, text
    assert "…" not in text


def test_a_narrow_terminal_folds_the_numbers_instead_of_cutting_them(tmp_path: Path) -> None:
    from rich.console import Console

    screen = Console(file=io.StringIO(), force_terminal=True, width=40, color_system=None)
    logger = MetricsLogger(tmp_path, LoggingConfig(progress=True, plot=False), total_steps=10, console=screen)
    logger.log(3, _metrics(3))
    shot = Console(file=io.StringIO(), width=40, color_system=None, record=True)
    shot.print(logger._progress)
    logger.close()
    text = shot.export_text()
    assert text.startswith("GRPO") and "3/10" in text
    assert "tokens/s=310" in text.replace("\n", "")


@pytest.mark.parametrize("progress", [True, False])
def test_progress_false_prints_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str], progress: bool) -> None:
    with MetricsLogger(tmp_path, LoggingConfig(progress=progress, plot=False), total_steps=2) as logger:
        logger.log(1, _metrics(1))
        logger.log(2, _metrics(2))
    out = capsys.readouterr().out
    assert (out.count("step ") == 2) == progress, out
