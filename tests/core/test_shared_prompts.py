"""Groups' completions packed behind one copy of their prompt (grpo_core.policy.shared_prompts): the same log-probs and
gradients as the unpacked rows, the cost estimate's choices, the models it refuses, the load check, and one
trainer update with and without it."""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from grpo_core.policy.logprobs import check_shared_prompts, completion_logprobs  # noqa: E402
from grpo_core.policy.shared_prompts import packable, plan  # noqa: E402

P, K = 6, 5


def tiny_llama(impl: str = "sdpa", **config):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=97, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, attn_implementation=impl, **config)
    return LlamaForCausalLM(cfg).float()


def grouped_batch():
    """Two groups of 3: prompts of 6 and 4 real tokens (the second left-padded), completions of 5 columns with
    right padding and, in one row, a masked token inside the completion."""
    torch.manual_seed(1)
    ids = torch.randint(1, 97, (6, P + K))
    mask = torch.ones_like(ids)
    ids[:3, :P] = ids[0, :P]
    ids[3:, :P] = ids[3, :P]
    ids[3:, :2], mask[3:, :2] = 0, 0
    mask[1, -2:] = 0
    mask[4, -1] = 0
    mask[5, -3] = 0
    return ids, mask


def logps_and_grads(model, ids, mask, **kwargs):
    model.zero_grad()
    logps, _ = completion_logprobs(model, ids, mask, K, **kwargs)
    real = mask[:, -K:].bool()
    (logps[real] * torch.linspace(0.5, 1.5, int(real.sum()))).sum().backward()
    return logps.detach()[real], [p.grad.clone() for p in model.parameters() if p.requires_grad]


@pytest.mark.parametrize("impl", ["sdpa", "eager"])
@pytest.mark.parametrize("per_row", [1, 2, 3])
def test_packed_rows_give_the_unpacked_log_probs_and_gradients(impl, per_row):
    model = tiny_llama(impl)
    ids, mask = grouped_batch()
    packing = plan(model, ids, mask, K, per_row=per_row)
    assert packing is not None and packing.input_ids.size(0) == 2 * -(-3 // per_row)
    plain_logps, plain_grads = logps_and_grads(model, ids, mask)
    packed_logps, packed_grads = logps_and_grads(model, ids, mask, share_prompts=True, completions_per_row=per_row)
    torch.testing.assert_close(packed_logps, plain_logps, rtol=0, atol=2e-6)
    assert max(g.abs().max().item() for g in plain_grads) > 0.1
    for a, b in zip(packed_grads, plain_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=5e-6)


def test_a_completion_sees_its_prompt_and_itself_only():
    """Changing one completion's tokens changes no other row's log-probs, packed in one row with it."""
    model = tiny_llama()
    ids, mask = grouped_batch()
    before, _ = completion_logprobs(model, ids, mask, K, share_prompts=True, completions_per_row=3)
    changed = ids.clone()
    changed[1, -K:] = (changed[1, -K:] + 7) % 97
    after, _ = completion_logprobs(model, changed, mask, K, share_prompts=True, completions_per_row=3)
    others = torch.tensor([0, 2, 3, 4, 5])
    torch.testing.assert_close(after[others], before[others], rtol=0, atol=0)
    assert not torch.allclose(after[1, 1:], before[1, 1:])


def test_with_lora_and_gradient_checkpointing_the_adapter_gradients_match():
    from peft import LoraConfig, get_peft_model

    model = get_peft_model(tiny_llama(), LoraConfig(r=4, lora_alpha=8, target_modules="all-linear",
                                                    init_lora_weights=False))
    model.gradient_checkpointing_enable()
    model.enable_input_require_grads()
    model.train()
    ids, mask = grouped_batch()
    plain_logps, plain_grads = logps_and_grads(model, ids, mask)
    packed_logps, packed_grads = logps_and_grads(model, ids, mask, share_prompts=True)
    torch.testing.assert_close(packed_logps, plain_logps, rtol=0, atol=2e-6)
    assert plain_grads and max(g.abs().max().item() for g in plain_grads) > 0.01
    for a, b in zip(packed_grads, plain_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=5e-6)


def test_the_cost_estimate_packs_short_completions_and_not_long_ones():
    from transformers import LlamaConfig

    model = tiny_llama()
    model.config.hidden_size, model.config.intermediate_size = 576, 1536  # SmolLM2-135M's shape, for the estimate

    def batch(prompt: int, completion: int, group: int):
        ids = torch.ones(group, prompt + completion, dtype=torch.long)
        return ids, torch.ones_like(ids)

    short = plan(model, *batch(200, 128, 8), 128)
    assert short is not None and short.input_ids.shape == (1, 200 + 8 * 128)
    long = plan(model, *batch(200, 1024, 16), 1024)
    assert long is None or long.input_ids.size(1) <= 200 + 4 * 1024
    assert plan(model, *batch(8, 1024, 16), 1024) is None  # a short prompt saves less than the attention costs
    distinct = torch.arange(8 * 60).view(8, 60)  # no two rows share a prompt
    assert plan(model, distinct, torch.ones_like(distinct), 20) is None
    assert isinstance(model.config, LlamaConfig)
    model.config._attn_implementation = "eager"  # holds every score: no more of them than unpacked
    assert plan(model, *batch(200, 128, 8), 128) is None  # 1224^2 scores against 8 x 328^2
    assert plan(model, *batch(200, 16, 8), 16) is not None  # 328^2 against 8 x 216^2


@pytest.mark.parametrize("config", [
    {"attn_implementation": "flash_attention_2"},
    {"model": "mistral", "sliding_window": 8},
    {"model": "qwen2", "layer_types": ["full_attention", "sliding_attention"], "use_sliding_window": True,
     "sliding_window": 8},
])
def test_models_whose_attention_does_not_take_the_packed_mask_run_unpacked(config):
    """flash attention takes no 4-D mask; a sliding window shorter than the rows would be lost."""
    config = dict(config)
    kind = config.pop("model", "llama")
    impl = config.pop("attn_implementation", "sdpa")
    import transformers

    names = {"llama": "Llama", "mistral": "Mistral", "qwen2": "Qwen2"}[kind]
    cfg = getattr(transformers, f"{names}Config")(vocab_size=97, hidden_size=32, intermediate_size=64,
                                                  num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                                  **config)
    cfg._attn_implementation = "sdpa"
    model = getattr(transformers, f"{names}ForCausalLM")(cfg)
    model.config._attn_implementation = impl  # (flash attention is not installed here: only its name matters)
    ids, mask = grouped_batch()
    assert not packable(model, ids.size(1))
    assert plan(model, ids, mask, K, per_row=3) is None
    assert packable(tiny_llama(), ids.size(1))


def test_a_sliding_window_that_holds_the_rows_packs_with_the_same_log_probs():
    from transformers import MistralConfig, MistralForCausalLM

    torch.manual_seed(0)
    cfg = MistralConfig(vocab_size=97, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, sliding_window=P + K)
    cfg._attn_implementation = "sdpa"
    model = MistralForCausalLM(cfg)
    ids, mask = grouped_batch()
    assert packable(model, ids.size(1)) and not packable(model, ids.size(1) + 1)
    plain_logps, plain_grads = logps_and_grads(model, ids, mask)
    packed_logps, packed_grads = logps_and_grads(model, ids, mask, share_prompts=True, completions_per_row=3)
    torch.testing.assert_close(packed_logps, plain_logps, rtol=0, atol=2e-6)
    for a, b in zip(packed_grads, plain_grads, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=5e-6)


def test_the_load_check_turns_packing_off_for_a_model_that_ignores_the_mask(monkeypatch):
    import grpo_core.policy.shared_prompts as shared

    model = tiny_llama()
    probe = torch.arange(1, 13).unsqueeze(0)
    assert check_shared_prompts(model, probe)
    leaky = tiny_llama()  # completions that see each other: what a model ignoring the 4-D mask would do
    monkeypatch.setattr(shared, "attention_mask_4d",
                        lambda m, allowed, dtype: torch.tril(torch.ones_like(allowed)).unsqueeze(1))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert not check_shared_prompts(leaky, probe)
    assert any("prompts shared differ" in str(w.message) for w in caught)
    ids, mask = grouped_batch()
    assert plan(leaky, ids, mask, K, per_row=3) is None
    assert plan(model, ids, mask, K, per_row=3) is not None


def test_one_trainer_update_is_the_same_with_and_without_shared_prompts(tmp_path, arithmetic_model_dir):
    from grpo_core import Trainer, config_from_dict

    model_dir = arithmetic_model_dir

    def trainer(share: bool, name: str):
        return Trainer(config_from_dict({
            "model": {"name_or_path": str(model_dir), "dtype": "float32", "gradient_checkpointing": True},
            "data": {"source": "demo:arithmetic?max_operand=9", "answer_field": "answer", "chat_template": False},
            "generation": {"num_generations": 4, "max_completion_length": 6},
            "grpo": {"learning_rate": 1e-3, "prompts_per_step": 2, "max_steps": 1, "num_iterations": 2,
                     "beta": 0.04, "max_grad_norm": 1e9, "share_prompts": share},
            "lora": {"enabled": True, "r": 4, "alpha": 8},
            "logging": {"output_dir": str(tmp_path / name), "progress": False, "plot": False},
            "rewards": {"correct": {"use": "exact_match"}},
        }))

    import grpo_core.policy.shared_prompts as shared

    packed = []
    original = shared.plan
    shared_on, shared_off = trainer(True, "on"), trainer(False, "off")
    torch.manual_seed(0)
    batch = shared_on.backend.generate([shared_on.prompts[0], shared_on.prompts[1]], 4)
    advantages = torch.tensor([1.0, -0.5, 0.3, -0.8, 0.2, 1.1, -1.2, 0.0])
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(shared, "plan", lambda *a, **k: packed.append(original(*a, **k)) or packed[-1])
        on = shared_on._update(batch, advantages)
    assert packed and all(p is not None for p in packed)  # the old, reference and policy passes all packed
    off = shared_off._update(batch, advantages)
    for key, value in off.items():
        assert on[key] == pytest.approx(value, rel=1e-4, abs=1e-6), key
    weights_on = [p.detach() for p in shared_on.params]
    weights_off = [p.detach() for p in shared_off.params]
    assert max((a - b).abs().max().item() for a, b in zip(weights_on, weights_off, strict=True)) < 1e-6
    assert max((a - b).abs().max().item() for a, b in zip(weights_on, trainer(False, "untrained").params, strict=True)) > 1e-4
