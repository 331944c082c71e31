"""grpo_rewards.testing: what a reward plugin's tests import (torch-free).

* :mod:`grpo_rewards.testing.strategies`: hypothesis strategies for completions (well-formed,
  near-miss, adversarial), chat message lists and numbers rendered in the forms the number
  grammar accepts.
* :class:`RewardConformance`: a base test class; subclass it, set ``reward_name`` (and
  ``params``, ``columns``, ``bounds``), and pytest runs the contract every reward must keep.
"""

from grpo_rewards.testing.conformance import RewardConformance

__all__ = ["RewardConformance"]
