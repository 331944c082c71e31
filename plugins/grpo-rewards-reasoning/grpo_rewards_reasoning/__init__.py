"""grpo-rewards-reasoning: the reasoning rewards TRL and open-r1 users expect, as grpo-toolkit plugins.

Registered names (``use = "..."`` in a rewards TOML): ``think_format``, ``reasoning_steps``,
``code_format``, ``soft_overlong_punishment``, ``cosine_scaled``, ``ngram_repetition_penalty``.
Each factory below returns a picklable reward with TRL's signature ``fn(completions, **columns)``.
"""

from grpo_rewards_reasoning.formats import code_format, code_format_matches, reasoning_steps, think_format
from grpo_rewards_reasoning.length import completion_lengths, cosine_scaled, soft_overlong_punishment
from grpo_rewards_reasoning.repetition import ngram_repetition_penalty, repetition_fraction

__all__ = [
    "code_format",
    "code_format_matches",
    "completion_lengths",
    "cosine_scaled",
    "ngram_repetition_penalty",
    "reasoning_steps",
    "repetition_fraction",
    "soft_overlong_punishment",
    "think_format",
]
