"""Held-out exact-match accuracy with greedy decoding, scored by the registered ``exact_match`` reward."""

from __future__ import annotations

from typing import Any

from grpo_rewards import reward


def exact_match_accuracy(
    backend: Any, prompts: list[str], answers: list[str], *, batch_size: int = 256
) -> tuple[float, list[str]]:
    """Fraction of ``prompts`` whose greedy completion's answer equals the reference; and the completions."""
    correct = reward("exact_match", value=1.0, wrong_value=0.0, reference_extract="none")
    texts: list[str] = []
    for start in range(0, len(prompts), batch_size):
        texts += backend.generate(prompts[start : start + batch_size], 1, greedy=True).completions_text
    scores = correct(texts, answer=answers)
    return sum(s == 1.0 for s in scores) / max(1, len(scores)), texts
