"""grpo_core.policy.lean_lora: the lean forward of plain LoRA layers gives peft's own results bit for bit (fp32, and a
bf16 base under fp32 adapters), leaves every other layer (DoRA, training mode) to peft, restores peft's forward
on exit, and the transformers backend samples the very same tokens and log-probs with it."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from grpo_core.policy.lean_lora import lean_lora  # noqa: E402


def tiny_lora(dtype: Any = torch.float32, **lora: Any) -> Any:
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=2)).to(dtype)
    model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", lora_dropout=0.1,
                                             **lora))
    for name, param in model.named_parameters():
        if "lora_B" in name:  # peft starts B at zero: make the adapters count
            torch.nn.init.normal_(param, std=0.5)
    return model.eval()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16-base"])
def test_the_lean_forward_gives_peft_s_results_bit_for_bit(dtype: Any) -> None:
    model = tiny_lora(dtype)
    ids = torch.randint(0, 64, (3, 9), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        peft_logits = model(input_ids=ids).logits
        with lean_lora(model) as swapped:
            lean_logits = model(input_ids=ids).logits
        after = model(input_ids=ids).logits
    assert swapped == 2 * 7  # q, k, v, o, gate, up, down in each of the 2 layers
    assert torch.equal(lean_logits, peft_logits) and not torch.equal(peft_logits, tiny_base_logits(dtype, ids))
    assert torch.equal(after, peft_logits)
    assert not any("forward" in vars(m) for m in model.modules())  # peft's forward again


def tiny_base_logits(dtype: Any, ids: Any) -> Any:
    with torch.no_grad():
        base = tiny_lora(dtype)
        with base.disable_adapter():
            return base(input_ids=ids).logits


def test_layers_that_are_not_plain_lora_keep_peft_s_forward() -> None:
    dora = tiny_lora(use_dora=True)
    with lean_lora(dora) as swapped:
        assert swapped == 0
    training = tiny_lora().train()  # dropout on: peft's forward
    with lean_lora(training) as swapped:
        assert swapped == 0


@pytest.mark.parametrize("decode", ["dynamic", "static"])
def test_the_backend_samples_the_same_tokens_with_it(monkeypatch: pytest.MonkeyPatch, decode: str) -> None:
    import contextlib

    from grpo_core.config import GenerationConfig
    from grpo_core.generation import transformers_backend as module  # where the backend looks lean_lora up
    from grpo_core.generation.transformers_backend import TransformersBackend

    backend = TransformersBackend.__new__(TransformersBackend)  # the sampling part alone: no tokenizer here
    backend.model, backend.gen = tiny_lora(), GenerationConfig(max_completion_length=12, temperature=0.9)
    backend.tokenizer = type("Tokenizer", (), {"pad_token_id": 0})()
    backend.eos_ids = [1]
    backend.decode, backend.decode_strict = decode, True
    backend._finish = lambda prompt_ids, prompt_mask, ids, logps=None: (ids, logps)
    prompt = torch.randint(2, 64, (2, 5), generator=torch.Generator().manual_seed(3))

    def sample() -> Any:
        torch.manual_seed(7)
        return backend._sample_groups(prompt, torch.ones_like(prompt), 4, greedy=False)

    swapped, lean = [], module.lean_lora

    @contextlib.contextmanager
    def counting(model: Any) -> Any:
        with lean(model) as n:
            swapped.append(n)
            yield n

    monkeypatch.setattr(module, "lean_lora", counting)
    lean_ids, lean_logps = sample()
    monkeypatch.setattr(module, "lean_lora", lambda model: contextlib.nullcontext(0))
    peft_ids, peft_logps = sample()
    assert swapped == [14] and lean_ids.shape[0] == 8
    assert torch.equal(lean_ids, peft_ids) and torch.equal(lean_logps, peft_logps)
