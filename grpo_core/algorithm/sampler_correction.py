"""Importance-sampling correction for the trainer/sampler mismatch.

A separate inference engine (vLLM) samples with its own kernels and precision, so the
probability it gave a token differs from the policy's recomputed one even with equal weights.
The loss is multiplied by ``rho = exp(trainer log-prob - sampler log-prob)``, bounded by one of
TRL's four rules (``GRPOConfig.vllm_importance_sampling_mode``):

``token_truncate``     per token, ``rho`` clipped to ``[min, max]``
``token_mask``         per token, ``rho`` outside ``[min, max]`` set to 0 (the token is dropped)
``sequence_truncate``  one ``rho`` per completion (the sum of its token log-ratios), clipped
``sequence_mask``      one ``rho`` per completion, completions outside ``[min, max]`` dropped
                       (TRL's default, with ``max = 3`` and no ``min``)

``none`` applies nothing. verl's names for the same rules (``token_is``, ``seq_is``, ``token_rs``,
``seq_rs``; ``grpo_core.config.IMPORTANCE_SAMPLING_ALIASES``) are accepted as aliases.

Metrics, every step a correction applies, with TRL's names where TRL logs the quantity and verl's
(``rollout_corr/...``) for the rest; ``d = trainer log-prob - sampler log-prob`` per completion token:

``sampling/sampling_logp_difference/{mean,max}``  ``|d|`` over tokens (TRL)
``sampling/importance_sampling_ratio/{min,mean,max}``  the applied ratio over tokens or completions (TRL)
``rollout_corr/kl``      token mean of ``-d``: the direct estimate of KL(sampler || policy) (verl)
``rollout_corr/k3_kl``   token mean of ``exp(d) - d - 1`` (Schulman's k3, >= 0 per token) (verl)
``rollout_corr/rollout_is_ratio_fraction_{high,low}``  truncate rules: share of ratios (tokens or completions)
                         above ``max`` / below ``min`` before clipping, i.e. the share clipped (verl)
``rollout_corr/rollout_rs_masked_fraction``      mask rules: share of completion tokens dropped (verl)
``rollout_corr/rollout_rs_seq_masked_fraction``  mask rules: share of completions with a dropped token (verl)
"""

from __future__ import annotations

import math

import torch

from grpo_core.config import IMPORTANCE_SAMPLING as MODES
from grpo_core.config import IMPORTANCE_SAMPLING_ALIASES as ALIASES

SEQUENCE_WEIGHTED = ("rollout_corr/rollout_rs_seq_masked_fraction",)


def importance_ratio(trainer_logps: torch.Tensor, sampler_logps: torch.Tensor, completion_mask: torch.Tensor,
                     mode: str, clip_min: float | None = None, clip_max: float | None = 3.0,
                     ) -> tuple[torch.Tensor | None, dict[str, float]]:
    """``(rho, metrics)`` for ``[B, K]`` log-probs: ``rho`` is ``[B, K]`` (token modes) or ``[B, 1]``
    (sequence modes), detached, to multiply the per-token loss; None for ``mode = "none"``."""
    mode = ALIASES.get(mode, mode)
    if mode not in MODES:
        raise ValueError(f"importance sampling mode must be one of {', '.join((*MODES, *ALIASES))}, got {mode!r}")
    mask = completion_mask.to(trainer_logps.dtype)
    tokens = mask.bool()
    trainer_logps = trainer_logps.detach()
    sampler_logps = sampler_logps.to(trainer_logps.dtype)
    d = (trainer_logps - sampler_logps)[tokens]
    metrics = {
        "sampling/sampling_logp_difference/mean": d.abs().mean().item() if d.numel() else 0.0,
        "sampling/sampling_logp_difference/max": d.abs().max().item() if d.numel() else 0.0,
        "rollout_corr/kl": (-d).mean().item() if d.numel() else 0.0,
        "rollout_corr/k3_kl": (torch.expm1(d) - d).mean().item() if d.numel() else 0.0,
    }
    if mode == "none":
        return None, metrics
    diff = (trainer_logps - sampler_logps) * mask
    sequence = mode.startswith("sequence")
    rho = torch.exp(diff.sum(dim=-1, keepdim=True) if sequence else diff)
    low = -math.inf if clip_min is None else clip_min
    high = math.inf if clip_max is None else clip_max
    units = rho.flatten() if sequence else rho[tokens]  # before the rule: what it clips or drops
    if mode.endswith("truncate"):
        metrics["rollout_corr/rollout_is_ratio_fraction_high"] = _share(units > high)
        metrics["rollout_corr/rollout_is_ratio_fraction_low"] = _share(units < low)
        rho = torch.clamp(rho, min=clip_min, max=clip_max)
    else:
        dropped = (rho < low) | (rho > high)
        rho = rho.masked_fill(dropped, 0.0)
        dropped_tokens = dropped.expand_as(tokens) & tokens
        metrics["rollout_corr/rollout_rs_masked_fraction"] = _share(dropped_tokens[tokens])
        metrics["rollout_corr/rollout_rs_seq_masked_fraction"] = _share(dropped_tokens.any(dim=-1))
    flat = rho.flatten() if sequence else rho[tokens]
    for name, fn in (("min", torch.min), ("mean", torch.mean), ("max", torch.max)):
        metrics[f"sampling/importance_sampling_ratio/{name}"] = fn(flat).item() if flat.numel() else 0.0
    return rho, metrics


def _share(flags: torch.Tensor) -> float:
    return flags.float().mean().item() if flags.numel() else 0.0


def metric_weights(metrics: dict[str, float], mode: str, n_tokens: int, n_rows: int) -> dict[str, int]:
    """How many values each metric averages (tokens, or completions for the sequence-level ones), to combine
    the ranks' numbers (``grpo_core.trainer.reduce_weighted``)."""
    sequence = ALIASES.get(mode, mode).startswith("sequence")
    per_unit = ("importance_sampling_ratio", "rollout_is_ratio_fraction")
    return {key: n_rows if key in SEQUENCE_WEIGHTED or (sequence and any(p in key for p in per_unit))
            else n_tokens for key in metrics}
