"""Periodic held-out evaluation inside the loop (``logging.eval_every``): greedy completions of the held-out
rows scored by the run's own rewards, logged as ``eval/...`` at the chosen steps and the last one, and
leaving the training itself untouched (greedy decoding draws no random numbers)."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def model_dir(arithmetic_model_dir):
    return arithmetic_model_dir  # the demo's tiny model (tests/core/conftest.py), built once per session


def _run(model_dir, out, **logging):
    from grpo_core import Trainer, config_from_dict

    cfg = config_from_dict({
        "model": {"name_or_path": str(model_dir), "dtype": "float32"},
        "data": {"source": "demo:arithmetic?max_operand=9", "answer_field": "answer", "chat_template": False,
                 "eval_size": 6},
        "generation": {"num_generations": 4, "max_completion_length": 6},
        "grpo": {"learning_rate": 1e-2, "prompts_per_step": 2, "max_steps": 5},
        "logging": {"output_dir": str(out), "progress": False, "plot": False, **logging},
        "rewards": {"correct": {"use": "exact_match"}, "digits": {"use": "integer_format", "value": 0.25}},
    })
    trainer = Trainer(cfg)
    trainer.train()
    return trainer, [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def test_eval_every_logs_held_out_rewards_without_changing_training(model_dir, tmp_path):
    trainer, with_eval = _run(model_dir, tmp_path / "eval", eval_every=2)
    _, without = _run(model_dir, tmp_path / "plain")
    assert len(trainer.eval_rows) == 6
    evaluated = [row["step"] for row in with_eval if "eval/reward/mean" in row]
    assert evaluated == [2, 4, 5]  # every 2 steps, and the last step
    for row in with_eval:
        if "eval/reward/mean" in row:
            assert 0.0 <= row["eval/rewards/correct"] <= 1.0 and 0.0 <= row["eval/rewards/digits"] <= 0.25
            assert row["eval/reward/mean"] == pytest.approx(row["eval/rewards/correct"] + row["eval/rewards/digits"])
            assert 1 <= row["eval/completion_length/mean"] <= 6
    # the training numbers are those of the run without evaluation
    for a, b in zip(with_eval, without, strict=True):
        for key in ("loss", "reward/mean", "grad_norm", "completion_length/mean"):
            assert a[key] == b[key], (a["step"], key)


def test_eval_scores_the_greedy_completions(model_dir, tmp_path):
    """The logged figures are the rewards of the policy's own greedy completions of the held-out prompts."""
    from grpo_rewards import reward

    trainer, rows = _run(model_dir, tmp_path / "final", eval_every=5)
    greedy = trainer.backend.generate(trainer.eval_prompts, 1, greedy=True).completions_text
    correct = reward("exact_match")(greedy, answer=[r["answer"] for r in trainer.eval_rows])
    assert rows[-1]["eval/rewards/correct"] == pytest.approx(sum(correct) / len(correct))


def test_eval_every_without_held_out_rows_is_a_config_error(model_dir):
    from grpo_core import config_from_dict
    from grpo_core.config import ConfigError

    with pytest.raises(ConfigError, match="logging.eval_every: needs held-out rows"):
        config_from_dict({"model": {"name_or_path": str(model_dir)}, "data": {"source": "demo:arithmetic"},
                          "logging": {"eval_every": 10}, "rewards": {"c": {"use": "exact_match"}}})


def test_eval_on_start_logs_the_untrained_policy_as_step_zero(model_dir, tmp_path):
    """``eval_on_start``: one more evaluation before the first update, logged as step 0; it is the greedy score
    of the policy as loaded, and the training numbers stay those of a run without it."""
    from grpo_core import Trainer
    from grpo_rewards import reward

    trainer, rows = _run(model_dir, tmp_path / "start", eval_every=5, eval_on_start=True)
    _, without = _run(model_dir, tmp_path / "plain")
    assert rows[0]["step"] == 0 and "loss" not in rows[0]
    assert [row["step"] for row in rows if "eval/reward/mean" in row] == [0, 5]
    untrained = Trainer(trainer.cfg)  # the same config, nothing trained: its greedy completions are step 0's
    greedy = untrained.backend.generate(untrained.eval_prompts, 1, greedy=True).completions_text
    correct = reward("exact_match")(greedy, answer=[r["answer"] for r in untrained.eval_rows])
    assert rows[0]["eval/rewards/correct"] == pytest.approx(sum(correct) / len(correct))
    for a, b in zip(rows[1:], without, strict=True):
        assert (a["loss"], a["reward/mean"]) == (b["loss"], b["reward/mean"])


def test_eval_on_start_without_held_out_rows_is_a_config_error(model_dir):
    from grpo_core import config_from_dict
    from grpo_core.config import ConfigError

    with pytest.raises(ConfigError, match="logging.eval_on_start: needs held-out rows"):
        config_from_dict({"model": {"name_or_path": str(model_dir)}, "data": {"source": "demo:arithmetic"},
                          "logging": {"eval_on_start": True}, "rewards": {"c": {"use": "exact_match"}}})


def test_num_generations_eval_scores_a_sampled_group_per_row_without_touching_the_generators(model_dir, tmp_path):
    """TRL's ``num_generations_eval``: every held-out row gets a group of that many sampled completions, all of
    them scored and averaged; sampling them draws from a copy of the generators' state, so the training run
    draws what it would have drawn without evaluating."""
    from grpo_core import Trainer, config_from_dict

    trainer = Trainer(config_from_dict({
        "model": {"name_or_path": str(model_dir), "dtype": "float32"},
        "data": {"source": "demo:arithmetic?max_operand=9", "answer_field": "answer", "chat_template": False,
                 "eval_size": 6},
        "generation": {"num_generations": 4, "max_completion_length": 6, "num_generations_eval": 3},
        "grpo": {"prompts_per_step": 2, "max_steps": 1},
        "logging": {"output_dir": str(tmp_path / "run"), "progress": False, "plot": False, "eval_every": 1},
        "rewards": {"correct": {"use": "exact_match"}, "digits": {"use": "integer_format", "value": 0.25}},
    }))
    calls, totals = [], []
    generate, score = trainer.backend.generate, trainer._score

    def recording_generate(prompts, k, **kwargs):
        calls.append((len(prompts), k, kwargs.get("greedy", False)))
        return generate(prompts, k, **kwargs)

    def recording_score(rows, batch, k=None):
        assert len(batch.completions_text) == 3 * len(rows) and k == 3
        total, columns = score(rows, batch, k)
        totals.extend(total.tolist())
        return total, columns

    trainer.backend.generate, trainer._score = recording_generate, recording_score
    state = torch.get_rng_state()
    metrics = trainer._evaluate()
    assert torch.equal(torch.get_rng_state(), state)  # the training run's draws are untouched
    assert {k for _, k, _ in calls} == {3} and not any(greedy for _, _, greedy in calls)  # sampled groups of 3
    assert sum(n for n, _, _ in calls) == 6 and len(totals) == 18  # every held-out row, 3 completions each
    assert metrics["eval/reward/mean"] == pytest.approx(sum(totals) / len(totals))
