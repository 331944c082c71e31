"""grpo_core.run_folder.metrics / plotting: JSONL metrics and samples, resume truncation, curves PNG, grpo plot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from grpo_core.config import LoggingConfig
from grpo_core.run_folder.checkpoints import RunFolderError
from grpo_core.run_folder.metrics import MetricsLogger, peak_memory_gb, read_jsonl
from grpo_core.run_folder.plotting import metric_series, plot_run
from grpo_rewards.errors import UserError


def step_metrics(step: int) -> dict:
    return {"reward/mean": 0.1 * step, "reward/std": torch.tensor(0.5), "rewards/correct/mean": step % 2,
            "kl": float("nan") if step == 2 else 0.01 * step, "tokens_per_s": 100.0 + step}


def test_metrics_jsonl_every_and_clean_values(tmp_path: Path) -> None:
    cfg = LoggingConfig(log_every=2, progress=True, plot=False)
    with MetricsLogger(tmp_path, cfg, total_steps=5) as logger:
        for step in range(1, 6):
            logger.log(step, step_metrics(step))
    records = read_jsonl(tmp_path / "metrics.jsonl")
    assert [r["step"] for r in records] == [2, 4, 5]  # every 2 steps, and the last one
    assert records[0]["kl"] is None  # NaN is not valid JSON
    assert records[1]["reward/std"] == 0.5 and records[1]["rewards/correct/mean"] == 0
    assert records[2]["reward/mean"] == pytest.approx(0.5)
    assert not (tmp_path / "curves.png").exists()


def test_samples_every_n_steps_capped(tmp_path: Path) -> None:
    cfg = LoggingConfig(sample_every=3, num_samples=2, progress=True, plot=False)
    logger = MetricsLogger(tmp_path, cfg, total_steps=6)
    rows = [{"prompt": f"p{i}", "completion": f"c{i}", "correct": 1.0, "fmt": None, "total": 1.0} for i in range(5)]
    for step in range(1, 7):
        assert logger.should_sample(step) == (step % 3 == 0)
        logger.log_samples(step, rows)
    logger.close()
    samples = read_jsonl(tmp_path / "samples.jsonl")
    assert [(s["step"], s["prompt"]) for s in samples] == [(3, "p0"), (3, "p1"), (6, "p0"), (6, "p1")]
    assert samples[0]["fmt"] is None and samples[0]["completion"] == "c0"


def test_resume_drops_lines_after_the_checkpoint(tmp_path: Path) -> None:
    cfg = LoggingConfig(progress=False, plot=False, sample_every=1)
    logger = MetricsLogger(tmp_path, cfg)
    for step in range(1, 6):
        logger.log(step, {"reward/mean": step})
        logger.log_samples(step, [{"completion": str(step)}])
    logger.close()
    with open(tmp_path / "metrics.jsonl", "a") as fh:
        fh.write('{"step": 6, "rew')  # killed mid-write
    logger = MetricsLogger(tmp_path, cfg, start_step=3)
    logger.log(4, {"reward/mean": 40})
    logger.close()
    assert [(r["step"], r["reward/mean"]) for r in read_jsonl(tmp_path / "metrics.jsonl")] == [(1, 1), (2, 2), (3, 3), (4, 40)]
    assert [r["step"] for r in read_jsonl(tmp_path / "samples.jsonl")] == [1, 2, 3]
    before = (tmp_path / "metrics.jsonl").read_bytes()
    with pytest.raises(RunFolderError, match=r"holds an earlier run \(metrics.jsonl, samples.jsonl\): continue it "
                                             r"with --resume, replace it with --overwrite"):
        MetricsLogger(tmp_path, cfg)  # a fresh run (start_step 0) never truncates an earlier run's records
    assert (tmp_path / "metrics.jsonl").read_bytes() == before
    MetricsLogger(tmp_path, cfg, overwrite=True).close()  # asked for: the files start over
    assert read_jsonl(tmp_path / "metrics.jsonl") == []


def test_close_draws_curves_png(tmp_path: Path) -> None:
    from PIL import Image

    with MetricsLogger(tmp_path, LoggingConfig(progress=False)) as logger:
        for step in range(1, 11):
            logger.log(step, step_metrics(step))
    png = tmp_path / "curves.png"
    assert png.exists()
    with Image.open(png) as img:
        assert img.format == "PNG" and img.width > 600 and img.height > 200
        colors = img.convert("RGB").getcolors(maxcolors=1 << 20)
        assert len(colors) > 10  # actually drawn, not blank


def test_metric_series_skips_nulls_and_text(tmp_path: Path) -> None:
    records = [{"step": 1, "time": 5.0, "kl": None, "reward/mean": 1, "note": "x", "flag": True},
               {"step": 2, "time": 6.0, "kl": 0.2, "reward/mean": 2}]
    assert metric_series(records) == {"reward/mean": ([1, 2], [1.0, 2.0]), "kl": ([2], [0.2])}
    with pytest.raises(UserError, match="no metrics.jsonl: not a run folder"):
        plot_run(tmp_path)
    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "note": "x"}\n')
    with pytest.raises(UserError, match=r"metrics.jsonl: no metrics to plot \(1 records, 0 bad lines\)"):
        plot_run(tmp_path)


def test_grpo_plot_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from grpo_rewards.command_line import main

    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps({"step": s, "reward/mean": s * s}) + "\n" for s in range(5)))
    assert main(["plot", str(tmp_path), "--out", str(tmp_path / "c.png")]) == 0
    assert (tmp_path / "c.png").stat().st_size > 5000
    assert str(tmp_path / "c.png") in capsys.readouterr().out
    assert main(["plot", str(tmp_path / "missing")]) == 2
    assert f"{tmp_path / 'missing'}: folder not found" in capsys.readouterr().err


def test_plot_never_writes_over_its_input_and_reports_bad_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from grpo_rewards.command_line import main

    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text('{"step": 1, "kl": 0.5}\n[1, 2]\ngarbage\n{"step": 2, "kl": 0.25}\n{"step": 3, "k')
    before = metrics.read_bytes()
    assert main(["plot", str(tmp_path), "--out", str(metrics)]) == 2
    assert "--out: " in capsys.readouterr().err and metrics.read_bytes() == before
    assert main(["plot", str(tmp_path), "--out", str(tmp_path / "curves.jsonl")]) == 2
    assert "the plot is a PNG; name a .png file" in capsys.readouterr().err
    assert main(["plot", str(tmp_path)]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err == [f"warning: {metrics}:2: not a JSON object (list); line skipped",
                   f"warning: {metrics}:3: invalid JSON; line skipped"]  # the torn last line is not a problem
    assert metrics.read_bytes() == before and (tmp_path / "curves.png").stat().st_size > 1000


def test_peak_memory_is_positive() -> None:
    assert 0.01 < peak_memory_gb() < 1024


def test_render_sample_shows_scores_prompt_end_and_completion() -> None:
    from rich.console import Console

    from grpo_core.run_folder.metrics import render_sample

    console = Console(width=120, record=True)
    row = {"prompt": "x" * 300 + " How many [clips]?", "completion": "<answer>72</answer>", "answer": "#### 72",
           "correct": 2.0, "fmt": None, "total": 2.0}
    console.print(render_sample(4, 1, row))
    text = console.export_text()
    assert "step 4 sample 1: correct=2  fmt=None  total=2" in text
    assert "How many [clips]?" in text and "<answer>72</answer>" in text and "#### 72" in text
    assert text.count("x") < 200  # only the end of a long prompt


def test_held_state_counts_the_parameters_and_the_optimizers_own_tensors() -> None:
    import torch

    from grpo_core.run_folder.metrics import held_state_gb

    model = torch.nn.Linear(64, 32)  # 64*32 + 32 = 2080 fp32 numbers
    optimizer = torch.optim.AdamW(model.parameters())
    assert held_state_gb(model, optimizer) == (2080 * 4 / 2**30, 0.0)  # no state before the first step
    model(torch.ones(2, 64)).sum().backward()
    optimizer.step()
    params, state = held_state_gb(model, optimizer)
    steps = sum(s["step"].numel() * s["step"].element_size() for s in optimizer.state.values())
    assert params == 2080 * 4 / 2**30 and state == (2 * 2080 * 4 + steps) / 2**30  # AdamW's two moments

    class Wrapper:  # an optimizer stepping weights of its own (an fp32 copy), as DeepSpeed's ZeRO wraps one
        def __init__(self) -> None:
            self.copy = [p.detach().clone().requires_grad_() for p in model.parameters()]
            self.optimizer = torch.optim.SGD(self.copy, lr=0.1)

    assert held_state_gb(model, Wrapper()) == (params, 2080 * 4 / 2**30)
