"""Length-shaped rewards: DAPO's soft overlong punishment and the cosine-scaled correctness reward.

A completion's length is the number of its token ids when the ``completion_ids`` column is given
(the trainer and TRL pass it; TRL's rewards count tokens), else the number of characters of its
text (open-r1's ``cosine_scaled_reward`` counts characters). ``length_unit`` forces one:
``"tokens"`` (the column is then required) or ``"chars"``. A row whose ``completion_ids`` cell
is not a list of token ids scores ``None``.

``cosine_scaled`` pays a wrong answer more when it is longer, so a length that padding can
buy is a reward for padding. Its ``measure`` says what is counted: ``"content"`` (default)
counts what is left after padding is removed (:mod:`grpo_rewards.content_length`: whitespace
runs, repeated sentences and lines, short units repeated in a row), in characters or in
token ids; ``"raw"`` counts every character or token id, the peers'
exact schedule. ``soft_overlong_punishment`` always counts every token: it guards the
generation budget, which padding spends, and padding only lowers its score.

* ``soft_overlong_punishment`` (DAPO, Eq. 13; TRL's and open-r1's ``get_soft_overlong_punishment``):
  0 up to ``max_completion_len - soft_punish_cache``, then falling linearly to -1 at
  ``max_completion_len``, and -1 beyond.
* ``cosine_scaled`` ("Demystifying Long CoT", Appendix C.1; TRL's and open-r1's
  ``get_cosine_scaled_reward``): correctness decided by the toolkit's verifiers, then scaled
  along a cosine of ``length / max_len`` (clamped at 1, as TRL does): a short correct answer
  earns ``max_value_correct``, a long one ``min_value_correct``; a short wrong answer earns
  ``min_value_wrong``, a long one ``max_value_wrong``. A row whose reference does not parse
  scores ``None`` (TRL; open-r1 scores it 1.0).
"""

from __future__ import annotations

import math
from typing import Any

from grpo_rewards import completion_text, reward
from grpo_rewards.content_length import content_length, content_token_count
from grpo_rewards_reasoning.ids import id_rows

LENGTH_UNITS = ("auto", "tokens", "chars")
MEASURES = ("content", "raw")


def _check_unit(length_unit: str) -> None:
    if length_unit not in LENGTH_UNITS:
        raise ValueError(f"length_unit must be one of {', '.join(LENGTH_UNITS)}, got {length_unit!r}")


def _check_measure(measure: str) -> None:
    if measure not in MEASURES:
        raise ValueError(f"measure must be one of {', '.join(MEASURES)}, got {measure!r}")


def completion_lengths(completions: list[Any], columns: dict[str, Any], length_unit: str,
                       measure: str = "raw") -> list[float | None]:
    """Each completion's length: token ids when ``completion_ids`` is given (or required), else characters.
    ``None`` for a row whose ``completion_ids`` cell is not a list of token ids. ``measure = "content"``
    leaves padding out (module docs): the characters of the text's content, or the ids times its share."""
    rows = id_rows(columns, len(completions)) if length_unit != "chars" else None
    if rows is None and length_unit == "tokens":
        raise KeyError("column 'completion_ids' is missing (length_unit = 'tokens' counts token ids)")
    if measure == "raw":
        if rows is not None:
            return [None if row is None else len(row) for row in rows]
        return [len(completion_text(c)) for c in completions]
    texts = [completion_text(c) for c in completions]
    if rows is None:
        return [content_length(t) for t in texts]
    return [None if row is None else content_token_count(row, t) for row, t in zip(rows, texts, strict=True)]


class SoftOverlongPunishment:
    """The ``soft_overlong_punishment`` reward (module docs); a module-level class, so it pickles."""

    __name__ = "soft_overlong_punishment"

    def __init__(self, max_completion_len: int, soft_punish_cache: int, length_unit: str) -> None:
        self.max_completion_len, self.soft_punish_cache = max_completion_len, soft_punish_cache
        self.length_unit = length_unit

    def __call__(self, completions: list[Any], **columns: Any) -> list[float | None]:
        start = self.max_completion_len - self.soft_punish_cache
        out: list[float | None] = []
        for n in completion_lengths(completions, columns, self.length_unit):
            if n is None:
                out.append(None)
            elif n <= start:
                out.append(0.0)
            elif n <= self.max_completion_len:
                out.append((start - n) / self.soft_punish_cache)
            else:
                out.append(-1.0)
        return out


def soft_overlong_punishment(
    *, max_completion_len: int = 16384, soft_punish_cache: int = 4096, length_unit: str = "auto"
) -> SoftOverlongPunishment:
    """DAPO's soft overlong punishment: 0, then down to -1 over the last ``soft_punish_cache`` of the length budget."""
    if not 0 < soft_punish_cache <= max_completion_len:
        raise ValueError(
            f"need 0 < soft_punish_cache <= max_completion_len, got {soft_punish_cache} and {max_completion_len}"
        )
    _check_unit(length_unit)
    return SoftOverlongPunishment(max_completion_len, soft_punish_cache, length_unit)


class CosineScaled:
    """The ``cosine_scaled`` reward (module docs)."""

    __name__ = "cosine_scaled"

    def __init__(self, correctness: Any, max_len: int, min_value_wrong: float, max_value_wrong: float,
                 min_value_correct: float, max_value_correct: float, length_unit: str, measure: str) -> None:
        self.correctness, self.max_len, self.length_unit, self.measure = correctness, max_len, length_unit, measure
        self.min_value_wrong, self.max_value_wrong = min_value_wrong, max_value_wrong
        self.min_value_correct, self.max_value_correct = min_value_correct, max_value_correct

    def __call__(self, completions: list[Any], **columns: Any) -> list[float | None]:
        lengths = completion_lengths(completions, columns, self.length_unit, self.measure)
        verdicts = self.correctness(completions, **columns)
        out: list[float | None] = []
        for correct, n in zip(verdicts, lengths, strict=True):
            if correct is None or n is None:
                out.append(None)
                continue
            cosine = math.cos(min(n / self.max_len, 1.0) * math.pi)
            if correct == 1.0:
                low, high = self.min_value_correct, self.max_value_correct
            else:  # swapped: a short wrong answer is punished more than a long one
                low, high = self.max_value_wrong, self.min_value_wrong
            out.append(float(low + 0.5 * (high - low) * (1.0 + cosine)))
        return out


def cosine_scaled(
    *,
    max_len: int = 1000,
    min_value_wrong: float = -1.0,
    max_value_wrong: float = -0.5,
    min_value_correct: float = 0.5,
    max_value_correct: float = 1.0,
    verifier: str = "math",
    extract: str = "auto",
    reference_column: str = "answer",
    length_unit: str = "auto",
    measure: str = "content",
) -> CosineScaled:
    """Cosine-scaled correctness: short correct answers earn most, short wrong answers lose most.

    Correctness comes from the ``verifier`` (``math``: the ``math_equivalence`` reward; any other
    registered verifier through ``verify:<name>``) on the answer taken with ``extract``, against
    the ``reference_column`` (``solution`` in TRL and open-r1 datasets). ``measure = "content"``
    (default) leaves padding out of the length; ``"raw"`` is TRL's and open-r1's exact schedule.
    """
    if max_len <= 0:
        raise ValueError(f"max_len must be positive, got {max_len}")
    _check_unit(length_unit)
    _check_measure(measure)
    use = "math_equivalence" if verifier == "math" else f"verify:{verifier}"
    correctness = reward(use, value=1.0, wrong_value=0.0, extract=extract, reference_column=reference_column)
    return CosineScaled(correctness, max_len, min_value_wrong, max_value_wrong, min_value_correct,
                        max_value_correct, length_unit, measure)
