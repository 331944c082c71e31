"""The n-gram repetition penalty ("Demystifying Long CoT", Appendix C.2), on token ids or on words.

``max_penalty * (1 - unique n-grams / n-grams)``: 0 for a completion without a repeated
n-gram (or shorter than ``ngram_size``), approaching ``max_penalty`` for a fully repetitive one.
The n-grams are over the completion's token ids when the ``completion_ids`` column is given and
``use_token_ids`` is on (TRL's ``get_repetition_penalty_reward``), else over its lower-cased
whitespace-separated words (open-r1's ``get_repetition_penalty_reward`` with ``language = "en"``;
CJK text and loops without spaces are cut into characters and 8-character pieces, :func:`words`).
A row whose ``completion_ids`` cell is not a list of token ids scores ``None``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from grpo_rewards import completion_text
from grpo_rewards_reasoning.ids import id_rows

_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")
_UNIT = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]|[^\s\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]{1,8}")
LONG_WORD = 32


def words(text: str) -> list[str]:
    """The units the word n-grams count: open-r1's lower-cased whitespace-separated words; in a text with
    Chinese, Japanese or Korean characters or a run of over :data:`LONG_WORD` characters without a space (a
    loop written without spaces), each CJK character and each 8 characters of such a run is a unit, so
    that a loop without spaces repeats n-grams as a loop of words does."""
    low = text.lower()
    split = low.split()
    if _CJK.search(low) is None and all(len(w) <= LONG_WORD for w in split):
        return split
    return _UNIT.findall(low)


def repetition_fraction(units: Sequence[Any], ngram_size: int) -> float:
    """``1 - unique / total`` over the n-grams of ``units``; 0.0 when there are fewer than ``ngram_size``."""
    if len(units) < ngram_size:
        return 0.0
    ngrams = [tuple(units[i : i + ngram_size]) for i in range(len(units) - ngram_size + 1)]
    return 1 - len(set(ngrams)) / len(ngrams)


class NgramRepetitionPenalty:
    """The ``ngram_repetition_penalty`` reward (module docs); a module-level class, so it pickles."""

    __name__ = "ngram_repetition_penalty"

    def __init__(self, ngram_size: int, max_penalty: float, use_token_ids: bool) -> None:
        self.ngram_size, self.max_penalty, self.use_token_ids = ngram_size, max_penalty, use_token_ids

    def __call__(self, completions: list[Any], **columns: Any) -> list[float | None]:
        ids = id_rows(columns, len(completions)) if self.use_token_ids else None
        rows = ids if ids is not None else [words(completion_text(c)) for c in completions]
        out: list[float | None] = []
        for units in rows:
            if units is None:  # a completion_ids cell that is not token ids
                out.append(None)
                continue
            scaling = repetition_fraction(units, self.ngram_size)
            out.append(scaling * self.max_penalty if scaling else 0.0)
        return out


def ngram_repetition_penalty(
    *, ngram_size: int = 3, max_penalty: float = -1.0, use_token_ids: bool = True
) -> NgramRepetitionPenalty:
    """Penalise repeated n-grams of token ids (when completion_ids are given) or of words: max_penalty * repeated share."""
    if isinstance(ngram_size, bool) or not isinstance(ngram_size, int) or ngram_size < 1:
        raise ValueError(f"ngram_size must be an integer >= 1, got {ngram_size!r}")
    if max_penalty > 0:
        raise ValueError(f"max_penalty {max_penalty} should not be positive")
    return NgramRepetitionPenalty(ngram_size, max_penalty, use_token_ids)
