"""The built-in reward and verifier modules; each exposes ``REWARD_SPECS`` and/or ``VERIFIER_SPECS``."""

from __future__ import annotations

import importlib

from grpo_rewards.specs import RewardSpec, VerifierSpec

# Add a module here when it exists; each is imported when the built-in plugin registers.
MODULES: list[str] = ["exact_match", "integer_format", "xml_count", "xml_format", "formats", "numeric_proximity", "math_equivalence", "email_rules"]


def _collect(attr: str) -> list:
    specs = []
    for name in MODULES:
        module = importlib.import_module(f"grpo_rewards.builtins.{name}")
        specs.extend(getattr(module, attr, ()))
    return specs


def reward_specs() -> list[RewardSpec]:
    return _collect("REWARD_SPECS")


def verifier_specs() -> list[VerifierSpec]:
    return _collect("VERIFIER_SPECS")
