"""The hook implementation grpo finds through this package's ``grpo`` entry point."""

from __future__ import annotations

from typing import Any

from grpo_rewards import RewardSpec, hookimpl
from grpo_rewards_reasoning.formats import code_format, reasoning_steps, think_format
from grpo_rewards_reasoning.length import cosine_scaled, soft_overlong_punishment
from grpo_rewards_reasoning.repetition import ngram_repetition_penalty

SPECS = [
    RewardSpec(
        name="think_format",
        factory=think_format,
        example='[rewards.think]\nuse = "think_format"\nweight = 0.5\n',
    ),
    RewardSpec(
        name="reasoning_steps",
        factory=reasoning_steps,
        example='[rewards.steps]\nuse = "reasoning_steps"\ntarget_steps = 3\n',
    ),
    RewardSpec(
        name="code_format",
        factory=code_format,
        columns=("language",),
        example='[rewards.code_layout]\nuse = "code_format"\nlanguage = "python"   # a `language` column overrides it\n',
    ),
    RewardSpec(
        name="soft_overlong_punishment",
        factory=soft_overlong_punishment,
        columns=("completion_ids",),
        example=(
            '[rewards.overlong]\nuse = "soft_overlong_punishment"\n'
            "max_completion_len = 1024   # tokens (characters without completion_ids)\nsoft_punish_cache = 256\n"
        ),
    ),
    RewardSpec(
        name="cosine_scaled",
        factory=cosine_scaled,
        columns=("answer", "completion_ids"),
        example=(
            '[rewards.cosine]\nuse = "cosine_scaled"\nmax_len = 1000\n'
            'reference_column = "solution"   # open-r1 / TRL datasets\n'
        ),
    ),
    RewardSpec(
        name="ngram_repetition_penalty",
        factory=ngram_repetition_penalty,
        columns=("completion_ids",),
        example='[rewards.no_loops]\nuse = "ngram_repetition_penalty"\nngram_size = 3\nmax_penalty = -1.0\n',
    ),
]


@hookimpl
def grpo_register_rewards(register: Any) -> None:
    for spec in SPECS:
        register(spec)
