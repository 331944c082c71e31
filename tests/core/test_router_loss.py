"""``[grpo] router_aux_loss_coef`` (TRL's name): on a dense model a non-zero value is refused, one line naming the
key, where TRL 1.16's ``GRPOTrainer`` raises on the same model; on an MoE model the grpo_core trainer, which does not
add the load-balancing loss, refuses a non-zero value and takes 0, where TRL adds the loss."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
trl = pytest.importorskip("trl")
pytest.importorskip("datasets")


@pytest.fixture(scope="module")
def moe_model_dir(tmp_path_factory, arithmetic_model_dir):
    from transformers import AutoTokenizer, MixtralConfig, MixtralForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(arithmetic_model_dir)
    torch.manual_seed(0)
    config = MixtralConfig(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                           num_attention_heads=2, num_key_value_heads=1, num_local_experts=2, num_experts_per_tok=1,
                           max_position_embeddings=64, pad_token_id=tokenizer.pad_token_id,
                           eos_token_id=tokenizer.eos_token_id, bos_token_id=tokenizer.bos_token_id)
    path = tmp_path_factory.mktemp("moe")
    MixtralForCausalLM(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def _ours(model_dir, tmp_path, coef):
    from grpo_core import Trainer, config_from_dict

    return Trainer(config_from_dict({
        "model": {"name_or_path": str(model_dir), "dtype": "float32", "gradient_checkpointing": False},
        "data": {"source": "demo:arithmetic?max_operand=9", "answer_field": "answer", "chat_template": False},
        "generation": {"num_generations": 2, "max_completion_length": 4},
        "grpo": {"prompts_per_step": 1, "max_steps": 1, "router_aux_loss_coef": coef},
        "logging": {"output_dir": str(tmp_path / "run"), "progress": False, "plot": False},
        "rewards": {"correct": {"use": "exact_match"}},
    }))


def _trl(model_dir, tmp_path, coef):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    args = GRPOConfig(output_dir=str(tmp_path / "trl"), per_device_train_batch_size=2, num_generations=2,
                      use_cpu=True, report_to=[], router_aux_loss_coef=coef, max_completion_length=4)
    return GRPOTrainer(model=str(model_dir), reward_funcs=[lambda completions, **kw: [0.0] * len(completions)],
                       args=args, train_dataset=Dataset.from_dict({"prompt": ["1+2="]}))


def test_a_dense_model_is_refused_where_trl_raises(arithmetic_model_dir, tmp_path):
    from grpo_rewards.errors import ConfigError

    with pytest.raises(ValueError, match="is not a Mixture-of-Experts model"):
        _trl(arithmetic_model_dir, tmp_path, 0.01)
    with pytest.raises(ConfigError, match=r"grpo\.router_aux_loss_coef: is 0\.01 but \w+ is not a "
                                          r"Mixture-of-Experts model") as info:
        _ours(arithmetic_model_dir, tmp_path, 0.01)
    assert len(str(info.value).splitlines()) == 1


def test_an_moe_model_takes_zero_and_refuses_a_loss_it_does_not_add(moe_model_dir, tmp_path):
    from grpo_rewards.errors import ConfigError

    assert _trl(moe_model_dir, tmp_path, 0.01).aux_loss_enabled  # TRL adds it
    with pytest.raises(ConfigError, match=r"grpo\.router_aux_loss_coef: the grpo_core trainer does not add "
                                          r"MixtralForCausalLM's load-balancing loss"):
        _ours(moe_model_dir, tmp_path, 0.01)
    assert _ours(moe_model_dir, tmp_path, 0.0).model is not None  # 0: trains without it, as TRL does with 0
