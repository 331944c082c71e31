"""Length-window and repetition-penalty rewards for grpo-toolkit."""

from grpo_reward_length.rewards import length_window, repetition_penalty

__all__ = ["length_window", "repetition_penalty"]
