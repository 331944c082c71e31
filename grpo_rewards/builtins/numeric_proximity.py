"""``numeric_proximity`` reward: the closer the extracted number to the reference, the more reward.

``mode = "smooth"`` (default): with ``err = |answer - reference| / max(|reference|, 1)``
(relative error; absolute for references under 1 in size)::

    score = value / (1 + (err / tolerance) ** 2)

smooth, strictly decreasing in the distance, in ``(0, value]``: ``value`` when exact,
``value / 2`` at ``tolerance`` (10% by default); for reference 10, 9 scores 0.5 and 3
scores 0.02. No answer, or an answer that is not a number, scores ``missing_value``
(default 0.0).

``mode = "tiered"``: the ratio rule of Unsloth's newer GRPO notebooks (``check_answer``):
equal 5.0; ``answer / reference`` within ``[0.9, 1.1]`` 2.0; within ``[0.8, 1.2]`` 1.5;
otherwise -2.5; not a number -4.5; no answer -2.0 (``missing_value``). Override any
tier with ``tiers = { exact = 3.0, near = 0.5, close = 0.25, far = -1.0, unparsable = -0.5 }``
(the older Gemma-3 notebook's values). Deliberate differences: equality is numeric after
normalisation (so the notebook's separate 3.5 "equal after strip" tier cannot occur and
``1,080`` equals ``1080``), ratios are exact fractions, and a wrong answer to reference 0
scores ``far`` (the notebook divides by zero and scores -4.5).

Both modes score ``None`` when the reference is not a number (the row does not count).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from grpo_rewards.builtins.exact_match import _check_reference_extract, reference_answer
from grpo_rewards.completions import completion_text
from grpo_rewards.extraction import check_extraction, extract_answer
from grpo_rewards.normalize import parse_number
from grpo_rewards.specs import RewardFunction, RewardSpec

MODES = ("smooth", "tiered")
TIERS = {"exact": 5.0, "near": 2.0, "close": 1.5, "far": -2.5, "unparsable": -4.5}
NEAR, CLOSE = (Fraction(9, 10), Fraction(11, 10)), (Fraction(8, 10), Fraction(12, 10))


def _smooth(value: float, tolerance: float):
    def score(got: Fraction, ref: Fraction) -> float:
        if got == ref:
            return value
        try:
            q = abs(float(got - ref)) / max(abs(float(ref)), 1.0) / tolerance
        except OverflowError:  # beyond 1e308: take the ratio exactly, then in floats
            try:
                q = float(abs(got - ref) / max(abs(ref), 1)) / tolerance
            except OverflowError:  # astronomically far: the score underflows to 0
                return 0.0
        return value / (1.0 + q * q)

    return score


def _tiered(tiers: dict[str, float]):
    def score(got: Fraction, ref: Fraction) -> float:
        if got == ref:
            return tiers["exact"]
        if ref == 0:
            return tiers["far"]
        ratio = got / ref
        if NEAR[0] <= ratio <= NEAR[1]:
            return tiers["near"]
        if CLOSE[0] <= ratio <= CLOSE[1]:
            return tiers["close"]
        return tiers["far"]

    return score


def numeric_proximity(
    mode: str = "smooth",
    value: float = 1.0,
    tolerance: float = 0.1,
    missing_value: float | None = None,
    tiers: dict[str, float] | None = None,
    extract: str = "auto",
    pattern: str | None = None,
    reference_column: str = "answer",
    reference_extract: str = "gsm8k",
) -> RewardFunction:
    """The closer the answer to the reference, the more reward: smooth, or Unsloth's tiered ratio rule."""
    check_extraction(extract, pattern)
    _check_reference_extract(reference_extract)
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}")
    if not tolerance > 0:
        raise ValueError(f"tolerance must be positive, got {tolerance!r}")
    if tiers is not None and mode != "tiered":
        raise ValueError("'tiers' is only used with mode = 'tiered'")
    table = dict(TIERS)
    for key, tier_value in (tiers or {}).items():
        if key not in TIERS:
            raise ValueError(f"unknown tier {key!r}; tiers are {', '.join(TIERS)}")
        if isinstance(tier_value, bool) or not isinstance(tier_value, (int, float)):
            raise ValueError(f"tier {key!r} must be a number, got {tier_value!r}")
        table[key] = float(tier_value)
    if mode == "tiered":
        score, missing = _tiered(table), -2.0 if missing_value is None else missing_value
        unparsable = table["unparsable"]
    else:
        score, missing = _smooth(value, tolerance), 0.0 if missing_value is None else missing_value
        unparsable = missing

    def numeric_proximity(completions: list[Any], **columns: Any) -> list[float | None]:
        refs = columns.get(reference_column)
        if refs is None:
            raise KeyError(f"column {reference_column!r} is missing (numeric_proximity needs references)")
        out: list[float | None] = []
        for completion, reference in zip(completions, refs, strict=True):
            ref = parse_number(reference_answer(reference, reference_extract))
            if ref is None:
                out.append(None)
                continue
            answer = extract_answer(completion_text(completion), extract, pattern=pattern)
            if answer is None:
                out.append(missing)
                continue
            got = parse_number(answer)
            out.append(unparsable if got is None else score(got, ref))
        return out

    return numeric_proximity


REWARD_SPECS = [
    RewardSpec(
        name="numeric_proximity",
        factory=numeric_proximity,
        columns=("answer",),
        example='''[rewards.close]
use = "numeric_proximity"
weight = 0.5
mode = "smooth"        # smooth: value / (1 + (relative error / tolerance)^2) | tiered: Unsloth's ratio rule
value = 1.0
tolerance = 0.1        # relative error that earns half the value
# mode = "tiered"
# tiers = { exact = 5.0, near = 2.0, close = 1.5, far = -2.5, unparsable = -4.5 }
''',
    ),
]
