"""The ``reward_model`` built-in: a sequence-classification model (a path or hub id, optional PEFT adapter) as a
reward, scored by :class:`grpo_core.trl_reward_models.RewardModel` (the scorer of TRL's ``reward_funcs`` models).

One model is loaded per (model, adapter, device, dtype) in a process, and every alias naming it scores with it
(one forward pass at a time, under the model's lock): two aliases with different normalisations of one model
hold one copy of its weights. The model is loaded when the reward is built, on ``device`` (``auto``: the first
CUDA device when there is one, else the CPU; or ``cpu``, ``cuda:1``...: a second device keeps it off the
policy's). It runs on a thread of the training process (a model is not shipped to a worker process).
"""

from __future__ import annotations

import threading
from typing import Any

from grpo_core.trl_reward_models import RewardModel
from grpo_rewards.specs import RewardSpec

_LOADED: dict[tuple[str, str | None, str, str], tuple[Any, Any, threading.Lock]] = {}
_LOADING = threading.Lock()
DTYPES = ("float32", "bfloat16", "float16")


def resolve_device(device: str) -> str:
    import torch  # heavy: the reward is being built

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def shared_model(model: str, adapter: str | None, device: str, dtype: str,
                 trust_remote_code: bool = False) -> tuple[Any, Any, threading.Lock]:
    """``(model, tokenizer, lock)`` of ``model`` (with ``adapter`` merged) on ``device``: loaded once per process."""
    key = (model, adapter, device, dtype)
    with _LOADING:
        if key not in _LOADED:
            import torch  # heavy: the first alias of this model is being built
            from transformers import AutoModelForSequenceClassification, AutoTokenizer

            loaded = AutoModelForSequenceClassification.from_pretrained(
                model, dtype=getattr(torch, dtype), trust_remote_code=trust_remote_code)
            if adapter:
                from peft import PeftModel  # heavy: only with an adapter

                loaded = PeftModel.from_pretrained(loaded, adapter).merge_and_unload()
            tokenizer = AutoTokenizer.from_pretrained(adapter or model, trust_remote_code=trust_remote_code) \
                if adapter and _has_tokenizer(adapter) else AutoTokenizer.from_pretrained(model)
            loaded.requires_grad_(False)
            _LOADED[key] = (loaded.to(device).eval(), tokenizer, threading.Lock())
        return _LOADED[key]


def _has_tokenizer(folder: str) -> bool:
    from pathlib import Path

    return (Path(folder) / "tokenizer_config.json").is_file()


def reward_model(model: str, adapter: str | None = None, device: str = "auto", dtype: str = "float32",
                 batch_size: int = 16, max_length: int | None = None, label: int = 0, normalise: str = "raw",
                 chat_template: str = "always", trust_remote_code: bool = False) -> RewardModel:
    """A sequence-classification model's score of prompt + completion (through its chat template), batched,
    without gradients; ``normalise`` = raw (the logit of ``label``), sigmoid or softmax."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    if max_length is not None and max_length < 1:
        raise ValueError(f"max_length must be >= 1, got {max_length}")
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    loaded, tokenizer, lock = shared_model(model, adapter, resolve_device(device), dtype, trust_remote_code)
    return RewardModel(loaded, tokenizer, batch_size=batch_size, max_length=max_length, label=label,
                       normalise=normalise, chat_template=chat_template, lock=lock, name="reward_model")


SPEC = RewardSpec(
    name="reward_model",
    factory=reward_model,
    example='''[rewards.preference]
use = "reward_model"
model = "Skywork/Skywork-Reward-V2-Qwen3-0.6B"   # a path or hub id of a sequence-classification model
weight = 0.5
normalise = "sigmoid"  # raw (the logit) | sigmoid | softmax (the probability of `label`)
batch_size = 16
max_length = 4096      # longer texts keep their last 4096 tokens (truncated_share in the metrics)
device = "auto"        # or "cuda:1": a second device keeps it off the policy's
''',
)
