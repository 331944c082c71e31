"""The rewards: penalise repeated n-grams (open-r1's rule) and reward a target length window.

``length_window`` counts the words of a completion's content (``measure = "content"``, the
default): padding (blank lines, a sentence said again and again, a run of dots) is left out, as
:mod:`grpo_rewards.content_length` defines it, so it cannot buy the window; ``measure = "raw"``
counts every whitespace-separated word.

Each reward is a module-level class, so it pickles: it can run in a worker process
(a reward timeout kills the worker, not the run) and in TRL's async trainer.
"""

from __future__ import annotations

from typing import Any

from grpo_rewards import completion_text
from grpo_rewards.content_length import content_text

MEASURES = ("content", "raw")


class RepetitionPenalty:
    """The ``repetition_penalty`` reward (see :func:`repetition_penalty`)."""

    __name__ = "repetition_penalty"

    def __init__(self, ngram_size: int = 3, max_penalty: float = -1.0) -> None:
        if ngram_size < 1:
            raise ValueError(f"ngram_size must be >= 1, got {ngram_size}")
        if max_penalty > 0:
            raise ValueError(f"max_penalty must be <= 0, got {max_penalty}")
        self.ngram_size, self.max_penalty = ngram_size, max_penalty

    def __repr__(self) -> str:
        return f"RepetitionPenalty(ngram_size={self.ngram_size}, max_penalty={self.max_penalty})"

    def __call__(self, completions: list[Any], **columns: Any) -> list[float | None]:
        n = self.ngram_size
        out: list[float | None] = []
        for completion in completions:
            words = completion_text(completion).lower().split()
            if len(words) < n:
                out.append(0.0)
                continue
            ngrams = [tuple(words[i : i + n]) for i in range(len(words) - n + 1)]
            out.append((1 - len(set(ngrams)) / len(ngrams)) * self.max_penalty)
        return out


class LengthWindow:
    """The ``length_window`` reward (see :func:`length_window`)."""

    __name__ = "length_window"

    def __init__(self, min_words: int = 10, max_words: int = 300, value: float = 1.0, slope_words: int = 50,
                 measure: str = "content") -> None:
        if measure not in MEASURES:
            raise ValueError(f"measure must be one of {', '.join(MEASURES)}, got {measure!r}")
        if not 0 <= min_words <= max_words:
            raise ValueError(f"need 0 <= min_words <= max_words, got {min_words} and {max_words}")
        if slope_words <= 0:
            raise ValueError(f"slope_words must be positive, got {slope_words}")
        self.min_words, self.max_words, self.value, self.slope_words = min_words, max_words, value, slope_words
        self.measure = measure

    def __repr__(self) -> str:
        return (f"LengthWindow(min_words={self.min_words}, max_words={self.max_words}, value={self.value}, "
                f"slope_words={self.slope_words}, measure={self.measure!r})")

    def __call__(self, completions: list[Any], **columns: Any) -> list[float | None]:
        out: list[float | None] = []
        for completion in completions:
            text = completion_text(completion)
            n = len((content_text(text) if self.measure == "content" else text).split())
            distance = max(self.min_words - n, n - self.max_words, 0)
            out.append(self.value * max(0.0, 1 - distance / self.slope_words))
        return out


def repetition_penalty(*, ngram_size: int = 3, max_penalty: float = -1.0) -> RepetitionPenalty:
    """Penalise repeated word n-grams: ``max_penalty * (1 - unique / total)`` (open-r1's semantics).

    Completions shorter than ``ngram_size`` words score 0. ``max_penalty`` must be <= 0.
    """
    return RepetitionPenalty(ngram_size, max_penalty)


def length_window(*, min_words: int = 10, max_words: int = 300, value: float = 1.0,
                  slope_words: int = 50, measure: str = "content") -> LengthWindow:
    """``value`` inside ``[min_words, max_words]``, falling linearly to 0 over ``slope_words`` outside it.

    Words are counted in the completion's content, padding left out (``measure = "raw"``: every word)."""
    return LengthWindow(min_words, max_words, value, slope_words, measure)
