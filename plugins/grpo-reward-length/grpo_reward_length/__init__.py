"""Length-window and repetition-penalty rewards for grpo-toolkit."""

from grpo_reward_length.rewards import LengthWindow, RepetitionPenalty, length_window, repetition_penalty

__all__ = ["LengthWindow", "RepetitionPenalty", "length_window", "repetition_penalty"]
