"""grpo_core.policy.models: loading (full, LoRA, QLoRA on CPU), the reference model, saving adapter and merged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from grpo_core.config import config_from_dict
from grpo_core.policy.models import load_model_and_tokenizer, reference_model, save_model


def run_config(model_dir: Path, registry: Any, **sections: dict[str, Any]) -> Any:
    data: dict[str, Any] = {
        "model": {"name_or_path": str(model_dir), "dtype": "float32", "gradient_checkpointing": False},
        "data": {"source": "hub/some-dataset"},
        "rewards": {"len": {"use": "core_len"}},
    }
    for name, table in sections.items():
        data.setdefault(name, {}).update(table)
    return config_from_dict(data, registry=registry)


def _batch(tok: Any) -> dict[str, torch.Tensor]:
    return tok(["What is 12 plus 7?", "The answer"], return_tensors="pt", padding=True)


def test_full_finetune_loads_left_padded_and_reference_is_frozen_copy(tiny_model_dir: Path, core_registry: Any) -> None:
    cfg = run_config(tiny_model_dir, core_registry)
    model, tok = load_model_and_tokenizer(cfg)
    assert tok.padding_side == "left" and tok.pad_token == "<pad>"
    assert model.dtype == torch.float32 and model.training
    assert all(p.requires_grad for p in model.parameters())
    batch = _batch(tok)
    assert batch["attention_mask"][1, 0] == 0  # the shorter row is padded on the left
    with torch.no_grad():
        model.lm_head.weight.add_(1.0)  # the policy moves; the reference must not
        with reference_model(model, cfg) as ref:
            assert ref is not model and not any(p.requires_grad for p in ref.parameters())
            ref_logits = ref(**batch).logits
        with reference_model(model, cfg) as ref2:
            assert ref2 is ref  # loaded once
        assert not torch.allclose(model(**batch).logits, ref_logits)


def test_lora_reference_disables_adapter_and_saves_adapter_and_merged(
    tiny_model_dir: Path, core_registry: Any, tmp_path: Path
) -> None:
    from peft import AutoPeftModelForCausalLM
    from transformers import AutoModelForCausalLM

    cfg = run_config(tiny_model_dir, core_registry, lora={"enabled": True, "r": 4, "alpha": 8},
                     model={"gradient_checkpointing": True})
    model, tok = load_model_and_tokenizer(cfg)
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    batch = _batch(tok)
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.5)  # a non-zero update so merged != base
        model.eval()
        policy = model(**batch).logits
        with reference_model(model, cfg) as ref:
            assert ref is model
            torch.testing.assert_close(ref(**batch).logits, base(**batch).logits)
        assert not torch.allclose(policy, base(**batch).logits, atol=1e-3)

    save_model(model, tok, tmp_path / "adapter")
    assert (tmp_path / "adapter" / "adapter_config.json").exists()
    assert (tmp_path / "adapter" / "tokenizer_config.json").exists()
    loaded = AutoPeftModelForCausalLM.from_pretrained(tmp_path / "adapter", dtype=torch.float32).eval()
    with torch.no_grad():
        torch.testing.assert_close(loaded(**batch).logits, policy, atol=1e-5, rtol=1e-5)

    save_model(model, tok, tmp_path / "merged", merged=True)
    assert not (tmp_path / "merged" / "adapter_config.json").exists()
    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "merged", dtype=torch.float32).eval()
    assert not hasattr(merged, "peft_config")
    with torch.no_grad():
        torch.testing.assert_close(merged(**batch).logits, policy, atol=1e-4, rtol=1e-4)
    assert any(n for n, p in model.named_parameters() if "lora_A" in n)  # the training model is untouched


def test_qlora_nf4_on_cpu_quantizes_and_trains(tiny_model_dir: Path, core_registry: Any, tmp_path: Path) -> None:
    pytest.importorskip("bitsandbytes")
    from bitsandbytes.nn import Linear4bit
    from transformers import AutoModelForCausalLM

    cfg = run_config(tiny_model_dir, core_registry, lora={"enabled": True, "r": 4},
                     quantization={"load_in_4bit": True, "compute_dtype": "float32"},
                     model={"gradient_checkpointing": True, "dtype": "auto"})
    model, tok = load_model_and_tokenizer(cfg)
    quantized = [m for m in model.modules() if isinstance(m, Linear4bit)]
    assert len(quantized) == 2 * 7  # q,k,v,o,gate,up,down per layer
    assert quantized[0].weight.dtype == torch.uint8 and quantized[0].weight.quant_state.quant_type == "nf4"
    batch = _batch(tok)
    out = model(**batch, labels=batch["input_ids"])
    out.loss.backward()
    grads = {n: p.grad for n, p in model.named_parameters() if p.requires_grad}
    assert grads and all(g is not None for g in grads.values())
    assert any(g.abs().sum() > 0 for n, g in grads.items() if "lora_A" in n or "lora_B" in n)
    with torch.no_grad(), reference_model(model, cfg) as ref:
        assert torch.isfinite(ref(**batch).logits).all()

    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.5)
    save_model(model, tok, tmp_path / "merged", merged=True)
    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "merged")
    assert not any(isinstance(m, Linear4bit) for m in merged.modules())
    assert merged.dtype == torch.float32
    # merged = the original (unquantized) base weight + scaling * B @ A
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    q = model.base_model.model.model.layers[0].self_attn.q_proj
    delta = q.scaling["default"] * q.lora_B["default"].weight @ q.lora_A["default"].weight
    got = merged.model.layers[0].self_attn.q_proj.weight - base.model.layers[0].self_attn.q_proj.weight
    assert delta.abs().max() > 0.01
    torch.testing.assert_close(got, delta.detach(), atol=1e-5, rtol=1e-4)


def test_a_model_that_cannot_load_is_one_line_naming_the_key(tmp_path: Path, core_registry: Any) -> None:
    from transformers import LlamaConfig

    (tmp_path / "empty").mkdir()
    LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4).save_pretrained(
        tmp_path / "empty")  # a config, but no weights and no tokenizer
    cfg = run_config(tmp_path / "empty", core_registry, generation={"max_completion_length": 16})
    with pytest.raises(OSError) as info:
        load_model_and_tokenizer(cfg)
    assert str(info.value).startswith(f"model.name_or_path: cannot load '{tmp_path / 'empty'}': ")
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("arch", ["qwen2", "gpt2"])
def test_other_architectures_load_train_and_save(arch: str, tmp_path: Path, core_registry: Any,
                                                 fresh_tokenizer: Any) -> None:
    """Any causal LM transformers loads: a Qwen2 (biases in attention) and a GPT-2 (Conv1D layers)."""
    from peft import AutoPeftModelForCausalLM
    from transformers import GPT2Config, GPT2LMHeadModel, Qwen2Config, Qwen2ForCausalLM

    tok = fresh_tokenizer
    torch.manual_seed(0)
    if arch == "qwen2":
        # padded vocabulary, as real Qwen checkpoints have (its tokenizer class adds <|endoftext|> on load)
        model = Qwen2ForCausalLM(Qwen2Config(vocab_size=len(tok) + 4, hidden_size=32, intermediate_size=64,
                                             num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2))
    else:
        model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_embd=32, n_layer=2, n_head=4, n_positions=128))
    model.save_pretrained(tmp_path / "base")
    tok.save_pretrained(tmp_path / "base")
    cfg = run_config(tmp_path / "base", core_registry, lora={"enabled": True, "r": 2},
                     model={"gradient_checkpointing": True}, data={"max_prompt_length": 64},
                     generation={"max_completion_length": 16})
    policy, tok = load_model_and_tokenizer(cfg)
    batch = _batch(tok)
    policy(**batch, labels=batch["input_ids"]).loss.backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for n, p in policy.named_parameters() if "lora_B" in n)
    save_model(policy, tok, tmp_path / "adapter")
    again = AutoPeftModelForCausalLM.from_pretrained(tmp_path / "adapter")
    policy.eval()
    with torch.no_grad():
        torch.testing.assert_close(again.eval()(**batch).logits, policy(**batch).logits)


@pytest.mark.parametrize(("setting", "expected"), [({}, "hidden"), ({"mlp_chunk_tokens": 7}, 7),
                                                   ({"mlp_chunk_tokens": 0}, None)])
def test_mlp_chunk_tokens_reaches_the_model(tiny_model_dir: Path, core_registry: Any, setting: dict, expected: Any
                                            ) -> None:
    from grpo_core.policy.activations import MIN_AUTO_MLP_TILE, _tile_of

    cfg = run_config(tiny_model_dir, core_registry, model={"gradient_checkpointing": True, **setting})
    model, _ = load_model_and_tokenizer(cfg)
    want = max(model.config.hidden_size, MIN_AUTO_MLP_TILE) if expected == "hidden" else expected
    assert {_tile_of(m) for m in model.modules() if type(m).__name__.endswith("MLP")} == {want}
