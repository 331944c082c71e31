"""The GRPO policy loss: the importance ratio, a loss type's surrogate and normaliser, the optional k3 KL.

Matches ``trl.GRPOTrainer._compute_loss`` (token- and sequence-level importance sampling, the off-policy
sequence mask, the ``sum_then_normalize`` path) for the built-in loss types grpo | bnpo | dr_grpo | dapo | cispo |
sapo | luspo | vespo; the parity tests in ``tests/core/test_loss_parity.py`` and
``tests/core/test_loss_types_parity.py`` check loss, gradients and metrics against it. What differs between loss types
(the per-token surrogate and the normaliser) is the loss type's, :mod:`grpo_core.algorithm.loss_types`;
this function holds what they share, in TRL's order: the ratio, the KL term (bias-corrected by the ratio),
the surrogate, the off-policy and high-entropy token masks, the sampler's correction, the KL added, the normaliser,
the entropy bonus (:mod:`grpo_core.algorithm.entropy`), the metrics.

A micro-batch may itself be run as several row slices (the trainer's ``micro_batch_tokens`` memory budget):
pass the whole micro-batch's ``group_rows`` and ``group_tokens`` and each slice's loss is its exact share,
so the slices' losses (and gradients) sum to the micro-batch's.
"""

from __future__ import annotations

import torch

from grpo_core.algorithm.entropy import EntropyInputs, entropy_bonus
from grpo_core.algorithm.loss_cispo import CISPO
from grpo_core.algorithm.loss_luspo import LUSPO
from grpo_core.algorithm.loss_sapo import SAPO
from grpo_core.algorithm.loss_types import BUILTIN_LOSS_TYPES, LossInputs, LossType
from grpo_core.algorithm.loss_vespo import VESPO
from grpo_core.config import IMPORTANCE_SAMPLING_LEVELS

BUILTIN = {cls.name: cls for cls in (*BUILTIN_LOSS_TYPES, CISPO, SAPO, LUSPO, VESPO)}


def grpo_loss(
    per_token_logps: torch.Tensor,
    completion_mask: torch.Tensor,
    advantages: torch.Tensor,
    *,
    old_per_token_logps: torch.Tensor | None = None,
    ref_per_token_logps: torch.Tensor | None = None,
    loss_type: str | LossType = "dapo",
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
    importance_sampling_level: str = "token",
    off_policy_mask_threshold: float | None = None,
    sampling_per_token_logps: torch.Tensor | None = None,
    entropy: EntropyInputs | None = None,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Loss of one micro-batch ``[B, K]`` and detached metrics (``loss``, ``kl``, the loss type's own:
    ``clip_ratio/*`` for the clipped surrogate).

    ``loss_type``: a :class:`~grpo_core.algorithm.loss_types.LossType` (the trainer passes the one registered
    under ``[grpo] loss_type``), or a built-in's name. ``group_rows`` / ``group_tokens``: rows and completion tokens of the micro-batch this tensor is
    a slice of (default: this tensor's own), the denominators of the grpo, bnpo and dr_grpo
    normalisers; the metrics stay means over this slice.

    ``old_per_token_logps`` None means on-policy (``num_iterations == 1``): the ratio is 1
    but its gradient is the policy gradient. ``ref_per_token_logps`` is needed when
    ``beta != 0``. ``advantages`` is ``[B]`` (or ``[B, K]``). ``kl_bias_correction`` multiplies
    the KL term by the (differentiable) ratio, as TRL's ``use_bias_correction_kl`` (its default).
    ``importance_sampling_ratio`` (``[B, K]`` or ``[B, 1]``, grpo_core.algorithm.sampler_correction) multiplies the
    surrogate (unless the loss type's ``corrects_sampler`` is False) before the KL term is added, as TRL's vLLM importance-sampling correction.
    ``importance_sampling_level``: ``"token"`` (a ratio per token) or ``"sequence"`` (GSPO: one ratio per
    sequence, the exp of its masked mean log-ratio, ``[B, 1]``). ``off_policy_mask_threshold`` (DeepSeek-V3.2's
    off-policy sequence mask): a sequence with a negative advantage whose mean ``sampling - policy`` log-prob
    gap exceeds it is left out of the surrogate; ``sampling_per_token_logps`` is the sampler's log-probs (default
    the old policy's). ``entropy`` (:mod:`grpo_core.algorithm.entropy`): the high-entropy token mask multiplies
    the surrogate (``top_entropy_quantile``), and ``entropy.coef`` times the mean entropy is subtracted from the
    loss (``entropy_coef``; the metrics then hold ``policy_loss``, the loss before the bonus, as TRL logs it).
    """
    if isinstance(loss_type, str):
        if loss_type not in BUILTIN:
            raise ValueError(f"loss_type must be one of {', '.join(BUILTIN)} (or a LossType), got {loss_type!r}")
        loss_type = BUILTIN[loss_type]()
    epsilon_high = epsilon if epsilon_high is None else epsilon_high
    mask = completion_mask.to(per_token_logps.dtype)
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(1)
    old = per_token_logps.detach() if old_per_token_logps is None else old_per_token_logps

    log_ratio = per_token_logps - old
    if importance_sampling_level == "token":
        coef_1 = torch.exp(log_ratio)  # value 1 when on-policy, with the policy gradient
    elif importance_sampling_level == "sequence":  # GSPO: one ratio per sequence
        coef_1 = torch.exp(((log_ratio * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).unsqueeze(-1))
    else:
        raise ValueError(f"importance_sampling_level must be one of {', '.join(IMPORTANCE_SAMPLING_LEVELS)}, "
                         f"got {importance_sampling_level!r}")

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

    inputs = LossInputs(
        per_token_logps=per_token_logps, ratio=coef_1, log_ratio=log_ratio, advantages=advantages, mask=mask, epsilon=epsilon,
        epsilon_high=epsilon_high, delta=delta, importance_sampling_ratio=importance_sampling_ratio,
        rows=per_token_logps.size(0) if group_rows is None else group_rows, tokens=group_tokens,
        items=num_items_in_batch, max_completion_length=max_completion_length, grad_accum_steps=grad_accum_steps)
    per_token_loss, indicators = loss_type.surrogate(inputs)
    if off_policy_mask_threshold is not None:
        per_token_loss = per_token_loss * off_policy_mask(
            advantages, per_token_logps, old if sampling_per_token_logps is None else sampling_per_token_logps,
            mask, off_policy_mask_threshold)
    if entropy is not None and entropy.token_mask is not None:  # top_entropy_quantile: the high-entropy tokens
        per_token_loss = per_token_loss * entropy.token_mask
    if importance_sampling_ratio is not None and loss_type.corrects_sampler:  # the trainer/sampler mismatch
        per_token_loss = per_token_loss * importance_sampling_ratio
    if per_token_kl is not None:
        per_token_loss = per_token_loss + beta * per_token_kl
    loss = loss_type.normalise(per_token_loss, inputs)
    if entropy is not None and entropy.coef != 0.0:  # the entropy bonus: the same meaning for every loss type
        metrics["policy_loss"] = loss.detach() * grad_accum_steps
        loss = loss - entropy.coef * entropy_bonus(entropy, mask, grad_accum_steps)

    with torch.no_grad():
        for key, value in indicators.items():
            metrics[key] = _masked_mean(value.detach().to(mask.dtype), mask)
        # x grad_accum_steps: the mean of the micro-batches' values is then the whole batch's loss (for dapo,
        # whose micro-batch losses are shares of one global token mean, as for the others)
        metrics["loss"] = loss.detach() * grad_accum_steps
    return loss, metrics


def off_policy_mask(advantages: torch.Tensor, per_token_logps: torch.Tensor, sampling_logps: torch.Tensor,
                    mask: torch.Tensor, threshold: float) -> torch.Tensor:
    """``[B, 1]``: 0 for a sequence with a negative advantage whose mean ``sampling - policy`` log-prob gap over
    its tokens exceeds ``threshold`` (DeepSeek-V3.2, eq. 9; TRL's ``get_off_policy_mask``), else 1. Tokens the
    sampler could not score (NaN) count as no gap."""
    gap = torch.nan_to_num(sampling_logps - per_token_logps.detach(), nan=0.0)
    mean_gap = (gap * mask).sum(-1, keepdim=True) / mask.sum(-1, keepdim=True).clamp(min=1.0)
    return ((advantages >= 0) | (mean_gap <= threshold)).to(mask.dtype)


def _masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The mean over the completion tokens; a ``[B, 1]`` value (one per sequence) is a mean over sequences."""
    if x.size(-1) == 1 and mask.size(-1) != 1:
        return x.mean()
    return (x * mask).sum() / mask.sum().clamp(min=1.0)
