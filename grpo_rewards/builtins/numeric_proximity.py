"""``numeric_proximity`` reward: the closer the extracted number to the reference, the more reward.

``mode = "smooth"`` (default): with ``err = |answer - reference| / |reference|``
(relative error at every magnitude, so against a tiny reference such as ``3e-7`` the answer 0 or
``3e-9`` is far off; absolute against the reference 0)::

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

Numbers are read by the number grammar (:mod:`grpo_rewards.answers.numbers`) and compared
under its percent rule (:func:`grpo_rewards.answers.numbers.compared_values`): against reference
``0.5``, ``50%`` is exact and ``49%`` is read as 0.49; against ``50``, ``49%`` is 49.

Both modes score ``None`` when the reference is not a number (the row does not count).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from grpo_rewards.answers.extraction import check_extraction, compared_answer, extract_answer
from grpo_rewards.answers.numbers import compared_values, parse_literal
from grpo_rewards.builtins.exact_match import _check_reference_extract, reference_answer
from grpo_rewards.completions import completion_text
from grpo_rewards.specs import RewardSpec

MODES = ("smooth", "tiered")
TIERS = {"exact": 5.0, "near": 2.0, "close": 1.5, "far": -2.5, "unparsable": -4.5}
NEAR, CLOSE = (Fraction(9, 10), Fraction(11, 10)), (Fraction(8, 10), Fraction(12, 10))


def smooth_score(got: Fraction, ref: Fraction, value: float, tolerance: float) -> float:
    """``value / (1 + (err / tolerance)^2)`` with ``err`` the relative error (absolute against 0)."""
    if got == ref:
        return value
    try:
        q = float(abs(got - ref) / (abs(ref) or 1)) / tolerance
    except OverflowError:  # beyond 1e308: take the ratio exactly, then in floats
        try:
            q = float(abs(got - ref) / (abs(ref) or 1)) / tolerance
        except OverflowError:  # astronomically far: the score underflows to 0
            return 0.0
    return value / (1.0 + q * q)


def tiered_score(got: Fraction, ref: Fraction, tiers: dict[str, float]) -> float:
    """Unsloth's ratio tiers (module docs)."""
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


def _tier_table(tiers: dict[str, float] | None) -> dict[str, float]:
    table = dict(TIERS)
    for key, tier_value in (tiers or {}).items():
        if key not in TIERS:
            raise ValueError(f"unknown tier {key!r}; tiers are {', '.join(TIERS)}")
        if isinstance(tier_value, bool) or not isinstance(tier_value, (int, float)):
            raise ValueError(f"tier {key!r} must be a number, got {tier_value!r}")
        table[key] = float(tier_value)
    return table


class NumericProximity:
    """The ``numeric_proximity`` reward (module docs; a module-level class: it pickles)."""

    __name__ = "numeric_proximity"

    def __init__(self, mode: str = "smooth", value: float = 1.0, tolerance: float = 0.1,
                 missing_value: float | None = None, tiers: dict[str, float] | None = None, extract: str = "auto",
                 pattern: str | None = None, reference_column: str = "answer",
                 reference_extract: str = "gsm8k") -> None:
        check_extraction(extract, pattern)
        _check_reference_extract(reference_extract)
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}")
        if not tolerance > 0:
            raise ValueError(f"tolerance must be positive, got {tolerance!r}")
        if tiers is not None and mode != "tiered":
            raise ValueError("'tiers' is only used with mode = 'tiered'")
        self.mode, self.value, self.tolerance, self.tiers = mode, value, tolerance, _tier_table(tiers)
        self.extract, self.pattern = extract, pattern
        self.reference_column, self.reference_extract = reference_column, reference_extract
        if mode == "tiered":
            self.missing = -2.0 if missing_value is None else missing_value
            self.unparsable = self.tiers["unparsable"]
        else:
            self.missing = 0.0 if missing_value is None else missing_value
            self.unparsable = self.missing

    def __repr__(self) -> str:
        return f"NumericProximity(mode={self.mode!r}, extract={self.extract!r}, reference_column={self.reference_column!r})"

    def score(self, got: Fraction, ref: Fraction) -> float:
        """The score of the value ``got`` against the reference value ``ref``."""
        if self.mode == "tiered":
            return tiered_score(got, ref, self.tiers)
        return smooth_score(got, ref, self.value, self.tolerance)

    def __call__(self, completions: list[Any], **columns: Any) -> list[float | None]:
        refs = columns.get(self.reference_column)
        if refs is None:
            raise KeyError(f"column {self.reference_column!r} is missing (numeric_proximity needs references)")
        out: list[float | None] = []
        for completion, reference in zip(completions, refs, strict=True):
            ref_text = reference_answer(reference, self.reference_extract)
            ref = parse_literal(ref_text)
            if ref is None:
                out.append(None)
                continue
            answer = extract_answer(completion_text(completion), self.extract, pattern=self.pattern)
            if answer is None:
                out.append(self.missing)
                continue
            got = parse_literal(compared_answer(answer, ref_text))
            out.append(self.unparsable if got is None else self.score(*compared_values(got, ref)))
        return out


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
) -> NumericProximity:
    """The closer the answer to the reference, the more reward: smooth, or Unsloth's tiered ratio rule."""
    return NumericProximity(mode, value, tolerance, missing_value, tiers, extract, pattern, reference_column,
                            reference_extract)


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
