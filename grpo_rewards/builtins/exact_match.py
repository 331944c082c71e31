"""``exact_match`` reward and the ``numeric`` / ``exact`` verifiers it is built on.

The answer extracted from a completion equals the reference after normalisation
(:mod:`grpo_rewards.normalize`): when both sides are numbers they are compared
exactly as fractions (``1,000`` == ``1000`` == ``$1000.00``, ``0.75`` == ``3/4``);
otherwise as text with whitespace collapsed and, by default, case folded.

The reference may be a full GSM8K solution (``"... #### 72"``): its final answer is
extracted first (``reference_extract``, default ``gsm8k``; ``"none"`` compares the
reference as written).

Compared with the Unsloth GSM8K notebook's ``correctness_reward_func`` (``2.0 if
extracted == answer``; the answer taken from ``<answer>`` tags by splitting): same
default value (2.0), but the answer is found with ``extract`` (``auto``: tags, then
``####``, ``\\boxed{}``, ``Answer:``, last number) and compared after normalisation,
so ``<answer>1,080</answer>`` counts for reference ``1080`` and ``72.0`` for ``72``.
An empty or missing (``None``) reference scores ``None``: the row does not count.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from grpo_rewards.extraction import METHODS, check_extraction, extract_answer
from grpo_rewards.normalize import format_number, normalize_text, parse_number
from grpo_rewards.specs import RewardFunction, RewardSpec, VerifierSpec
from grpo_rewards.verdict import Verdict, Verifier, reward_from_verifier

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


def make_numeric_verifier(reference_extract: str = "gsm8k") -> Verifier:
    """Numbers compared exactly (as fractions); undecided when the reference is not a number."""
    _check_reference_extract(reference_extract)

    def numeric(answer: str, reference: str) -> Verdict:
        ref_text = reference_answer(reference, reference_extract)
        ref = parse_number(ref_text)
        if ref is None:
            return Verdict.undecided(f"reference {ref_text!r} is not a number")
        got = parse_number(answer)
        if got is None:
            return Verdict.wrong(None, f"answer {answer[:80]!r} is not a number")
        if got == ref:
            return Verdict.correct(got, f"{format_number(got)} == {format_number(ref)}")
        return Verdict.wrong(got, f"{format_number(got)} != {format_number(ref)}")

    return numeric


def make_exact_verifier(case_sensitive: bool = False, reference_extract: str = "gsm8k") -> Verifier:
    """Exact match after normalisation: numbers as exact fractions, other answers as normalised text."""
    _check_reference_extract(reference_extract)

    def exact(answer: str, reference: str) -> Verdict:
        ref_text = reference_answer(reference, reference_extract)
        if not ref_text:
            return Verdict.undecided("the reference is empty")
        ref = parse_number(ref_text)
        if ref is not None:
            got = parse_number(answer)
            if got is None:
                return Verdict.wrong(None, f"answer {answer[:80]!r} is not a number (reference {format_number(ref)})")
            verdict = Verdict.correct if got == ref else Verdict.wrong
            return verdict(got, f"{format_number(got)} {'==' if got == ref else '!='} {format_number(ref)}")
        a = normalize_text(answer, case_sensitive=case_sensitive)
        r = normalize_text(ref_text, case_sensitive=case_sensitive)
        return (Verdict.correct if a == r else Verdict.wrong)(a, f"{a[:80]!r} {'==' if a == r else '!='} {r[:80]!r}")

    return exact


def exact_match(
    value: float = 2.0,
    wrong_value: float = 0.0,
    extract: str = "auto",
    pattern: str | None = None,
    reference_column: str = "answer",
    reference_extract: str = "gsm8k",
    case_sensitive: bool = False,
) -> RewardFunction:
    """The extracted answer equals the reference after normalisation (numbers exactly, text case-folded)."""
    check_extraction(extract, pattern)
    verify = make_exact_verifier(case_sensitive=case_sensitive, reference_extract=reference_extract)
    scored = reward_from_verifier(
        verify, value=value, wrong_value=wrong_value, extract=extract, pattern=pattern,
        reference_column=reference_column, name="exact_match",
    )

    def exact_match(completions: list[Any], **columns: Any) -> list[float | None]:
        scores = scored(completions, **columns)  # raises KeyError naming a missing column
        refs = columns[reference_column]
        return [None if ref is None or not str(ref).strip() else s for s, ref in zip(scores, refs, strict=True)]

    return exact_match


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
