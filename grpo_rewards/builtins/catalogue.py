"""The list of built-in reward and verifier specs (names, factories, columns, examples)."""

from __future__ import annotations

from grpo_rewards.specs import RewardSpec, VerifierSpec

REWARDS: list[RewardSpec] = []
VERIFIERS: list[VerifierSpec] = []
