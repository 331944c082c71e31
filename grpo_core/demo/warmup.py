"""The warm start ("start strong"): a short supervised pass on examples of the answer format.

Cross-entropy on the completion tokens only (the prompt is context), AdamW, a fixed number of
steps on minibatches of rows drawn with a seeded generator.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch


def sft_batch(tokenizer: Any, prompts: list[str], completions: list[str]) -> dict[str, torch.Tensor]:
    """Right-padded ``input_ids``/``attention_mask`` and ``labels`` (-100 on the prompt and the padding)."""
    eos = tokenizer.eos_token
    p_ids = tokenizer(prompts, add_special_tokens=False)["input_ids"]
    c_ids = tokenizer([c + eos for c in completions], add_special_tokens=False)["input_ids"]
    seqs = [p + c for p, c in zip(p_ids, c_ids, strict=True)]
    width = max(map(len, seqs))
    pad = tokenizer.pad_token_id
    input_ids = torch.full((len(seqs), width), pad, dtype=torch.long)
    labels = torch.full((len(seqs), width), -100, dtype=torch.long)
    for i, (p, s) in enumerate(zip(p_ids, seqs, strict=True)):  # per row, not per token
        input_ids[i, : len(s)] = torch.tensor(s)
        labels[i, len(p) : len(s)] = torch.tensor(s[len(p) :])
    return {"input_ids": input_ids, "attention_mask": (labels != -100) | (input_ids != pad), "labels": labels}


def warm_up(
    model: Any,
    tokenizer: Any,
    prompts: list[str],
    completions: list[str],
    *,
    steps: int,
    batch_size: int = 32,
    learning_rate: float = 3e-3,
    seed: int = 0,
    schedule: str = "linear",
    generator: torch.Generator | None = None,
    optimizer: torch.optim.Optimizer | None = None,
    on_step: Callable[[int, float], None] | None = None,
) -> dict[str, float]:
    """Train ``model`` in place for ``steps`` minibatches (LR ``schedule`` linear-to-zero or constant);
    returns the final loss and the time taken. Pass ``generator``/``optimizer`` to continue a warm-up."""
    start = time.perf_counter()
    if schedule not in ("linear", "constant"):
        raise ValueError(f"warm-up schedule must be 'linear' or 'constant', got {schedule!r}")
    gen = generator if generator is not None else torch.Generator().manual_seed(seed)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = optimizer if optimizer is not None else torch.optim.AdamW(params, lr=learning_rate, weight_decay=0.0)
    decay = schedule == "linear"
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0 - s / max(1, steps) if decay else 1.0)
    model.train()
    loss_value = float("nan")
    for step in range(steps):
        idx = torch.randint(len(prompts), (batch_size,), generator=gen).tolist()
        batch = sft_batch(tokenizer, [prompts[i] for i in idx], [completions[i] for i in idx])
        batch["attention_mask"] = batch["attention_mask"].long()
        device = next(model.parameters()).device
        loss = model(**{k: v.to(device) for k, v in batch.items()}).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        loss_value = loss.item()
        if on_step is not None:
            on_step(step + 1, loss_value)
    return {"sft_loss": loss_value, "sft_seconds": time.perf_counter() - start, "sft_steps": float(steps)}
