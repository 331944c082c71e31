"""A short variant of ``grpo demo`` runs end to end (tiny model built on the spot, warm-up, GRPO with
the quickstart's composed built-in rewards) and learns: the mean reward rises."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")


def test_short_demo_learns(tmp_path):
    from grpo_core.demo.run import DemoSettings, run_demo

    overrides = [
        'data.source="demo:arithmetic?max_operand=19"', "data.eval_size=50",
        "grpo.max_steps=40", "grpo.prompts_per_step=8", "grpo.learning_rate=3e-3",
        "logging.progress=false", "logging.plot=false",
    ]
    # a short warm-up that stops before the target: the model writes the format, badly
    settings = DemoSettings(hidden=32, warmup_max_steps=30, warmup_check_every=30, warmup_target=1.0,
                            warmup_batch_size=16, warmup_probe_size=20)
    result = run_demo(overrides=overrides, output_dir=str(tmp_path), threads=1, settings=settings)
    metrics = [json.loads(line) for line in (tmp_path / "grpo" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == list(range(1, 41))
    rewards = [m["reward/mean"] for m in metrics]
    first, last = sum(rewards[:8]) / 8, sum(rewards[-8:]) / 8
    assert last > first + 0.08, rewards  # measured here: about +0.13 (format and integer rewards)
    assert result["warmup_steps"] == 30 and result["eval_size"] == 50
    saved = json.loads((tmp_path / "grpo" / "demo_result.json").read_text())
    assert saved["grpo_steps"] == 40 and 0.0 <= saved["accuracy_after"] <= 1.0
    # the supervised control trained as long as GRPO did, from the same warm checkpoint
    control = saved["control"]
    assert control["steps"] >= 10 and control["seconds"] >= 0.9 * saved["grpo_seconds"]
    assert 0.0 <= control["accuracy"] <= 1.0


def test_demo_measures_on_test_and_its_run_evaluates_on_validation():
    from grpo_core.config import load_config
    from grpo_core.demo.run import QUICKSTART
    from grpo_core.demo.task import make_split

    cfg = load_config(str(QUICKSTART))
    assert cfg.data.eval_split == "validation"  # what the run watches (and settings are tuned on)
    held_out = {r["prompt"] for r in make_split("test")}
    assert not held_out & {r["prompt"] for r in make_split("validation")}
