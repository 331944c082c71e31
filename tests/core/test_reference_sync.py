"""``[grpo] sync_ref_model``: the KL reference moved towards the policy every ``ref_model_sync_steps`` optimizer
steps, ``ref = alpha * policy + (1 - alpha) * ref``. Through the whole trainer on a tiny model, the reference it
holds after training is what TRL 1.16's own ``SyncRefModelCallback._sync_target_model`` makes of the starting
model and the policy at the sync step (and only that step); refused, one line naming the key, where TRL raises
(beta = 0, LoRA)."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")
trl = pytest.importorskip("trl")


def _config(model_dir, tmp_path, grpo=None, lora=None):
    from grpo_core import config_from_dict

    return config_from_dict({
        "model": {"name_or_path": str(model_dir), "dtype": "float32", "gradient_checkpointing": False},
        "data": {"source": "demo:arithmetic?max_operand=9", "answer_field": "answer", "chat_template": False},
        "generation": {"num_generations": 4, "max_completion_length": 6},
        "grpo": {"learning_rate": 1e-2, "prompts_per_step": 2, "max_steps": 2, "beta": 0.04, "sync_ref_model": True,
                 "ref_model_mixup_alpha": 0.3, "ref_model_sync_steps": 2, **(grpo or {})},
        "lora": lora or {},
        "logging": {"output_dir": str(tmp_path / "run"), "progress": False, "plot": False},
        "checkpoint": {"every_minutes": 0},
        "rewards": {"correct": {"use": "exact_match"}},
    })


def test_the_reference_is_mixed_with_the_policy_every_n_optimizer_steps(arithmetic_model_dir, tmp_path):
    from trl.trainer.callbacks import SyncRefModelCallback

    from grpo_core import Trainer
    from grpo_core.policy.models import reference_model

    trainer = Trainer(_config(arithmetic_model_dir, tmp_path))
    start = copy.deepcopy(trainer.model)
    policies = []  # the policy after each optimizer step, before any sync that step makes
    step = trainer.engine.optimizer_step

    def recording_step():
        norm = step()
        policies.append(copy.deepcopy(trainer.model))
        return norm

    trainer.engine.optimizer_step = recording_step
    trainer.train()
    assert len(policies) == 2
    expected = copy.deepcopy(start)  # TRL's callback at global steps 1, 2 with ref_model_sync_steps = 2
    SyncRefModelCallback._sync_target_model(policies[1], expected, 0.3)
    with reference_model(trainer.model, trainer.cfg) as ref:
        held = dict(ref.named_parameters())
        moved = 0
        for name, p in expected.named_parameters():
            torch.testing.assert_close(held[name], p, rtol=0, atol=1e-7, msg=lambda m, n=name: f"{n}: {m}")
            moved += int(not torch.equal(p, dict(start.named_parameters())[name]))
        assert moved >= len(held) // 2  # the reference did move
        # a sync at the first step as well, or instead, would have given another reference
        other = copy.deepcopy(start)
        SyncRefModelCallback._sync_target_model(policies[0], other, 0.3)
        assert any(not torch.allclose(held[n], p, atol=1e-6) for n, p in other.named_parameters())


def test_off_holds_no_hook(arithmetic_model_dir, tmp_path):
    from grpo_core.policy.reference_sync import reference_sync

    assert reference_sync(_config(arithmetic_model_dir, tmp_path, {"sync_ref_model": False}), model=None) is None


@pytest.mark.parametrize(("grpo", "lora", "message"), [
    ({"beta": 0.0}, None, "grpo.sync_ref_model: needs beta > 0"),
    ({}, {"enabled": True}, "grpo.sync_ref_model: is not supported with LoRA"),
])
def test_refused_where_trl_raises(arithmetic_model_dir, tmp_path, grpo, lora, message):
    from grpo_rewards.tomlfile import ConfigError

    with pytest.raises(ConfigError, match=message) as info:
        _config(arithmetic_model_dir, tmp_path, grpo, lora)
    assert len(str(info.value).splitlines()) == 1
