"""The numbers ``grpo eval`` reports: a mean with a bootstrap 95% interval over prompts, and pass@k.

``pass_at_k(n, c, k)`` is the unbiased estimator of Chen et al. 2021 (the Codex paper),
``1 - C(n - c, k) / C(n, k)``: the chance that k of the n samples, drawn without replacement, hold at
least one of the c correct ones. It is computed as the paper's numerically stable product
``1 - prod_{i = n - c + 1}^{n} (1 - k / i)`` (no binomials, so no overflow for large n).

``bootstrap_interval(values)`` is the percentile bootstrap of the mean: ``resamples`` draws of as many
prompts as there are, with replacement, the 2.5th and 97.5th percentiles of their means. The unit is the
prompt (each prompt's samples averaged first): samples of one prompt are not independent.
NumPy only, vectorised; no torch.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k of one prompt with ``c`` correct among ``n`` samples (see the module docs)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1, dtype=np.float64)))


def mean_pass_at_k(correct: Sequence[int], n: int, k: int) -> float:
    """pass@k averaged over prompts, ``correct[i]`` being prompt i's number of correct samples out of ``n``."""
    return float(np.mean([pass_at_k(n, int(c), k) for c in correct]))


def bootstrap_interval(values: Sequence[float], *, resamples: int = 2000, confidence: float = 0.95,
                       seed: int = 0) -> tuple[float, float]:
    """The percentile bootstrap interval of the mean of ``values`` (one per prompt); a single value (or
    identical values) gives a zero-width interval."""
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        return (float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, x.size, size=(resamples, x.size))].mean(axis=1)
    tail = (1.0 - confidence) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


def is_binary(values: Sequence[float | None]) -> bool:
    """Whether a reward is pass/fail: every value that is not None is 0 or one same positive number."""
    distinct = {float(v) for v in values if v is not None}
    return len(distinct - {0.0}) <= 1 and all(v >= 0 for v in distinct)
