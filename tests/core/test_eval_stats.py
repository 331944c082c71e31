"""``grpo eval``'s statistics: pass@k against a brute-force enumeration of every k-subset, and the bootstrap
interval's coverage of a known mean."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from grpo_core.evaluation.stats import bootstrap_interval, is_binary, mean_pass_at_k, pass_at_k


def brute_force_pass_at_k(n: int, c: int, k: int) -> float:
    """The fraction of the k-subsets of n samples (the first c correct) holding a correct one."""
    subsets = list(itertools.combinations(range(n), k))
    return sum(any(i < c for i in s) for s in subsets) / len(subsets)


@pytest.mark.parametrize("n", range(1, 9))
def test_pass_at_k_equals_enumeration(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert pass_at_k(n, c, k) == pytest.approx(brute_force_pass_at_k(n, c, k), abs=1e-12), (n, c, k)


def test_pass_at_k_is_stable_where_binomials_overflow():
    n, c, k = 2000, 3, 500  # C(2000, 500) is far beyond a float; the exact value from integers:
    exact = 1 - math.comb(n - c, k) / math.comb(n, k)
    assert pass_at_k(n, c, k) == pytest.approx(exact, rel=1e-12)
    assert pass_at_k(10, 0, 3) == 0.0 and pass_at_k(10, 8, 3) == 1.0 and pass_at_k(5, 2, 1) == pytest.approx(0.4)
    assert mean_pass_at_k([0, 5], 5, 1) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        pass_at_k(4, 1, 5)


def test_bootstrap_interval_covers_the_true_mean_about_95_percent_of_the_time():
    rng = np.random.default_rng(123)
    trials, prompts, p = 400, 60, 0.3
    covered = 0
    for t in range(trials):
        values = (rng.random(prompts) < p).astype(float)  # each prompt pass/fail with a known chance
        low, high = bootstrap_interval(values, resamples=1000, seed=t)
        covered += low <= p <= high
    # the percentile bootstrap of a Bernoulli mean at n = 60 covers a little under 95%; a broken interval
    # (too narrow, off-centre, or the 90% one) falls well outside this band
    assert 0.91 <= covered / trials <= 0.985, covered / trials
    width = bootstrap_interval((rng.random(prompts) < p).astype(float))
    assert 0.15 < width[1] - width[0] < 0.32  # about 2 * 1.96 * sqrt(p (1 - p) / n) = 0.23


def test_bootstrap_degenerate_and_binary_detection():
    assert bootstrap_interval([0.5]) == (0.5, 0.5)
    assert all(math.isnan(v) for v in bootstrap_interval([]))
    assert is_binary([0.0, 2.0, None, 2.0]) and is_binary([0.0, 0.0]) and is_binary([1.0])
    assert not is_binary([0.0, 0.5, 1.0]) and not is_binary([-1.0, 0.0])
