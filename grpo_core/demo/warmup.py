"""The warm start ("start strong"): a short supervised pass on examples of the answer format.

Cross-entropy on the completion tokens only (the prompt is context; in a conversation with tools, the tools'
answers too), AdamW, a fixed number of steps on minibatches of rows drawn with a seeded generator.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

Completion = str | list[tuple[str, bool]]  # the text the model writes, or segments (text, trained) in order


def sft_batch(tokenizer: Any, prompts: list[str], completions: list[Completion]) -> dict[str, torch.Tensor]:
    """Right-padded ``input_ids``/``attention_mask`` and ``labels`` (-100 on the prompt and the padding). A
    completion is a string (trained on, EOS appended) or segments ``(text, trained)``, as a conversation with
    tools is: the model's turns trained on, the tools' answers context only (-100), EOS as the segments write it."""
    eos = tokenizer.eos_token
    segments = [[(c + eos, True)] if isinstance(c, str) else c for c in completions]
    p_ids = tokenizer(prompts, add_special_tokens=False)["input_ids"]
    flat = tokenizer([text for row in segments for text, _ in row], add_special_tokens=False)["input_ids"]
    pad = tokenizer.pad_token_id
    rows: list[tuple[list[int], list[int]]] = []
    at = 0
    for p, row in zip(p_ids, segments, strict=True):  # per row and segment, not per token
        ids, labels = list(p), [-100] * len(p)
        for ids_seg, (_, trained) in zip(flat[at : at + len(row)], row, strict=True):
            ids += ids_seg
            labels += ids_seg if trained else [-100] * len(ids_seg)
        at += len(row)
        rows.append((ids, labels))
    width = max(len(ids) for ids, _ in rows)
    input_ids = torch.full((len(rows), width), pad, dtype=torch.long)
    label_ids = torch.full((len(rows), width), -100, dtype=torch.long)
    attention = torch.zeros((len(rows), width), dtype=torch.bool)
    for i, (ids, labels) in enumerate(rows):
        input_ids[i, : len(ids)] = torch.tensor(ids)
        label_ids[i, : len(ids)] = torch.tensor(labels)
        attention[i, : len(ids)] = True
    return {"input_ids": input_ids, "attention_mask": attention, "labels": label_ids}


def warm_up(
    model: Any,
    tokenizer: Any,
    prompts: list[str],
    completions: list[Completion],
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
