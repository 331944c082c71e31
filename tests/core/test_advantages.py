"""Group-relative advantages: hand-computed values, unscorable rows, scale modes, TRL's formula."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from grpo_core.advantages import group_advantages  # noqa: E402


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
