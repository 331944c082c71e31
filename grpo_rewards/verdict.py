"""Verifier verdicts, and the adapter that turns any verifier into a reward.

A verifier decides correctness: ``verify(answer, reference) -> Verdict``. It
answers ok, wrong, or undecided (it could not parse one side), with what it
parsed and why, so a user can see *why* a completion scored as it did.
"""

from __future__ import annotations

import enum
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
) -> Callable[..., list[float | None]]:
    """Build a batch reward from a verifier.

    The answer is extracted from each completion with ``extract`` (see
    :func:`grpo_rewards.extraction.extract_answer`); ``ok`` scores ``value``,
    ``wrong`` (and a completion with no answer) scores ``wrong_value``, and
    ``undecided`` scores ``None``: the row does not count. A completion with no
    answer against a reference the verifier cannot check either (``verify(ref, ref)``
    is undecided) also scores ``None``, as the built-in rewards do.
    """

    def reward(completions: list[Any], **columns: Any) -> list[float | None]:
        refs = columns.get(reference_column)
        if refs is None:
            raise KeyError(f"column {reference_column!r} is missing (the verifier needs references)")
        out: list[float | None] = []
        for completion, ref in zip(completions, refs, strict=True):
            if ref is None:  # no reference: the row does not count (str(None) would be a reference "None")
                out.append(None)
                continue
            answer = extract_answer(completion_text(completion), extract, pattern=pattern)
            if answer is None:
                checkable = verify(str(ref), str(ref)).status is not Status.UNDECIDED
                out.append(wrong_value if checkable else None)
                continue
            verdict = verify(answer, str(ref))
            if verdict.status is Status.OK:
                out.append(value)
            elif verdict.status is Status.WRONG:
                out.append(wrong_value)
            else:
                out.append(None)
        return out

    reward.__name__ = name or getattr(verify, "__name__", "verifier")
    return reward
