"""Memory model: exact parameter/LoRA counts against real models, the activation estimate against what
autograd really saves, and the effect of each switch (checkpointing, offload, beta, 4-bit, iterations)."""

from __future__ import annotations

import pytest
import torch

from grpo_core.policy.activations import MIN_AUTO_MLP_TILE
from grpo_core.policy.memory_model import GiB, count_parameters, dtype_bytes, estimate_peak_memory


def _config(tie: bool = True, vocab: int = 1000):
    from transformers import Qwen2Config

    return Qwen2Config(vocab_size=vocab, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                       tie_word_embeddings=tie, attn_implementation="sdpa")


def _estimate(cfg, **overrides):
    kwargs = dict(num_sequences=4, prompt_length=16, completion_length=48, dtype="float32", lora_rank=0,
                  quantization_4bit=False, gradient_checkpointing=True, offload_activations=False,
                  chunk_size=64, beta=0.0, num_iterations=1)
    kwargs.update(overrides)
    return estimate_peak_memory(cfg, **kwargs)


@pytest.mark.parametrize("tie", [True, False])
def test_weights_and_lora_state_match_real_models(tie):
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen2ForCausalLM

    cfg = _config(tie)
    model = Qwen2ForCausalLM(cfg)
    n_params = sum(p.numel() for p in model.parameters())
    est = _estimate(cfg, dtype=torch.bfloat16)
    assert est.component("weights") == 2 * n_params
    assert est.component("trainable state") == 3 * 2 * n_params  # grads + two moments, full fine-tune
    peft = get_peft_model(model, LoraConfig(r=8, target_modules="all-linear"))
    lora_params = sum(p.numel() for p in peft.parameters() if p.requires_grad)
    est = _estimate(cfg, lora_rank=8)
    assert est.component("trainable state") == 4 * 4 * lora_params  # fp32 params + grads + two moments


def test_activation_estimate_is_close_to_what_autograd_saves():
    """No checkpointing, full fine-tune: the estimate within 2x of the bytes autograd keeps for backward."""
    from transformers import Qwen2ForCausalLM

    from grpo_core.policy.logprobs import completion_logprobs

    cfg = _config()
    model = Qwen2ForCausalLM(cfg).train()
    params = {p.data_ptr() for p in model.parameters()}
    saved: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        if t.data_ptr() not in params:
            saved[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    n, p_len, c_len = 4, 16, 48
    ids = torch.randint(0, cfg.vocab_size, (n, p_len + c_len))
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        completion_logprobs(model, ids, torch.ones_like(ids), c_len, chunk_size=64)
    measured = sum(saved.values())
    est = _estimate(cfg, gradient_checkpointing=False)
    assert 0.5 * measured <= est.component("activations") <= 2 * measured


def test_switches_move_the_right_components():
    cfg = _config()
    base = _estimate(cfg)
    no_gc = _estimate(cfg, gradient_checkpointing=False)
    offload = _estimate(cfg, offload_activations=True)
    assert no_gc.component("activations") > base.component("activations") > offload.component("activations")
    assert offload.host_offload > 0 and base.host_offload == 0
    tiled, untiled = _estimate(cfg, mlp_chunk_tokens=16), _estimate(cfg, mlp_chunk_tokens=None)
    assert tiled.component("activations") < untiled.component("activations")
    assert _estimate(cfg, mlp_chunk_tokens="auto").component("activations") == \
        _estimate(cfg, mlp_chunk_tokens=max(cfg.hidden_size, MIN_AUTO_MLP_TILE)).component("activations")
    sliced = _estimate(cfg, micro_batch_tokens=64)  # 64 // (16 + 48) = one row per pass instead of 4
    assert sliced.component("activations") < base.component("activations")
    assert sliced.component("logits chunk") < base.component("logits chunk")
    assert sliced.component("KV cache") == base.component("KV cache")  # generation is not sliced
    sliced_old = _estimate(cfg, micro_batch_tokens=64, num_iterations=2)  # old log-probs: every row is kept
    assert sliced_old.component("old/ref log-probs") == _estimate(cfg, num_iterations=2).component("old/ref log-probs")
    assert _estimate(cfg, beta=0.04).component("reference weights") == base.component("weights")
    assert _estimate(cfg, beta=0.04, lora_rank=16).component("reference weights") == 0
    assert _estimate(cfg, quantization_4bit=True).component("weights") < base.component("weights")
    assert base.component("old/ref log-probs") == 0
    assert _estimate(cfg, num_iterations=2).component("old/ref log-probs") == 4 * 48 * 4
    longer = _estimate(cfg, completion_length=480)
    assert longer.component("KV cache") > base.component("KV cache")
    assert longer.peak > base.peak >= base.floor > base.component("weights")


def test_logits_chunk_is_far_below_the_full_logits_at_the_reference_shape():
    from transformers import Qwen2Config

    cfg = Qwen2Config(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=2,
                      num_attention_heads=14, num_key_value_heads=2, tie_word_embeddings=True)
    est = estimate_peak_memory(cfg, num_sequences=8, prompt_length=32, completion_length=1024, dtype="float32",
                               lora_rank=16, chunk_size=1024)
    full_logits = 8 * 1024 * 151936 * 4
    assert est.component("logits chunk") < full_logits / 10
    assert 0.6 * GiB < est.component("weights") < 0.7 * GiB  # 166M params, tied head counted once
    table = est.table()
    for name in ("weights", "trainable state", "KV cache", "activations", "logits chunk", "estimated peak", "floor"):
        assert name in table


def test_count_parameters_and_bad_input():
    counts = count_parameters(_config())
    assert counts.lora_per_rank > 0 and counts.linear_in_layers < counts.total
    assert dtype_bytes("bfloat16") == 2 and dtype_bytes(torch.float32) == 4
    with pytest.raises(ValueError, match="dtype: unknown dtype 'int3'"):
        dtype_bytes("int3")
    with pytest.raises(ValueError, match="num_sequences"):
        _estimate(_config(), num_sequences=0)


def test_gradient_accumulation_splits_training_not_generation(tmp_path):
    """``grpo train --dry-run``: generation samples every sequence of the step at once and the old/ref
    log-probs are kept for all of them, so accumulating gradients over 4 micro-batches shrinks only the
    activations, not the KV cache."""
    from grpo_core.cli.commands.train import memory_estimate
    from grpo_core.config import config_from_dict

    _config().save_pretrained(tmp_path / "m")
    (tmp_path / "rows.jsonl").write_text('{"prompt": "hi", "answer": "1"}\n')

    def estimate(accumulation: int):
        return memory_estimate(config_from_dict({
            "model": {"name_or_path": str(tmp_path / "m")}, "data": {"source": str(tmp_path / "rows.jsonl"),
                                                                     "max_prompt_length": 32},
            "generation": {"num_generations": 8, "max_completion_length": 64},
            "grpo": {"prompts_per_step": 2, "gradient_accumulation_steps": accumulation, "num_iterations": 2,
                     "micro_batch_tokens": 0},
            "logging": {"output_dir": str(tmp_path / "run")}, "rewards": {"c": {"use": "numeric_proximity"}}}))

    one, four = estimate(1), estimate(4)
    assert four.component("KV cache") == one.component("KV cache") > 0
    assert four.component("old/ref log-probs") == one.component("old/ref log-probs") > 0
    assert four.component("activations") < one.component("activations")
    assert _estimate(_config(), num_sequences=4, generation_sequences=16).component("KV cache") == \
        4 * _estimate(_config(), num_sequences=4).component("KV cache")


PROBE_SHAPES = {  # three model shapes x batches, each step planned on this CPU (grpo_core.policy.step_plan)
    "tied-full-ft": ({"vocab_size": 32000, "hidden_size": 384, "intermediate_size": 1024, "num_hidden_layers": 4,
                      "num_attention_heads": 6, "num_key_value_heads": 2, "tie_word_embeddings": True},
                     8, 64, 448, 0),
    "untied-lora": ({"vocab_size": 24000, "hidden_size": 512, "intermediate_size": 1408, "num_hidden_layers": 4,
                     "num_attention_heads": 8, "num_key_value_heads": 4, "tie_word_embeddings": False},
                    8, 32, 480, 16),
    "deep-narrow-16-rows": ({"vocab_size": 16000, "hidden_size": 256, "intermediate_size": 768,
                             "num_hidden_layers": 6, "num_attention_heads": 4, "num_key_value_heads": 4,
                             "tie_word_embeddings": True}, 16, 128, 384, 0),
}


@pytest.mark.slow
@pytest.mark.parametrize("shape", sorted(PROBE_SHAPES))
def test_planned_estimate_is_within_20_percent_of_the_measured_peak(shape):
    """What ``--dry-run`` prints (the step plan's estimate) against the peak of that planned step, measured in a
    fresh process (tests/core/memory_probe.py: two steps, VmHWM less the resident set before the model)."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    config, rows, prompt, completion, rank = PROBE_SHAPES[shape]
    spec = {"config": config, "rows": rows, "prompt": prompt, "completion": completion, "dtype": "float32",
            "lora_rank": rank}
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
    proc = subprocess.run([sys.executable, str(Path(__file__).with_name("memory_probe.py")), json.dumps(spec)],
                          capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["training"] > out["generation"]  # the step's peak is the update's, which the probe runs
    assert 0.8 <= out["estimated"] / out["measured"] <= 1.2, out
