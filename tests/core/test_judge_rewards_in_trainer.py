"""Group rewards and judges in our trainer: a tiny model trains a step with ``majority_vote`` and an
``llm_judge`` (a scripted local endpoint) composed from a rewards table, scoring during generation as by default.
Each group's ``majority_vote`` in the samples is what the group scores alone, and the judge's throughput and
parse-failure rate reach metrics.jsonl."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")


def test_a_group_reward_and_a_judge_in_a_training_run(tmp_path):
    from grpo_core import Trainer, config_from_dict
    from grpo_core.demo.task import completion, make_split
    from grpo_core.demo.tiny import TinySpec, build_tiny_model
    from grpo_rewards import reward
    from grpo_rewards.judges import prompt as judge_prompt
    from grpo_rewards.judges.scripted import ScriptedEndpoint

    def digits(body):  # an honest scripted judge: more digits, a better score; an empty completion: no verdict
        text = judge_prompt.spans(body["messages"][-1]["content"])[0]
        if not text.strip():
            return 200, "nothing to judge"
        return 200, json.dumps({"score": min(10, sum(ch.isdigit() for ch in text))})

    rows = make_split("train", max_operand=9, size=30)
    model_dir = build_tiny_model(tmp_path / "m", [r["prompt"] + completion(r) for r in rows],
                                 TinySpec(hidden=16, intermediate=32))
    with ScriptedEndpoint(digits) as endpoint:
        cfg = config_from_dict({
            "model": {"name_or_path": str(model_dir), "dtype": "float32", "gradient_checkpointing": False},
            "data": {"source": "demo:arithmetic?max_operand=9", "answer_field": "answer", "chat_template": False},
            "generation": {"num_generations": 4, "max_completion_length": 6},
            "grpo": {"learning_rate": 1e-3, "prompts_per_step": 2, "max_steps": 1},
            "logging": {"output_dir": str(tmp_path / "run"), "progress": False, "plot": False},
            "rewards": {"vote": {"use": "majority_vote", "min_group": 1, "extract": "last_number"},
                        "judge": {"use": "llm_judge", "model": "scripted", "base_url": endpoint.base_url,
                                  "question": "Is the arithmetic right?", "weight": 0.5},
                        "correct": {"use": "exact_match", "weight": 2.0, "extract": "last_number"}},
        })
        summary = Trainer(cfg).train()
        assert summary["step"] == 1 and len(endpoint.requests) > 0
    lines = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    last = lines[-1]
    assert last["rewards/judge/judgements"] == len(endpoint.requests) and last["rewards/judge/judgements_per_s"] > 0
    assert 0.0 <= last["rewards/judge/parse_failure_rate"] <= 1.0 and last["rewards/vote/failures"] == 0
    samples = [json.loads(line) for line in (tmp_path / "run" / "samples.jsonl").read_text().splitlines()]
    vote = reward("majority_vote", min_group=1, extract="last_number")
    by_step: dict[tuple, list] = {}
    for s in samples:
        by_step.setdefault((s.get("step"), s["prompt"]), []).append(s)
    for group in by_step.values():
        alone = vote([s["completion"] for s in group], prompts=[s["prompt"] for s in group])
        assert alone == [s["vote"] for s in group]
    print(f"scripted judge on the tiny run: {last['rewards/judge/judgements_per_s']:.1f} judgements/s, "
          f"parse-failure rate {last['rewards/judge/parse_failure_rate']:.2f}")
