"""grpo_rewards.testing: what a reward plugin's tests import (torch-free).

* :mod:`grpo_rewards.testing.strategies`: hypothesis strategies for completions (well-formed,
  near-miss, adversarial, junk), chat message lists, numbers and the forms the number grammar
  reads them in, and batches with dataset columns.
* :class:`RewardConformance`: a base test class; subclass it, set ``reward_name`` (and
  ``params``, ``columns``, ``bounds``), and pytest runs the contract every reward must keep.
* :class:`VerifierConformance`: the same for a verifier (``verifier_name``, ``values``,
  ``render``, ``oracle``, ``symmetric``).
* :mod:`grpo_rewards.testing.pytest_plugin`: the fixtures ``grpo_registry``, ``grpo_reward``,
  ``grpo_score`` and ``grpo_compose`` (loaded by pytest through the ``pytest11`` entry point).
"""

from grpo_rewards.testing.conformance import RewardConformance, VerifierConformance

__all__ = ["RewardConformance", "VerifierConformance"]
