"""The rewards: penalise repeated n-grams (open-r1's rule) and reward a target length window."""

from __future__ import annotations

from typing import Any

from grpo_rewards import completion_text


def repetition_penalty(*, ngram_size: int = 3, max_penalty: float = -1.0):
    """Penalise repeated word n-grams: ``max_penalty * (1 - unique / total)`` (open-r1's semantics).

    Completions shorter than ``ngram_size`` words score 0. ``max_penalty`` must be <= 0.
    """
    if ngram_size < 1:
        raise ValueError(f"ngram_size must be >= 1, got {ngram_size}")
    if max_penalty > 0:
        raise ValueError(f"max_penalty must be <= 0, got {max_penalty}")

    def reward(completions: list[Any], **columns: Any) -> list[float | None]:
        out: list[float | None] = []
        for completion in completions:
            words = completion_text(completion).lower().split()
            if len(words) < ngram_size:
                out.append(0.0)
                continue
            ngrams = [tuple(words[i : i + ngram_size]) for i in range(len(words) - ngram_size + 1)]
            out.append((1 - len(set(ngrams)) / len(ngrams)) * max_penalty)
        return out

    reward.__name__ = "repetition_penalty"
    return reward


def length_window(*, min_words: int = 10, max_words: int = 300, value: float = 1.0, slope_words: int = 50):
    """``value`` inside ``[min_words, max_words]``, falling linearly to 0 over ``slope_words`` outside it."""
    if not 0 <= min_words <= max_words:
        raise ValueError(f"need 0 <= min_words <= max_words, got {min_words} and {max_words}")
    if slope_words <= 0:
        raise ValueError(f"slope_words must be positive, got {slope_words}")

    def reward(completions: list[Any], **columns: Any) -> list[float | None]:
        out: list[float | None] = []
        for completion in completions:
            n = len(completion_text(completion).split())
            distance = max(min_words - n, n - max_words, 0)
            out.append(value * max(0.0, 1 - distance / slope_words))
        return out

    reward.__name__ = "length_window"
    return reward
