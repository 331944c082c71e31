"""A reward that raises does not stop training: its failures, and numbers a reward reports through
``metrics()`` (the code reward's sandbox error rate), reach metrics.jsonl."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")


class Counting:
    """A reward with its own ``metrics()``, like the sandbox's code reward."""

    __name__ = "counting"

    def __init__(self):
        self.calls = 0

    def __call__(self, completions, **kw):
        self.calls += 1
        return [1.0] * len(completions)

    def metrics(self):
        return {"calls": self.calls, "label": "not a number", "flag": True}


def test_failing_and_reporting_rewards_show_up_in_metrics(tmp_path):
    from grpo_core import Trainer, config_from_dict
    from grpo_core.demo.task import completion, make_split
    from grpo_core.demo.tiny import TinySpec, build_tiny_model
    from grpo_rewards import compose

    rows = make_split("train", max_operand=9, size=30)
    model_dir = build_tiny_model(tmp_path / "m", [r["prompt"] + completion(r) for r in rows], TinySpec(hidden=16, intermediate=32))

    def broken(completions, **kw):
        raise RuntimeError("verifier crashed")

    counting = Counting()
    cfg = config_from_dict({
        "model": {"name_or_path": str(model_dir), "dtype": "float32", "gradient_checkpointing": False},
        "data": {"source": "demo:arithmetic?max_operand=9", "answer_field": "answer", "chat_template": False},
        "generation": {"num_generations": 2, "max_completion_length": 4},
        "grpo": {"learning_rate": 1e-3, "prompts_per_step": 2, "max_steps": 2,
                 "multi_objective_aggregation": "normalize_then_sum"},  # and per-reward advantages
        "logging": {"output_dir": str(tmp_path / "run"), "progress": False, "plot": False},
        "rewards": compose({"broken": broken, "counting": counting}),
    })
    summary = Trainer(cfg).train()
    assert summary["step"] == 2
    lines = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [m["rewards/broken/failures"] for m in lines] == [1, 2]
    assert [m["rewards/counting/calls"] for m in lines] == [1, 2]
    assert "rewards/counting/label" not in lines[0] and "rewards/counting/flag" not in lines[0]
    assert lines[0]["rewards/counting/failures"] == 0
    assert lines[0]["frac_unscored"] == 0.0  # the broken reward's None is left out of each row's sum


def test_an_unknown_aggregation_rule_is_a_one_line_config_error():
    from grpo_core import config_from_dict
    from grpo_rewards import ConfigError, compose

    with pytest.raises(ConfigError) as err:
        config_from_dict({"model": {"name_or_path": "m"}, "data": {"source": "demo:arithmetic"},
                          "grpo": {"multi_objective_aggregation": "sum"},
                          "rewards": compose({"a": Counting()})})
    assert [line for line in str(err.value).splitlines() if "multi_objective_aggregation" in line] == [
        "<dict>: grpo.multi_objective_aggregation: must be one of sum_then_normalize, normalize_then_sum, got 'sum'"]
