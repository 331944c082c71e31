"""Our rewards drive TRL's GRPOTrainer unchanged: built-ins, a composed TOML config, and its weights."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("trl")

REWARDS_TOML = """
[rewards.correct]
use = "exact_match"
weight = 1.0

[rewards.tags]
use = "xml_count"
weight = 0.5
"""


def test_composed_rewards_run_inside_trl_grpo_trainer(tiny_model_dir, tmp_path):
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from grpo_rewards import load_rewards, reward

    config = tmp_path / "rewards.toml"
    config.write_text(REWARDS_TOML)
    composed = load_rewards(str(config))
    funcs, weights = composed.trl_reward_funcs()

    seen: dict[str, list] = {}

    def spy(fn):
        def wrapped(completions, **kwargs):
            out = fn(completions, **kwargs)
            seen.setdefault(fn.__name__, []).append((list(completions), list(kwargs["answer"]), out))
            return out

        wrapped.__name__ = fn.__name__
        return wrapped

    # a plain built-in, handed over as is, next to the composed config's functions
    bare = reward("integer_format")
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    data = Dataset.from_list([{"prompt": f"What is {a} plus {b}?", "answer": str(a + b)} for a, b in [(1, 2), (3, 4)]])
    args = GRPOConfig(
        output_dir=str(tmp_path / "trl"),
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=8,
        max_steps=1,
        learning_rate=1e-4,
        report_to="none",
        use_cpu=True,
        bf16=False,
        logging_steps=1,
        save_strategy="no",
        reward_weights=[*weights, 1.0],
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[*(spy(f) for f in funcs), bare],
        args=args,
        train_dataset=data,
        processing_class=tokenizer,
    )
    trainer.train()

    assert set(seen) == {"correct", "tags"}
    for name, calls in seen.items():
        for completions, answers, out in calls:
            assert len(out) == len(completions) == len(answers)
            # TRL passed what our reward needs; scoring again outside TRL gives the same numbers
            again = dict(zip(composed.aliases, funcs))[name](completions, answer=answers)
            assert again == out
    logged = {k for entry in trainer.state.log_history for k in entry}
    assert {"rewards/correct/mean", "rewards/tags/mean", "rewards/integer_format/mean"} <= logged
    assert all(math.isfinite(e["loss"]) for e in trainer.state.log_history if "loss" in e)
