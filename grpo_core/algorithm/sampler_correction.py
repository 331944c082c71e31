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

``none`` applies nothing. The metrics use TRL's names: ``sampling/sampling_logp_difference/{mean,max}``
(absolute token log-prob gap) and ``sampling/importance_sampling_ratio/{min,mean,max}``.
"""

from __future__ import annotations

import math

import torch

from grpo_core.config import IMPORTANCE_SAMPLING as MODES


def importance_ratio(trainer_logps: torch.Tensor, sampler_logps: torch.Tensor, completion_mask: torch.Tensor,
                     mode: str, clip_min: float | None = None, clip_max: float | None = 3.0,
                     ) -> tuple[torch.Tensor | None, dict[str, float]]:
    """``(rho, metrics)`` for ``[B, K]`` log-probs: ``rho`` is ``[B, K]`` (token modes) or ``[B, 1]``
    (sequence modes), detached, to multiply the per-token loss; None for ``mode = "none"``."""
    if mode not in MODES:
        raise ValueError(f"importance sampling mode must be one of {', '.join(MODES)}, got {mode!r}")
    mask = completion_mask.to(trainer_logps.dtype)
    trainer_logps = trainer_logps.detach()
    sampler_logps = sampler_logps.to(trainer_logps.dtype)
    gap = (trainer_logps - sampler_logps).abs()[mask.bool()]
    metrics = {
        "sampling/sampling_logp_difference/mean": gap.mean().item() if gap.numel() else 0.0,
        "sampling/sampling_logp_difference/max": gap.max().item() if gap.numel() else 0.0,
    }
    if mode == "none":
        return None, metrics
    diff = (trainer_logps - sampler_logps) * mask
    sequence = mode.startswith("sequence")
    rho = torch.exp(diff.sum(dim=-1, keepdim=True) if sequence else diff)
    if mode.endswith("truncate"):
        rho = torch.clamp(rho, min=clip_min, max=clip_max)
    else:
        low = -math.inf if clip_min is None else clip_min
        high = math.inf if clip_max is None else clip_max
        rho = rho.masked_fill((rho < low) | (rho > high), 0.0)
    flat = rho.flatten() if sequence else rho[mask.bool()]
    for name, fn in (("min", torch.min), ("mean", torch.mean), ("max", torch.max)):
        metrics[f"sampling/importance_sampling_ratio/{name}"] = fn(flat).item() if flat.numel() else 0.0
    return rho, metrics
