"""grpo_rewards.testing: what a reward plugin's tests import (torch-free).

* :mod:`grpo_rewards.testing.strategies`: hypothesis strategies for completions (well-formed,
  near-miss, adversarial, junk), chat message lists, numbers and the forms the number grammar
  reads them in, and batches with dataset columns.
* :class:`RewardConformance`: a base test class; subclass it, set ``reward_name`` (and
  ``params``, ``columns``, ``bounds``), and pytest runs the contract every reward must keep.
* :class:`GroupRewardConformance`: the same for a group reward (:mod:`grpo_rewards.group_reward`): permuting
  a batch permutes its scores, groups are independent.
* :class:`VerifierConformance`: the same for a verifier (``verifier_name``, ``values``,
  ``render``, ``oracle``, ``symmetric``).
* :mod:`grpo_rewards.testing.pytest_plugin`: the fixtures ``grpo_registry``, ``grpo_reward``,
  ``grpo_score`` and ``grpo_compose`` (loaded by pytest through the ``pytest11`` entry point).

The suites are imported on first use, so loading the pytest plugin imports neither them nor
hypothesis, and a hypothesis profile loaded before that use applies to them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from grpo_rewards.testing.conformance import RewardConformance, VerifierConformance
    from grpo_rewards.testing.group_conformance import GroupRewardConformance

__all__ = ["GroupRewardConformance", "RewardConformance", "VerifierConformance"]


def __getattr__(name: str) -> Any:
    if name == "GroupRewardConformance":
        from grpo_rewards.testing import group_conformance  # hypothesis: loaded on first use

        return group_conformance.GroupRewardConformance
    if name in __all__:
        from grpo_rewards.testing import conformance  # hypothesis: loaded on first use

        return getattr(conformance, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
