"""Group-relative advantages, TRL's maths for both ``multi_objective_aggregation`` rules.

``sum_then_normalize`` (:func:`group_advantages`, the default): the weighted total ``R`` of
each completion, then ``(R - group mean) / (std + 1e-4)``.

``normalize_then_sum`` (:func:`normalize_then_sum_advantages`, GDPO): each reward is
normalised within its group first, ``(r_k - group mean_k) / (group std_k + 1e-4)``; the
weighted sum of those is then normalised over the whole batch. A reward with a large
spread can no longer drown the others. ``scale_rewards`` does not apply (as in TRL).

Rewards arrive as one float per completion, ``num_generations`` consecutive completions
per prompt, with ``NaN`` for ``None`` (the reward does not apply to that row). A row where
every reward is ``None`` is unscorable: it is left out of the means and standard
deviations and gets advantage 0; a ``None`` of one reward leaves that reward's term out of
the row's sum (a NaN-sum).

``scale_rewards``:
``"group"``  divide by the Bessel-corrected std of the group (GRPO)
``"batch"``  divide by the Bessel-corrected std of the whole batch (the mean stays per group)
``"none"``   no division (Dr. GRPO)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from grpo_core.config import MULTI_OBJECTIVE_AGGREGATIONS as AGGREGATIONS
from grpo_core.config import SCALE_REWARDS

EPS = 1e-4


def nanstd(x: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """Bessel-corrected standard deviation ignoring NaNs (NaN where fewer than two values)."""
    mean = torch.nanmean(x, dim=dim, keepdim=True)
    var = torch.nanmean((x - mean) ** 2, dim=dim, keepdim=True)
    count = (~torch.isnan(x)).sum(dim=dim, keepdim=True)
    var = var * torch.where(count > 1, count / (count - 1), torch.full_like(var, float("nan")))
    std = var.sqrt()
    return std.squeeze(dim) if dim is not None else std.reshape(())


def group_advantages(
    rewards: torch.Tensor, num_generations: int, scale_rewards: str = "group"
) -> tuple[torch.Tensor, dict[str, float]]:
    """Advantages for ``rewards [N]`` (``N = prompts * num_generations``) and statistics for logging.

    Stats: ``reward_mean``, ``reward_std`` (over scored rows), ``frac_reward_zero_std`` (groups
    whose rewards are all equal: no learning signal), ``advantage_mean/std/abs_max`` and
    ``frac_unscored``.
    """
    if scale_rewards not in SCALE_REWARDS:
        raise ValueError(f"scale_rewards must be one of {', '.join(SCALE_REWARDS)}, got {scale_rewards!r}")
    if rewards.dim() != 1 or num_generations < 1 or rewards.numel() % num_generations:
        raise ValueError(
            f"rewards must be a flat tensor whose length ({rewards.numel()}) is a multiple of "
            f"num_generations ({num_generations})"
        )
    rewards = rewards.float()
    grouped = rewards.view(-1, num_generations)
    mean = torch.nanmean(grouped, dim=1).repeat_interleave(num_generations)
    if scale_rewards == "batch":
        std = nanstd(rewards).expand_as(rewards) if rewards.numel() > 1 else torch.zeros_like(rewards)
    elif num_generations > 1:
        std = nanstd(grouped, dim=1).repeat_interleave(num_generations)
    else:
        std = torch.zeros_like(rewards)
    advantages = rewards - mean
    if scale_rewards != "none":
        advantages = advantages / (std + EPS)
    advantages = torch.nan_to_num(advantages, nan=0.0)

    scored = ~torch.isnan(rewards)
    valid = rewards[scored]
    group_std = nanstd(grouped, dim=1) if num_generations > 1 else torch.zeros(grouped.size(0))
    stats = {
        "reward_mean": valid.mean().item() if valid.numel() else float("nan"),
        "reward_std": valid.std().item() if valid.numel() > 1 else 0.0,
        "frac_reward_zero_std": torch.isclose(
            torch.nan_to_num(group_std, nan=0.0), torch.zeros_like(group_std)
        ).float().mean().item(),
        "advantage_mean": advantages.mean().item(),
        "advantage_std": advantages.std().item() if advantages.numel() > 1 else 0.0,
        "advantage_abs_max": advantages.abs().max().item(),
        "frac_unscored": 1.0 - scored.float().mean().item(),
    }
    return advantages, stats


def normalize_then_sum_advantages(
    rewards_per_func: torch.Tensor, weights: torch.Tensor | list[float], num_generations: int
) -> tuple[torch.Tensor, dict[str, float]]:
    """GDPO advantages for ``rewards_per_func [N, K]`` (NaN for None) and ``weights [K]``, with the statistics of
    :func:`group_advantages` (``reward_*`` describe the plain weighted total, as TRL logs it)."""
    if rewards_per_func.dim() != 2 or num_generations < 1 or rewards_per_func.size(0) % num_generations:
        raise ValueError(
            f"rewards_per_func must be [N, K] with N ({rewards_per_func.size(0) if rewards_per_func.dim() else 0}) "
            f"a multiple of num_generations ({num_generations})"
        )
    per_func = rewards_per_func.float()
    w = torch.as_tensor(weights, dtype=torch.float32)
    if w.shape != (per_func.size(1),):
        raise ValueError(f"{per_func.size(1)} rewards but {w.numel()} weights")
    unscorable = torch.isnan(per_func).all(dim=1)
    grouped = per_func.view(-1, num_generations, per_func.size(1))
    mean_k = torch.nanmean(grouped, dim=1, keepdim=True)
    std_k = nanstd(grouped, dim=1).unsqueeze(1) if num_generations > 1 else torch.zeros_like(mean_k)
    normalised = ((grouped - mean_k) / (std_k + EPS)).view_as(per_func)
    summed = (normalised * w).nansum(dim=1)
    summed[unscorable] = float("nan")
    std = nanstd(summed).expand_as(summed) if summed.numel() > 1 else torch.zeros_like(summed)
    advantages = torch.nan_to_num((summed - torch.nanmean(summed)) / (std + EPS), nan=0.0)

    total = (per_func * w).nansum(dim=1)
    total[unscorable] = float("nan")
    valid = total[~unscorable]
    stats = {
        "reward_mean": valid.mean().item() if valid.numel() else float("nan"),
        "reward_std": valid.std().item() if valid.numel() > 1 else 0.0,
        "frac_reward_zero_std": torch.isclose(torch.nan_to_num(std, nan=0.0), torch.zeros_like(std)).float().mean().item(),
        "advantage_mean": advantages.mean().item(),
        "advantage_std": advantages.std().item() if advantages.numel() > 1 else 0.0,
        "advantage_abs_max": advantages.abs().max().item(),
        "frac_unscored": unscorable.float().mean().item(),
    }
    return advantages, stats


def compute_advantages(
    total: torch.Tensor,
    columns: Mapping[str, Sequence[float | None]],
    weights: Sequence[float],
    num_generations: int,
    scale_rewards: str = "group",
    aggregation: str = "sum_then_normalize",
) -> tuple[torch.Tensor, dict[str, float]]:
    """The trainer's entry point: ``total`` (the weighted NaN-sum, NaN where unscorable) for
    ``sum_then_normalize``; each reward's ``columns`` (in the order of ``weights``) for ``normalize_then_sum``."""
    if aggregation == "sum_then_normalize":
        return group_advantages(total, num_generations, scale_rewards)
    if aggregation == "normalize_then_sum":
        nan = float("nan")
        per_func = torch.tensor([[nan if v is None else float(v) for v in col] for col in columns.values()],
                                dtype=torch.float32).T.reshape(len(total), len(columns))
        return normalize_then_sum_advantages(per_func, list(weights), num_generations)
    raise ValueError(f"multi_objective_aggregation must be one of {', '.join(AGGREGATIONS)}, got {aggregation!r}")
