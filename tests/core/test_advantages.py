"""Group-relative advantages: hand-computed values, unscorable rows, scale modes, TRL's formula."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from grpo_core.algorithm.advantages import group_advantages  # noqa: E402


def test_group_scaling_by_hand():
    rewards = torch.tensor([1.0, 0.0, 0.0, 0.0, 2.0, 4.0])
    adv, stats = group_advantages(rewards, 3, "group")
    # group 1: mean 1/3, Bessel std sqrt(1/3); group 2: mean 2, std 2
    s1 = math.sqrt(((2 / 3) ** 2 + 2 * (1 / 3) ** 2) / 2)
    expected = [(2 / 3) / (s1 + 1e-4), (-1 / 3) / (s1 + 1e-4), (-1 / 3) / (s1 + 1e-4),
                -2 / (2 + 1e-4), 0.0, 2 / (2 + 1e-4)]
    torch.testing.assert_close(adv, torch.tensor(expected), rtol=1e-6, atol=1e-6)
    assert stats["reward_mean"] == pytest.approx(7 / 6)
    assert stats["frac_reward_zero_std"] == 0.0


def test_equal_rewards_give_zero_advantage_and_are_counted():
    adv, stats = group_advantages(torch.tensor([1.0, 1.0, 0.0, 1.0]), 2)
    assert adv[:2].tolist() == [0.0, 0.0]
    assert adv[2] < 0 < adv[3]
    assert stats["frac_reward_zero_std"] == 0.5


def test_unscorable_rows_get_zero_and_leave_the_statistics():
    nan = float("nan")
    rewards = torch.tensor([nan, 1.0, 3.0, 5.0])
    adv, stats = group_advantages(rewards, 4, "group")
    ref, _ = group_advantages(torch.tensor([1.0, 3.0, 5.0]), 3, "group")
    assert adv[0] == 0.0
    torch.testing.assert_close(adv[1:], ref)
    assert stats["frac_unscored"] == 0.25
    assert stats["reward_mean"] == pytest.approx(3.0)
    all_none, _ = group_advantages(torch.tensor([nan, nan, 1.0, 2.0]), 2)
    assert all_none[:2].tolist() == [0.0, 0.0] and not torch.isnan(all_none).any()


def test_batch_and_none_scaling():
    rewards = torch.tensor([0.0, 2.0, 10.0, 14.0])
    none, _ = group_advantages(rewards, 2, "none")
    assert none.tolist() == [-1.0, 1.0, -2.0, 2.0]
    batch, _ = group_advantages(rewards, 2, "batch")
    std = rewards.std()  # Bessel-corrected over the whole batch
    torch.testing.assert_close(batch, none / (std + 1e-4))


@pytest.mark.parametrize("scale", ["group", "batch", "none"])
def test_matches_trl_formula(scale):
    trl_utils = pytest.importorskip("trl.trainer.utils")
    g = torch.Generator().manual_seed(3)
    rewards = torch.randn(24, generator=g)
    rewards[[2, 9, 10]] = float("nan")
    n = 4
    mean = torch.nanmean(rewards.view(-1, n), dim=1).repeat_interleave(n)
    if scale == "batch":
        std = trl_utils.nanstd(rewards).expand_as(rewards)
    else:
        std = trl_utils.nanstd(rewards.view(-1, n), dim=1).repeat_interleave(n)
    expected = rewards - mean
    if scale != "none":
        expected = expected / (std + 1e-4)
    expected = torch.nan_to_num(expected, nan=0.0)
    ours, _ = group_advantages(rewards, n, scale)
    torch.testing.assert_close(ours, expected)


def test_bad_input_is_a_clear_error():
    with pytest.raises(ValueError, match="scale_rewards"):
        group_advantages(torch.zeros(4), 2, "grup")
    with pytest.raises(ValueError, match="multiple of num_generations"):
        group_advantages(torch.zeros(5), 2)


# ---- normalize_then_sum (GDPO) ----

def _trl_normalize_then_sum(rewards_per_func, reward_weights, num_generations):
    """TRL 1.16.0, trl/trainer/grpo_trainer.py, GRPOTrainer._generate_and_score_completions, the
    ``multi_objective_aggregation == "normalize_then_sum"`` branch and the unscorable mask around it
    (lines 2758-2811 of the released wheel), transcribed with trl.trainer.utils.nanstd."""
    from trl.trainer.utils import nanstd

    unscorable_mask = torch.isnan(rewards_per_func).all(dim=1)
    grouped = rewards_per_func.view(-1, num_generations, rewards_per_func.size(1))
    mean_k = torch.nanmean(grouped, dim=1, keepdim=True)
    std_k = nanstd(grouped, dim=1, keepdim=True) if num_generations > 1 else torch.zeros_like(mean_k)
    reward_k = (grouped - mean_k) / (std_k + 1e-4)
    reward_k = reward_k.view(-1, rewards_per_func.size(1))
    rewards = (reward_k * reward_weights.unsqueeze(0)).nansum(dim=1)
    rewards[unscorable_mask] = torch.nan
    std_rewards = nanstd(rewards).expand_as(rewards) if rewards.numel() > 1 else torch.zeros_like(rewards)
    advantages = (rewards - torch.nanmean(rewards)) / (std_rewards + 1e-4)
    return torch.nan_to_num(advantages, nan=0.0)


def test_normalize_then_sum_by_hand():
    from grpo_core.algorithm.advantages import normalize_then_sum_advantages

    # one group of 2; reward a = [0, 10] (large spread), reward b = [0, 1]; weights 1 and 3
    adv, stats = normalize_then_sum_advantages(torch.tensor([[0.0, 0.0], [10.0, 1.0]]), [1.0, 3.0], 2)
    a = 5 / (math.sqrt(50) + 1e-4)  # (10 - 5) / (Bessel std of [0, 10] + eps)
    b = 0.5 / (math.sqrt(0.5) + 1e-4)
    s = a + 3 * b  # the weighted sum of the normalised rewards, -s and +s
    expected = s / (math.sqrt(2) * s + 1e-4)  # normalised over the batch (mean 0, Bessel std sqrt(2) * s)
    torch.testing.assert_close(adv, torch.tensor([-expected, expected]), rtol=1e-6, atol=1e-6)
    assert stats["reward_mean"] == pytest.approx(6.5) and stats["frac_unscored"] == 0.0


@pytest.mark.parametrize("seed", range(5))
def test_normalize_then_sum_matches_trl(seed):
    pytest.importorskip("trl")
    from grpo_core.algorithm.advantages import normalize_then_sum_advantages

    g = torch.Generator().manual_seed(seed)
    per_func = torch.randn(12, 3, generator=g) * torch.tensor([1.0, 10.0, 0.1])
    per_func[torch.rand(12, 3, generator=g) < 0.25] = float("nan")  # None scores
    per_func[5] = float("nan")  # a row no reward could score
    per_func[8:10, 1] = 3.0  # a reward constant within a group
    weights = torch.tensor([1.0, 0.5, 2.0])
    ours, stats = normalize_then_sum_advantages(per_func, weights, 4)
    torch.testing.assert_close(ours, _trl_normalize_then_sum(per_func.clone(), weights, 4), rtol=1e-5, atol=1e-5)
    assert ours[5] == 0.0 and stats["frac_unscored"] == pytest.approx(1 / 12)


def test_normalize_then_sum_checks_its_shapes():
    from grpo_core.algorithm.advantages import normalize_then_sum_advantages

    with pytest.raises(ValueError, match="2 rewards but 3 weights"):
        normalize_then_sum_advantages(torch.zeros(4, 2), [1.0, 1.0, 1.0], 2)
    with pytest.raises(ValueError, match="multiple of num_generations"):
        normalize_then_sum_advantages(torch.zeros(5, 2), [1.0, 1.0], 2)


def test_compute_advantages_dispatches_on_the_aggregation_rule():
    from grpo_core.algorithm.advantages import compute_advantages, normalize_then_sum_advantages

    columns = {"a": [0.0, 10.0, None, 1.0], "b": [0.0, 1.0, None, None]}
    total = torch.tensor([0.0, 13.0, float("nan"), 1.0])
    adv, _ = compute_advantages(total, columns, [1.0, 3.0], 2, "group")
    torch.testing.assert_close(adv, group_advantages(total, 2, "group")[0])
    adv, _ = compute_advantages(total, columns, [1.0, 3.0], 2, "group", "normalize_then_sum")
    per_func = torch.tensor([[0.0, 0.0], [10.0, 1.0], [float("nan")] * 2, [1.0, float("nan")]])
    torch.testing.assert_close(adv, normalize_then_sum_advantages(per_func, [1.0, 3.0], 2)[0])
    assert adv[2] == 0.0
    with pytest.raises(ValueError, match="multi_objective_aggregation must be one of"):
        compute_advantages(total, columns, [1.0, 3.0], 2, "group", "sum")
