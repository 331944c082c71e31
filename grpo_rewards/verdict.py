"""Verifier verdicts, and the adapter that turns any verifier into a reward.

A verifier decides correctness: ``verify(answer, reference) -> Verdict``. It
answers ok, wrong, or undecided (it could not parse one side), with what it
parsed and why, so a user can see *why* a completion scored as it did
(:meth:`VerifierReward.explain`, ``grpo rewards score --explain``).

The answer handed to the verifier is found by one of the shared extraction methods
(:mod:`grpo_rewards.answers.extraction`) or by the verifier's own extraction: a function
``extract(text) -> str | None`` given as ``VerifierSpec(extract=...)`` (used when a config
says ``extract = "verifier"``, the default for such a verifier) or passed here directly.
It receives the completion text with the reasoning (``<think>...</think>``) already removed.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from grpo_rewards.answers import check_extraction, extract_answer, strip_reasoning
from grpo_rewards.answers.numbers import format_number, int_text
from grpo_rewards.completions import completion_text


class Status(str, enum.Enum):  # noqa: UP042 (str() and format() of a member stay as they are)
    OK = "ok"
    WRONG = "wrong"
    UNDECIDED = "undecided"


@dataclass(frozen=True)
class Verdict:
    status: Status
    parsed: Any = None
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.status is Status.OK

    @classmethod
    def correct(cls, parsed: Any = None, reason: str = "") -> Verdict:
        return cls(Status.OK, parsed, reason)

    @classmethod
    def wrong(cls, parsed: Any = None, reason: str = "") -> Verdict:
        return cls(Status.WRONG, parsed, reason)

    @classmethod
    def undecided(cls, reason: str, parsed: Any = None) -> Verdict:
        return cls(Status.UNDECIDED, parsed, reason)


Verifier = Callable[[str, str], Verdict]
Extractor = Callable[[str], "str | None"]


def reward_from_verifier(
    verify: Verifier,
    *,
    value: float = 1.0,
    wrong_value: float = 0.0,
    extract: str | Extractor = "auto",
    pattern: str | None = None,
    reference_column: str = "answer",
    name: str | None = None,
) -> VerifierReward:
    """Build a batch reward from a verifier.

    The answer is extracted from each completion with ``extract``: a method name of
    :func:`grpo_rewards.answers.extraction.extract_answer`, or the verifier's own function
    ``extract(text) -> str | None`` (given the text without its reasoning); ``ok`` scores ``value``,
    ``wrong`` (and a completion with no answer) scores ``wrong_value``, and
    ``undecided`` scores ``None``: the row does not count. A completion with no
    answer against a reference the verifier cannot check either (``verify(ref, ref)``
    is undecided) also scores ``None``, as the built-in rewards do. A row without a
    reference (``None``, NaN or blank) scores ``None``: the reward does not apply to it; nor does it to a
    reference that is a JSON object or array (its ``str()`` is not a reference).
    """

    if isinstance(extract, str):
        check_extraction(extract, pattern)
    elif not callable(extract):
        raise ValueError(f"extract must be a method name or a function, got {type(extract).__name__}")
    return VerifierReward(verify, value=value, wrong_value=wrong_value, extract=extract, pattern=pattern,
                          reference_column=reference_column,
                          name=name or getattr(verify, "__name__", "verifier"))


def _missing(ref: Any) -> bool:
    """No reference in this row: ``None``, a NaN (a pandas gap) or a blank string."""
    return ref is None or (isinstance(ref, float) and math.isnan(ref)) or (isinstance(ref, str) and not ref.strip())


class VerifierReward:
    """The batch reward :func:`reward_from_verifier` returns (a module-level class: it pickles when
    ``verify`` does)."""

    def __init__(self, verify: Verifier, *, value: float, wrong_value: float, extract: str | Extractor,
                 pattern: str | None, reference_column: str, name: str):
        self.verify, self.value, self.wrong_value = verify, value, wrong_value
        self.extract, self.pattern, self.reference_column = extract, pattern, reference_column
        self.__name__ = name

    def __repr__(self) -> str:
        extract = self.extract if isinstance(self.extract, str) else getattr(self.extract, "__name__", "own")
        return f"VerifierReward({self.__name__!r}, extract={extract!r})"

    def answer(self, completion: Any) -> str | None:
        """The answer this reward hands the verifier for ``completion`` (``None``: it has none)."""
        text = completion_text(completion)
        if isinstance(self.extract, str):
            return extract_answer(text, self.extract, pattern=self.pattern)
        found = self.extract(strip_reasoning(text))
        return (found.strip() or None) if isinstance(found, str) else None

    def __call__(self, completions: list[Any], **columns: Any) -> list[float | None]:
        return [score for score, _ in self._judge(completions, columns)]

    def explain(self, completions: list[Any], **columns: Any) -> list[dict[str, Any] | None]:
        """Why each row scored as it did: ``{"status", "answer", "parsed", "reason"}`` (``None``: no reference).

        ``status`` is the verdict's (``ok``, ``wrong``, ``undecided``), or ``no answer`` when nothing was
        extracted; ``answer`` is the extracted text, ``parsed`` what the verifier read it as.
        """
        return [None if why is None else {"status": why[0], "answer": why[1], "parsed": _plain(why[2]),
                                          "reason": why[3]}
                for _, why in self._judge(completions, columns)]

    def _judge(self, completions: list[Any], columns: dict[str, Any]) -> list[tuple[float | None, tuple | None]]:
        """``(score, (status, answer, parsed, reason))`` per row; the second item is ``None`` without a reference."""
        refs = columns.get(self.reference_column)
        if refs is None:
            raise KeyError(f"column {self.reference_column!r} is missing (the verifier needs references)")
        out: list[tuple[float | None, tuple | None]] = []
        for completion, ref in zip(completions, refs, strict=True):
            if _missing(ref):  # no reference: the row does not count (str(None) would be a reference "None")
                out.append((None, None))
                continue
            if isinstance(ref, (dict, list, tuple)):  # str() of a JSON object is not a reference: not scored
                out.append((None, (Status.UNDECIDED.value, None, None,
                                   f"the reference is a JSON {'object' if isinstance(ref, dict) else 'array'}, "
                                   "not text")))
                continue
            answer = self.answer(completion)
            if answer is None:
                checkable = self.verify(str(ref), str(ref)).status is not Status.UNDECIDED
                reason = "no answer found" + ("" if checkable else "; the reference cannot be checked either")
                out.append((self.wrong_value if checkable else None, ("no answer", None, None, reason)))
                continue
            verdict = self.verify(answer, str(ref))
            why = (verdict.status.value, answer, verdict.parsed, verdict.reason)
            if verdict.status is Status.OK:
                out.append((self.value, why))
            elif verdict.status is Status.WRONG:
                out.append((self.wrong_value, why))
            else:
                out.append((None, why))
        return out


def explanation(verdict: Verdict, answer: str | None) -> dict[str, Any]:
    """One row of an ``explain`` method (``grpo rewards score --explain``), JSON-ready:
    ``{"status", "answer", "parsed", "reason"}``; ``status`` is ``no answer`` when nothing was extracted."""
    if answer is None:
        return {"status": "no answer", "answer": None, "parsed": None,
                "reason": "no answer found" + (f"; {verdict.reason}" if verdict.status is Status.UNDECIDED else "")}
    return {"status": verdict.status.value, "answer": answer, "parsed": _plain(verdict.parsed),
            "reason": verdict.reason}


def _plain(value: Any) -> Any:
    """``value`` as JSON can hold it (numbers, text, ``None``; a fraction in the number grammar's canonical
    digits; an integer of more than 4,000 digits, or anything else, as text)."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return value if value.bit_length() < 13_000 else int_text(value)
    if isinstance(value, Fraction):
        return format_number(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return str(value)
