"""The pytest plugin (entry point ``pytest11``): fixtures for reward tests, no torch.

* ``grpo_reward``: ``grpo_reward(name, **params)`` builds a registered reward;
* ``grpo_compose``: ``grpo_compose(toml_text)`` composes the ``[rewards.*]`` tables of a TOML document.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest


@pytest.fixture
def grpo_reward() -> Callable[..., Any]:
    from grpo_rewards import reward

    return reward


@pytest.fixture
def grpo_compose() -> Callable[[str], Any]:
    from grpo_rewards.reward_config import rewards_from_doc
    from grpo_rewards.tomlfile import parse_toml

    def compose(text: str) -> Any:
        doc = parse_toml(text)
        composed = rewards_from_doc(doc)
        doc.raise_if_problems()
        return composed

    return compose
