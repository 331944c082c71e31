"""grpo_rewards: reward functions and verifiers as pluggy plugins, composed with weights.

Imports no torch. The public API::

    from grpo_rewards import reward, compose, load_rewards
    correct = reward("exact_match", value=2.0)          # any registered reward, built with parameters
    total = compose({"correct": correct, "fmt": (reward("xml_count"), 0.5)})
    total(["<answer>4</answer>"], answer=["4"])          # TRL signature: list[float | None]
"""

from __future__ import annotations

from typing import Any

from grpo_rewards.answers.extraction import extract_answer
from grpo_rewards.completions import completion_text
from grpo_rewards.compose import ComposedReward, RewardEntry, Scores, compose
from grpo_rewards.contract import RewardError, SafeReward
from grpo_rewards.group_reward import GroupReward, group_reward
from grpo_rewards.hookspecs import hookimpl, hookspec
from grpo_rewards.plugins import PluginError, Registry, get_registry, load_registry
from grpo_rewards.reward_config import checked_reward, load_rewards, rewards_from_doc
from grpo_rewards.specs import RewardFunction, RewardSpec, VerifierSpec
from grpo_rewards.tomlfile import ConfigError
from grpo_rewards.verdict import Status, Verdict, reward_from_verifier


def reward(name: str, *, registry: Registry | None = None, **params: Any) -> RewardFunction:
    """Build the registered reward ``name`` (``"verify:<verifier>"`` for a verifier) with ``params``.

    The parameters are checked as a config's are: an unknown one (with a did-you-mean), a value of the
    wrong type or a missing required one raises :class:`ConfigError` listing every problem. ``registry``
    (default: the process-wide one, every installed plugin) is where ``name`` is looked up, e.g.
    ``load_registry(only=["my-plugin"])``: tests and embedding need no monkeypatching.
    """
    return checked_reward(name, params, registry or get_registry())


__all__ = [
    "ComposedReward",
    "ConfigError",
    "GroupReward",
    "PluginError",
    "Registry",
    "RewardEntry",
    "RewardError",
    "RewardFunction",
    "RewardSpec",
    "SafeReward",
    "Scores",
    "Status",
    "Verdict",
    "VerifierSpec",
    "completion_text",
    "compose",
    "extract_answer",
    "get_registry",
    "group_reward",
    "hookimpl",
    "hookspec",
    "load_registry",
    "load_rewards",
    "reward",
    "reward_from_verifier",
    "rewards_from_doc",
]
