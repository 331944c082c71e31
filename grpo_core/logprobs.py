"""Per-token log-probabilities of completions under a causal LM.

INTERFACE (owned by the memory work, issue 5; the trainer calls only these):

``completion_logprobs(model, input_ids, attention_mask, logits_to_keep, *, temperature=1.0,
chunk_size=..., with_entropy=False) -> (logps [B, K], entropy [B, K] | None)``
    log p(token_t | tokens_<t) for the last ``K = logits_to_keep`` tokens of each row, with
    logits divided by ``temperature`` first (TRL's ``_get_per_token_logps_and_entropies``).

``plain_completion_logprobs(...)``: same, through full logits (reference for tests).
"""

from __future__ import annotations

import torch


def selective_log_softmax(logits: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """log_softmax(logits)[..., index] without keeping a second full-size tensor alive."""
    return torch.gather(logits.float().log_softmax(-1), -1, index.unsqueeze(-1)).squeeze(-1)


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    logp = logits.float().log_softmax(-1)
    return -(logp.exp() * logp).sum(-1)


def plain_completion_logprobs(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    logits_to_keep: int,
    *,
    temperature: float = 1.0,
    with_entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Reference path: materialises ``[B, K, V]`` logits exactly as TRL does."""
    logits = model(input_ids=input_ids, attention_mask=attention_mask, logits_to_keep=logits_to_keep + 1).logits
    logits = logits[:, :-1, :] / temperature
    targets = input_ids[:, -logits_to_keep:]
    logps = selective_log_softmax(logits, targets)
    return logps, (entropy_from_logits(logits) if with_entropy else None)


def completion_logprobs(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    logits_to_keep: int,
    *,
    temperature: float = 1.0,
    chunk_size: int = 1024,
    with_entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Default path used by the trainer (placeholder: plain until the chunked version lands)."""
    del chunk_size
    return plain_completion_logprobs(
        model, input_ids, attention_mask, logits_to_keep, temperature=temperature, with_entropy=with_entropy
    )
