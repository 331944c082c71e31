"""``[model] cast_lm_head_to_fp32`` (TRL's name): a 16-bit model's LM head in float32. Through the trainer (LoRA on a
bfloat16 model): the head is float32, the rest stays bfloat16, generation runs, and the training log-probs are
those of a float32 head on the backbone's hidden states (``log_softmax(float(h) @ W^T)``), which the bfloat16 head
misses by its rounding; a LoRA adapter on the head is refused, one line naming the key, as TRL refuses it."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from grpo_core.policy.logprobs import completion_logprobs  # noqa: E402


def _config(model_dir, tmp_path, **lora):
    from grpo_core import config_from_dict

    return config_from_dict({
        "model": {"name_or_path": str(model_dir), "dtype": "bfloat16", "gradient_checkpointing": False,
                  "cast_lm_head_to_fp32": True},
        "data": {"source": "demo:arithmetic?max_operand=9", "answer_field": "answer", "chat_template": False},
        "generation": {"num_generations": 2, "max_completion_length": 6},
        "grpo": {"prompts_per_step": 2, "max_steps": 1},
        "lora": {"enabled": True, "r": 4, "alpha": 8, **lora},
        "logging": {"output_dir": str(tmp_path / "run"), "progress": False, "plot": False},
        "rewards": {"correct": {"use": "exact_match"}},
    })


def _fp32_reference(model, input_ids, attention_mask, k):
    """log p of the last ``k`` tokens from float32 logits of the backbone's hidden states (no temperature)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    with torch.no_grad():
        hidden = base.base_model(input_ids=input_ids, attention_mask=attention_mask,
                                 position_ids=(attention_mask.cumsum(1) - 1).clamp(min=0)).last_hidden_state
        logits = hidden[:, -(k + 1) : -1].float() @ base.get_output_embeddings().weight.float().t()
    return logits.log_softmax(-1).gather(-1, input_ids[:, -k:, None]).squeeze(-1)


def test_the_head_runs_in_float32(arithmetic_model_dir, tmp_path):
    from transformers import AutoModelForCausalLM

    from grpo_core import Trainer
    from grpo_core.policy.fp32_head import cast_head_to_fp32

    trainer = Trainer(_config(arithmetic_model_dir, tmp_path))
    base = trainer.model.get_base_model()
    assert base.get_output_embeddings().weight.dtype == torch.float32
    assert base.model.layers[0].mlp.up_proj.base_layer.weight.dtype == torch.bfloat16  # the rest stays 16-bit
    torch.manual_seed(0)
    batch = trainer.backend.generate([trainer.prompts[0], trainer.prompts[1]], 2)  # generation through the head
    input_ids = torch.cat([batch.prompt_ids, batch.completion_ids], 1)
    attention_mask = torch.cat([batch.prompt_mask, batch.completion_mask], 1)
    k = batch.completion_ids.size(1)
    with torch.no_grad():
        ours, _ = completion_logprobs(trainer.model, input_ids, attention_mask, k)
    expected = _fp32_reference(trainer.model, input_ids, attention_mask, k)
    torch.testing.assert_close(ours, expected, rtol=0, atol=1e-5)

    plain = AutoModelForCausalLM.from_pretrained(arithmetic_model_dir, dtype=torch.bfloat16)  # same weights, B = 0
    with torch.no_grad():
        rounded, _ = completion_logprobs(plain, input_ids, attention_mask, k)
        assert (rounded.float() - expected).abs().max() > 1e-3  # what the bfloat16 head loses
        cast_head_to_fp32(plain)
        cast, _ = completion_logprobs(plain, input_ids, attention_mask, k)
    torch.testing.assert_close(cast, expected, rtol=0, atol=1e-5)


def test_a_lora_adapter_on_the_head_is_refused(arithmetic_model_dir, tmp_path):
    from grpo_rewards.tomlfile import ConfigError

    with pytest.raises(ConfigError, match="model.cast_lm_head_to_fp32: is not supported with a LoRA adapter on "
                                          "the head") as info:
        _config(arithmetic_model_dir, tmp_path, target_modules=["q_proj", "lm_head"])
    assert len(str(info.value).splitlines()) == 1
