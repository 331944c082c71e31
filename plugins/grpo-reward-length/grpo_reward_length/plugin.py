"""The hook implementations grpo finds through this package's entry point."""

from grpo_reward_length.rewards import length_window, repetition_penalty
from grpo_rewards import RewardSpec, hookimpl


@hookimpl
def grpo_register_rewards(register):
    register(
        RewardSpec(
            name="repetition_penalty",
            factory=repetition_penalty,
            example='[rewards.no_loops]\nuse = "repetition_penalty"\nngram_size = 3\nmax_penalty = -1.0\n',
        )
    )
    register(
        RewardSpec(
            name="length_window",
            factory=length_window,
            example='[rewards.concise]\nuse = "length_window"\nmin_words = 20\nmax_words = 200\n',
        )
    )
