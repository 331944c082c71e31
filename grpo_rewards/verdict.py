"""Verifier verdicts, and the adapter that turns any verifier into a reward.

A verifier decides correctness: ``verify(answer, reference) -> Verdict``. It
answers ok, wrong, or undecided (it could not parse one side), with what it
parsed and why, so a user can see *why* a completion scored as it did.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from grpo_rewards.completions import completion_text
from grpo_rewards.extraction import extract_answer


class Status(str, enum.Enum):
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


def reward_from_verifier(
    verify: Verifier,
    *,
    value: float = 1.0,
    wrong_value: float = 0.0,
    extract: str = "auto",
    pattern: str | None = None,
    reference_column: str = "answer",
    name: str | None = None,
) -> VerifierReward:
    """Build a batch reward from a verifier.

    The answer is extracted from each completion with ``extract`` (see
    :func:`grpo_rewards.extraction.extract_answer`); ``ok`` scores ``value``,
    ``wrong`` (and a completion with no answer) scores ``wrong_value``, and
    ``undecided`` scores ``None``: the row does not count. A completion with no
    answer against a reference the verifier cannot check either (``verify(ref, ref)``
    is undecided) also scores ``None``, as the built-in rewards do. A row without a
    reference (``None``, NaN or blank) scores ``None``: the reward does not apply to it.
    """

    return VerifierReward(verify, value=value, wrong_value=wrong_value, extract=extract, pattern=pattern,
                          reference_column=reference_column,
                          name=name or getattr(verify, "__name__", "verifier"))


def _missing(ref: Any) -> bool:
    """No reference in this row: ``None``, a NaN (a pandas gap) or a blank string."""
    return ref is None or (isinstance(ref, float) and math.isnan(ref)) or (isinstance(ref, str) and not ref.strip())


class VerifierReward:
    """The batch reward :func:`reward_from_verifier` returns (a module-level class: it pickles when
    ``verify`` does)."""

    def __init__(self, verify: Verifier, *, value: float, wrong_value: float, extract: str, pattern: str | None,
                 reference_column: str, name: str):
        self.verify, self.value, self.wrong_value = verify, value, wrong_value
        self.extract, self.pattern, self.reference_column = extract, pattern, reference_column
        self.__name__ = name

    def __repr__(self) -> str:
        return f"VerifierReward({self.__name__!r}, extract={self.extract!r})"

    def __call__(self, completions: list[Any], **columns: Any) -> list[float | None]:
        refs = columns.get(self.reference_column)
        if refs is None:
            raise KeyError(f"column {self.reference_column!r} is missing (the verifier needs references)")
        out: list[float | None] = []
        for completion, ref in zip(completions, refs, strict=True):
            if _missing(ref):  # no reference: the row does not count (str(None) would be a reference "None")
                out.append(None)
                continue
            answer = extract_answer(completion_text(completion), self.extract, pattern=self.pattern)
            if answer is None:
                checkable = self.verify(str(ref), str(ref)).status is not Status.UNDECIDED
                out.append(self.wrong_value if checkable else None)
                continue
            verdict = self.verify(answer, str(ref))
            if verdict.status is Status.OK:
                out.append(self.value)
            elif verdict.status is Status.WRONG:
                out.append(self.wrong_value)
            else:
                out.append(None)
        return out
