"""The GRPO policy loss: token-level clipped surrogate, optional k3 KL, and TRL's normalisers.

Matches ``trl.GRPOTrainer._compute_loss`` (token-level importance sampling, the
``sum_then_normalize`` path) for ``loss_type`` in grpo | bnpo | dr_grpo | dapo; the
parity test in ``tests/core/test_loss_parity.py`` checks loss and gradients against it.

Normalisers, for one micro-batch of a generation batch split into ``grad_accum_steps``:

``grpo``     mean over sequences of (masked token mean per sequence), / grad_accum_steps
``bnpo``     masked token mean over the micro-batch, / grad_accum_steps
``dr_grpo``  masked token sum / (rows * max_completion_length), / grad_accum_steps
``dapo``     masked token sum / ``num_items_in_batch`` (completion tokens of the whole
             generation batch, so the accumulated loss is a global token mean)

A micro-batch may itself be run as several row slices (the trainer's ``micro_batch_tokens``
memory budget): pass the whole micro-batch's ``group_rows`` and ``group_tokens`` and each
slice's loss is its exact share, so the slices' losses (and gradients) sum to the micro-batch's.
"""

from __future__ import annotations

import torch

from grpo_core.config import LOSS_TYPES


def grpo_loss(
    per_token_logps: torch.Tensor,
    completion_mask: torch.Tensor,
    advantages: torch.Tensor,
    *,
    old_per_token_logps: torch.Tensor | None = None,
    ref_per_token_logps: torch.Tensor | None = None,
    loss_type: str = "dapo",
    epsilon: float = 0.2,
    epsilon_high: float | None = None,
    delta: float | None = None,
    beta: float = 0.0,
    max_completion_length: int | None = None,
    num_items_in_batch: torch.Tensor | int | None = None,
    grad_accum_steps: int = 1,
    kl_bias_correction: bool = True,
    group_rows: int | None = None,
    group_tokens: torch.Tensor | int | None = None,
    importance_sampling_ratio: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Loss of one micro-batch ``[B, K]`` and detached metrics (``kl``, ``clip_ratio/*``).

    ``group_rows`` / ``group_tokens``: rows and completion tokens of the micro-batch this tensor is
    a slice of (default: this tensor's own), the denominators of the grpo, bnpo and dr_grpo
    normalisers; the metrics stay means over this slice.

    ``old_per_token_logps`` None means on-policy (``num_iterations == 1``): the ratio is 1
    but its gradient is the policy gradient. ``ref_per_token_logps`` is needed when
    ``beta != 0``. ``advantages`` is ``[B]`` (or ``[B, K]``). ``kl_bias_correction`` multiplies
    the KL term by the (differentiable) ratio, as TRL's ``use_bias_correction_kl`` (its default).
    ``importance_sampling_ratio`` (``[B, K]`` or ``[B, 1]``, grpo_core.algorithm.sampler_correction) multiplies the
    clipped surrogate before the KL term is added, as TRL's vLLM importance-sampling correction.
    """
    if loss_type not in LOSS_TYPES:
        raise ValueError(f"loss_type must be one of {', '.join(LOSS_TYPES)}, got {loss_type!r}")
    epsilon_high = epsilon if epsilon_high is None else epsilon_high
    mask = completion_mask.to(per_token_logps.dtype)
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(1)
    old = per_token_logps.detach() if old_per_token_logps is None else old_per_token_logps

    coef_1 = torch.exp(per_token_logps - old)  # token-level importance ratio (value 1 when on-policy)

    metrics: dict[str, torch.Tensor] = {}
    per_token_kl = None
    if beta != 0.0:
        if ref_per_token_logps is None:
            raise ValueError("beta != 0 needs ref_per_token_logps")
        diff = ref_per_token_logps - per_token_logps
        per_token_kl = torch.exp(diff) - diff - 1  # k3 estimator
        if kl_bias_correction:  # TRL's use_bias_correction_kl: unbiased reverse-KL gradient
            per_token_kl = per_token_kl * coef_1
        metrics["kl"] = _masked_mean(per_token_kl.detach(), mask)

    coef_2 = torch.clamp(coef_1, 1 - epsilon, 1 + epsilon_high)
    if delta is not None:  # two-sided clipping of the unclipped branch
        coef_1 = torch.clamp(coef_1, max=delta)
    per_token_loss = -torch.min(coef_1 * advantages, coef_2 * advantages)
    if importance_sampling_ratio is not None:  # the trainer/sampler mismatch
        per_token_loss = per_token_loss * importance_sampling_ratio
    if per_token_kl is not None:
        per_token_loss = per_token_loss + beta * per_token_kl

    rows = per_token_loss.size(0) if group_rows is None else group_rows
    if loss_type == "grpo":
        loss = ((per_token_loss * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).sum() / rows / grad_accum_steps
    elif loss_type == "bnpo":
        tokens = mask.sum() if group_tokens is None else torch.as_tensor(group_tokens, dtype=mask.dtype)
        loss = (per_token_loss * mask).sum() / tokens.clamp(min=1.0) / grad_accum_steps
    elif loss_type == "dr_grpo":
        if max_completion_length is None:
            raise ValueError("loss_type 'dr_grpo' needs max_completion_length")
        loss = (per_token_loss * mask).sum() / (rows * max_completion_length) / grad_accum_steps
    else:  # dapo
        items = mask.sum() if num_items_in_batch is None else torch.as_tensor(num_items_in_batch, dtype=mask.dtype)
        loss = (per_token_loss * mask).sum() / items.clamp(min=1.0)

    with torch.no_grad():
        low = ((coef_1 < 1 - epsilon) & (advantages < 0)).to(mask.dtype)
        high = ((coef_1 > 1 + epsilon_high) & (advantages > 0)).to(mask.dtype)
        metrics["clip_ratio/low_mean"] = _masked_mean(low, mask)
        metrics["clip_ratio/high_mean"] = _masked_mean(high, mask)
        metrics["clip_ratio/region_mean"] = _masked_mean(torch.maximum(low, high), mask)
        # x grad_accum_steps: the mean of the micro-batches' values is then the whole batch's loss (for dapo,
        # whose micro-batch losses are shares of one global token mean, as for the others)
        metrics["policy_loss"] = loss.detach() * grad_accum_steps
    return loss, metrics


def _masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return (x * mask).sum() / mask.sum().clamp(min=1.0)
