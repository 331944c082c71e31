"""Fixtures for the vLLM lane (run with ``.venv-vllm/bin/python -m pytest tests/vllm_lane``): a tiny Llama
saved to a temporary folder (vLLM loads it from disk; its CPU attention wants a head size of 32 or
more), a run config using it with ``backend = "vllm"``, and the HF reference log-probs."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("GRPO_VLLM_EAGER", "1")  # no torch.compile: the engines start in seconds

PROMPTS = ["What is 12 plus 7?", "Natalia sold clips to 48 of her friends.", "Solve the problem step by step."]


def build_model(out: Path, *, seed: int = 0, tie: bool = False) -> Path:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from tests.core.conftest import build_tokenizer

    tok = build_tokenizer()
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, max_position_embeddings=512, pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id, bos_token_id=tok.bos_token_id, tie_word_embeddings=tie,
    )
    model = LlamaForCausalLM(config)
    with torch.no_grad():  # larger weights than the init's: sharper distributions, fewer near-ties in greedy
        for p in model.parameters():
            if p.dim() == 2:
                p.mul_(8.0)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_model(tmp_path_factory.mktemp("tiny_vllm"), tie=True)  # tied head and embeddings, as SmolLM2


def run_config(model_dir: Path, tmp_path: Path, **sections: Any) -> Any:
    from grpo_core.config import config_from_dict

    data = tmp_path / "rows.jsonl"
    if not data.exists():
        import json

        data.write_text("".join(json.dumps({"prompt": p, "answer": "19"}) + "\n" for p in PROMPTS * 2))
    base: dict[str, Any] = {
        "model": {"name_or_path": str(model_dir), "dtype": "float32", "gradient_checkpointing": False},
        "data": {"source": str(data), "max_prompt_length": 64},
        "generation": {"backend": "vllm", "num_generations": 4, "max_completion_length": 16,
                       "vllm_gpu_memory_utilization": 0.15},
        "grpo": {"learning_rate": 1e-2, "prompts_per_step": 3, "max_steps": 3, "seed": 0},
        "logging": {"output_dir": str(tmp_path / "run"), "progress": False, "plot": False},
        "rewards": {"fmt": {"use": "xml_count"}},
    }
    for name, values in sections.items():
        base[name] = {**base.get(name, {}), **values}
    return config_from_dict(base)
