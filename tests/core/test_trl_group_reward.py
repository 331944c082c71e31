"""A group reward (grpo_rewards.group_reward) in ``trl.GRPOTrainer(reward_funcs=[...])``: TRL hands it the
batch with ``prompts``, it finds each prompt's ``num_generations`` completions itself, and ``majority_vote``
scores every group as that group scored alone."""

from __future__ import annotations

import pytest

pytest.importorskip("trl")

NUM_GENERATIONS = 4


def test_group_rewards_run_inside_trl_grpo_trainer(tiny_model_dir, tmp_path):
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from grpo_rewards import group_reward, reward
    from grpo_rewards.group_reward import group_rows

    calls: list[tuple[list, list, list]] = []
    vote = reward("majority_vote", min_group=1)

    def spy_vote(completions, **kwargs):
        out = vote(completions, **kwargs)
        calls.append((list(completions), list(kwargs["prompts"]), out))
        return out

    spy_vote.__name__ = "majority_vote"
    sizes: list[list[float]] = []

    @group_reward
    def group_size(completions, **_):
        return [float(len(completions))] * len(completions)

    def spy_size(completions, **kwargs):
        out = group_size(completions, **kwargs)
        sizes.append(out)
        return out

    spy_size.__name__ = "group_size"
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    data = Dataset.from_list([{"prompt": f"What is {a} plus {b}?"} for a, b in [(1, 2), (3, 4), (5, 6), (7, 8)]])
    args = GRPOConfig(output_dir=str(tmp_path / "trl"), per_device_train_batch_size=8, num_generations=NUM_GENERATIONS,
                      max_completion_length=6, max_steps=1, learning_rate=1e-4, report_to="none", use_cpu=True,
                      bf16=False, logging_steps=1, save_strategy="no")
    trainer = GRPOTrainer(model=model, reward_funcs=[spy_vote, spy_size], args=args, train_dataset=data,
                          processing_class=tokenizer)
    trainer.train()

    assert sizes and all(s == [float(NUM_GENERATIONS)] * len(s) for s in sizes)  # each prompt's whole group
    assert calls
    for completions, prompts, out in calls:
        groups = group_rows(prompts)
        assert len(groups) == len(completions) // NUM_GENERATIONS
        for index in groups:  # a group scores in TRL's batch what it scores alone
            alone = vote([completions[i] for i in index], prompts=[prompts[i] for i in index])
            assert alone == [out[i] for i in index]
            assert all(v in (0.0, 1.0, None) for v in alone)
    logged = [h for h in trainer.state.log_history if "rewards/group_size/mean" in h]
    assert logged and all(h["rewards/group_size/mean"] == NUM_GENERATIONS for h in logged)
