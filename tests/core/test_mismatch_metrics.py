"""The sampler/policy mismatch metrics (k3 KL, the share clipped or dropped) on hand-computed cases, their
combination across ranks, and verl's names for the four rules as configuration aliases."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

from grpo_core.algorithm.sampler_correction import importance_ratio, metric_weights
from grpo_core.trainer import reduce_weighted

# d = trainer - sampler: row 0 (0.5, 0, -0.5), row 1 (1.2, 0) + padding, row 2 (-0.1) + padding
TRAINER = torch.tensor([[-1.0, -2.0, -1.0], [-0.3, -1.0, 0.0], [-2.1, 0.0, 0.0]])
SAMPLER = torch.tensor([[-1.5, -2.0, -0.5], [-1.5, -1.0, -7.0], [-2.0, -4.0, 9.0]])
MASK = torch.tensor([[1, 1, 1], [1, 1, 0], [1, 0, 0]])
D = [0.5, 0.0, -0.5, 1.2, 0.0, -0.1]


def k3(d: float) -> float:
    return math.exp(d) - d - 1


def test_kl_estimators_over_completion_tokens_only() -> None:
    _, m = importance_ratio(TRAINER, SAMPLER, MASK, "none")
    assert m["rollout_corr/kl"] == pytest.approx(-sum(D) / 6)
    assert m["rollout_corr/k3_kl"] == pytest.approx(sum(k3(d) for d in D) / 6)
    assert m["sampling/sampling_logp_difference/max"] == pytest.approx(1.2)
    assert "rollout_corr/rollout_rs_masked_fraction" not in m  # nothing applied: nothing to count


def test_k3_is_zero_when_the_sampler_is_the_policy_and_positive_otherwise() -> None:
    _, same = importance_ratio(TRAINER, TRAINER.clone(), MASK, "token_mask", 0.5, 2.0)
    assert same["rollout_corr/k3_kl"] == 0.0 and same["rollout_corr/rollout_rs_masked_fraction"] == 0.0
    _, m = importance_ratio(TRAINER, SAMPLER, MASK, "token_mask", 0.5, 2.0)
    assert m["rollout_corr/k3_kl"] > 0


def test_token_truncate_counts_the_tokens_clipped_at_each_bound() -> None:
    # per-token ratios e^0.5 = 1.65, 1, e^-0.5 = 0.61, e^1.2 = 3.32, 1, e^-0.1 = 0.90 against [0.7, 1.5]
    rho, m = importance_ratio(TRAINER, SAMPLER, MASK, "token_truncate", 0.7, 1.5)
    assert m["rollout_corr/rollout_is_ratio_fraction_high"] == pytest.approx(2 / 6)
    assert m["rollout_corr/rollout_is_ratio_fraction_low"] == pytest.approx(1 / 6)
    assert rho[0].tolist() == pytest.approx([1.5, 1.0, 0.7])


def test_token_mask_counts_dropped_tokens_and_the_completions_they_hit() -> None:
    rho, m = importance_ratio(TRAINER, SAMPLER, MASK, "token_mask", 0.7, 1.5)
    assert m["rollout_corr/rollout_rs_masked_fraction"] == pytest.approx(3 / 6)  # 1.65, 0.61, 3.32
    assert m["rollout_corr/rollout_rs_seq_masked_fraction"] == pytest.approx(2 / 3)  # rows 0 and 1
    assert int((rho[MASK.bool()] == 0).sum()) == 3


def test_a_padding_position_outside_the_bounds_is_not_counted() -> None:
    # padding has ratio 1, which a min of 1.05 would drop: it is not a completion token
    _, m = importance_ratio(TRAINER, SAMPLER, MASK, "token_mask", 1.05, None)
    assert m["rollout_corr/rollout_rs_masked_fraction"] == pytest.approx(4 / 6)  # 1, 0.61, 1, 0.90
    assert m["rollout_corr/rollout_rs_seq_masked_fraction"] == pytest.approx(1.0)


def test_sequence_rules_count_completions() -> None:
    # sequence ratios: e^0 = 1, e^1.2 = 3.32, e^-0.1 = 0.905
    _, m = importance_ratio(TRAINER, SAMPLER, MASK, "sequence_mask", None, 3.0)
    assert m["rollout_corr/rollout_rs_seq_masked_fraction"] == pytest.approx(1 / 3)
    assert m["rollout_corr/rollout_rs_masked_fraction"] == pytest.approx(2 / 6)  # row 1's two tokens
    _, m = importance_ratio(TRAINER, SAMPLER, MASK, "sequence_truncate", 0.95, 3.0)
    assert m["rollout_corr/rollout_is_ratio_fraction_high"] == pytest.approx(1 / 3)
    assert m["rollout_corr/rollout_is_ratio_fraction_low"] == pytest.approx(1 / 3)


@pytest.mark.parametrize("alias, rule", [("token_is", "token_truncate"), ("seq_is", "sequence_truncate"),
                                         ("token_rs", "token_mask"), ("seq_rs", "sequence_mask")])
def test_verl_names_are_the_same_rules(alias: str, rule: str) -> None:
    a = importance_ratio(TRAINER, SAMPLER, MASK, alias, 0.7, 1.5)
    b = importance_ratio(TRAINER, SAMPLER, MASK, rule, 0.7, 1.5)
    torch.testing.assert_close(a[0], b[0], rtol=0, atol=0)
    assert a[1] == b[1]


@pytest.mark.parametrize("mode", ["token_truncate", "token_mask", "sequence_truncate", "sequence_mask"])
def test_ranks_combine_to_the_whole_batch(mode: str) -> None:
    """Two ranks holding rows {0} and {1, 2}: the weighted means equal the one-rank numbers."""
    whole = importance_ratio(TRAINER, SAMPLER, MASK, mode, 0.7, 1.5)[1]
    parts = []
    for rows in ([0], [1, 2]):
        m = importance_ratio(TRAINER[rows], SAMPLER[rows], MASK[rows], mode, 0.7, 1.5)[1]
        parts.append((m, metric_weights(m, mode, int(MASK[rows].sum()), len(rows))))
    combined = reduce_weighted(parts)
    assert combined.keys() == whole.keys()
    for key, value in whole.items():
        assert combined[key] == pytest.approx(value), key


def test_alias_in_the_run_file_is_stored_as_the_rule(core_registry: Any) -> None:
    from grpo_core.config import config_from_dict

    base = {"model": {"name_or_path": "m"}, "data": {"source": "hub/x"}, "rewards": {"a": {"use": "core_len"}}}
    cfg = config_from_dict({**base, "generation": {"importance_sampling": "seq_rs"}}, registry=core_registry)
    assert cfg.generation.importance_sampling == "sequence_mask"
    cfg = config_from_dict({**base, "generation": {"importance_sampling": "token_is", "importance_sampling_max": 2.0}},
                           registry=core_registry)
    assert cfg.generation.importance_sampling == "token_truncate"
