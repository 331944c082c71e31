"""``exact_match`` reward and the ``numeric`` / ``exact`` verifiers it is built on.

The answer extracted from a completion equals the reference. When the reference is
a number literal of the number grammar (:mod:`grpo_rewards.answers.numbers`) the answer must
be one too, and they are compared exactly as fractions (``1,000`` == ``1000`` ==
``$1000.00``, ``0.75`` == ``3/4``, ``1e3`` == ``1000``) under the grammar's percent
rule (``50%`` equals ``50`` and ``0.5``), as ``math_equivalence`` compares them;
otherwise as text (:func:`grpo_rewards.answers.normalize.normalize_text`: whitespace
collapsed and, by default, case folded).

The reference may be a full GSM8K solution (``"... #### 72"``): its final answer is
extracted first (``reference_extract``, default ``gsm8k``; ``"none"`` compares the
reference as written).

Compared with the Unsloth GSM8K notebook's ``correctness_reward_func`` (``2.0 if
extracted == answer``; the answer taken from ``<answer>`` tags by splitting): same
default value (2.0), but the answer is found with ``extract`` (``auto``: tags, then
``####``, ``\\boxed{}``, ``Answer:``, last number) and compared after normalisation,
so ``<answer>1,080</answer>`` counts for reference ``1080`` and ``72.0`` for ``72``.
Several answers are hedging, not an answer: with several ``<answer>`` tags that differ,
every tag is read, so ``<answer>71</answer><answer>72</answer>`` is wrong against ``72``
(the notebook reads the last tag only and scores it 2.0).
An option letter chosen in prose ("A: 7, B: 12 ... I pick B") is compared as the letter against a
letter reference and as its option's text (12) against any other reference.
An empty or missing (``None``) reference scores ``None``: the row does not count.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from grpo_rewards.answers.extraction import METHODS, check_extraction, compared_answer, extract_answer
from grpo_rewards.answers.normalize import normalize_text
from grpo_rewards.answers.numbers import Number, format_number, numbers_equal, parse_literal
from grpo_rewards.specs import RewardSpec, VerifierSpec
from grpo_rewards.verdict import Verdict, VerifierReward

REFERENCE_METHODS = ("none", *(m for m in METHODS if m != "regex"))


def _check_reference_extract(method: str) -> None:
    if method not in REFERENCE_METHODS:
        raise ValueError(f"unknown reference_extract {method!r}; choose one of {', '.join(REFERENCE_METHODS)}")


def reference_answer(reference: Any, method: str = "gsm8k") -> str:
    """The final answer inside ``reference`` by ``method``; the reference itself when it has none."""
    return _reference_answer("" if reference is None else str(reference), method)


@lru_cache(maxsize=16384)  # a GRPO batch repeats each reference num_generations times
def _reference_answer(text: str, method: str) -> str:
    if method != "none":
        found = extract_answer(text, method)
        if found:
            return found
    return text.strip()


def _show(number: Number) -> str:
    """A parsed number as the verdicts print it: canonical digits, ``%`` when it was a percentage."""
    return format_number(number.value) + ("%" if number.percent else "")


def _number_verdict(got: Number, ref: Number) -> Verdict:
    same = numbers_equal(got, ref)
    return (Verdict.correct if same else Verdict.wrong)(got.value, f"{_show(got)} {'==' if same else '!='} {_show(ref)}")


class NumericVerifier:
    """The ``numeric`` verifier: numbers compared exactly under the percent rule (a module-level class: it
    pickles); undecided when the reference is not a number."""

    __name__ = "numeric"

    def __init__(self, reference_extract: str = "gsm8k") -> None:
        _check_reference_extract(reference_extract)
        self.reference_extract = reference_extract

    def __repr__(self) -> str:
        return f"NumericVerifier(reference_extract={self.reference_extract!r})"

    def __call__(self, answer: str, reference: str) -> Verdict:
        ref_text = reference_answer(reference, self.reference_extract)
        ref = parse_literal(ref_text)
        if ref is None:
            return Verdict.undecided(f"reference {ref_text!r} is not a number")
        answer = compared_answer(answer, ref_text)
        got = parse_literal(answer)
        if got is None:
            return Verdict.wrong(None, f"answer {answer[:80]!r} is not a number")
        return _number_verdict(got, ref)


class ExactVerifier:
    """The ``exact`` verifier: numbers as exact values under the percent rule, other answers as normalised
    text (a module-level class: it pickles)."""

    __name__ = "exact"

    def __init__(self, case_sensitive: bool = False, reference_extract: str = "gsm8k") -> None:
        _check_reference_extract(reference_extract)
        self.case_sensitive, self.reference_extract = case_sensitive, reference_extract

    def __repr__(self) -> str:
        return f"ExactVerifier(case_sensitive={self.case_sensitive}, reference_extract={self.reference_extract!r})"

    def __call__(self, answer: str, reference: str) -> Verdict:
        ref_text = reference_answer(reference, self.reference_extract)
        if not ref_text:
            return Verdict.undecided("the reference is empty")
        answer = compared_answer(answer, ref_text)
        ref = parse_literal(ref_text)
        if ref is not None:
            got = parse_literal(answer)
            if got is None:
                return Verdict.wrong(None, f"answer {answer[:80]!r} is not a number (reference {_show(ref)})")
            return _number_verdict(got, ref)
        a = normalize_text(answer, case_sensitive=self.case_sensitive)
        r = normalize_text(ref_text, case_sensitive=self.case_sensitive)
        return (Verdict.correct if a == r else Verdict.wrong)(a, f"{a[:80]!r} {'==' if a == r else '!='} {r[:80]!r}")


def make_numeric_verifier(reference_extract: str = "gsm8k") -> NumericVerifier:
    """Numbers compared exactly (as fractions, with the percent rule); undecided when the reference is not a
    number."""
    return NumericVerifier(reference_extract)


def make_exact_verifier(case_sensitive: bool = False, reference_extract: str = "gsm8k") -> ExactVerifier:
    """Exact match after normalisation: numbers as exact fractions, other answers as normalised text."""
    return ExactVerifier(case_sensitive, reference_extract)


class ExactMatch(VerifierReward):
    """The ``exact_match`` reward (module docs): the ``exact`` verifier as a batch reward (a module-level
    class: it pickles). A row without a reference scores ``None``."""

    def __init__(self, value: float = 2.0, wrong_value: float = 0.0, extract: str = "auto",
                 pattern: str | None = None, reference_column: str = "answer", reference_extract: str = "gsm8k",
                 case_sensitive: bool = False) -> None:
        check_extraction(extract, pattern)
        super().__init__(ExactVerifier(case_sensitive, reference_extract), value=value, wrong_value=wrong_value,
                         extract=extract, pattern=pattern, reference_column=reference_column, name="exact_match")

    def __repr__(self) -> str:
        return f"ExactMatch(verify={self.verify!r}, extract={self.extract!r}, reference_column={self.reference_column!r})"


def exact_match(
    value: float = 2.0,
    wrong_value: float = 0.0,
    extract: str = "auto",
    pattern: str | None = None,
    reference_column: str = "answer",
    reference_extract: str = "gsm8k",
    case_sensitive: bool = False,
) -> ExactMatch:
    """The extracted answer equals the reference after normalisation (numbers exactly, text case-folded)."""
    return ExactMatch(value, wrong_value, extract, pattern, reference_column, reference_extract, case_sensitive)


REWARD_SPECS = [
    RewardSpec(
        name="exact_match",
        factory=exact_match,
        columns=("answer",),
        example='''[rewards.correct]
use = "exact_match"
weight = 1.0
value = 2.0            # score of a correct answer (Unsloth's correctness_reward_func: 2.0)
wrong_value = 0.0      # score of a wrong or missing answer
extract = "auto"       # auto | answer_tag | gsm8k | boxed | answer_prefix | last_number | regex
''',
    ),
]

VERIFIER_SPECS = [
    VerifierSpec(
        name="numeric",
        factory=make_numeric_verifier,
        example='''[rewards.correct]
use = "verify:numeric"
value = 1.0
extract = "answer_tag"
''',
    ),
    VerifierSpec(
        name="exact",
        factory=make_exact_verifier,
        example='''[rewards.correct]
use = "verify:exact"
case_sensitive = false
''',
    ),
]
