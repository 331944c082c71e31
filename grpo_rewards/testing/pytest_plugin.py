"""The pytest plugin (entry point ``pytest11``, so installing grpo-toolkit is enough): fixtures for reward
tests. Imports no torch.

* ``grpo_plugin``: the plugin under test: the ``grpo_plugin`` ini option (a distribution or entry-point
  name, set in the package's ``[tool.pytest.ini_options]``), or ``None``; override the fixture to choose;
* ``grpo_registry``: a registry holding only that plugin (no built-ins, no other plugin); every installed
  plugin when ``grpo_plugin`` is ``None``;
* ``grpo_reward``: ``grpo_reward(name, **params)`` builds a reward of that registry (``"verify:<name>"``
  for a verifier);
* ``grpo_score``: ``grpo_score(name_or_reward, completions, params={...}, **columns)`` scores a batch
  and checks the result (one finite float or ``None`` per completion);
* ``grpo_compose``: ``grpo_compose(toml_text)`` validates and composes the ``[rewards.*]`` tables of a
  TOML document against that registry (a :class:`~grpo_rewards.ConfigError` lists every problem).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import grpo_rewards  # grpo_rewards.reward looked up at each call: a test may patch it
from grpo_rewards.contract import to_score
from grpo_rewards.plugins import load_registry
from grpo_rewards.reward_config import rewards_from_doc
from grpo_rewards.tomlfile import parse_toml

INI_NAME = "grpo_plugin"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(INI_NAME, "the grpo plugin under test (distribution or entry-point name): the grpo_registry "
                            "fixture holds only it", default="")


@pytest.fixture(scope="session")
def grpo_plugin(pytestconfig: pytest.Config) -> str | None:
    """The plugin under test: the ``grpo_plugin`` ini option, or None (every installed plugin)."""
    return str(pytestconfig.getini(INI_NAME)).strip() or None


@pytest.fixture(scope="session")
def grpo_registry(grpo_plugin: str | None) -> Any:
    """A registry holding only the plugin under test (every installed plugin when none is named)."""
    if grpo_plugin is None:
        return load_registry()
    registry = load_registry(only=[grpo_plugin])
    if not registry.plugins or any(p.error for p in registry.plugins):
        problems = "; ".join(registry.problems) or "it registers nothing"
        raise pytest.UsageError(f"{INI_NAME} = {grpo_plugin!r}: {problems} (install the package first: "
                                f"pip install -e .)")
    return registry


@pytest.fixture(scope="session")
def grpo_reward(grpo_registry: Any) -> Callable[..., Any]:
    """``grpo_reward(name, **params)``: a reward of ``grpo_registry``, parameters checked as in a config."""
    def build(name: str, **params: Any) -> Any:
        return grpo_rewards.reward(name, registry=grpo_registry, **params)

    return build


@pytest.fixture(scope="session")
def grpo_score(grpo_reward: Callable[..., Any]) -> Callable[..., list[float | None]]:
    """``grpo_score(name_or_reward, completions, params={...}, **columns)``: checked scores (floats or None)."""
    def score(use: Any, completions: list[Any], *, params: dict[str, Any] | None = None,
              **columns: Any) -> list[float | None]:
        fn = grpo_reward(use, **(params or {})) if isinstance(use, str) else use
        if params and not isinstance(use, str):
            raise TypeError("params= is for a reward given by name; build the callable with its parameters")
        out = list(fn(completions, **columns))
        assert len(out) == len(completions), f"{len(out)} scores for {len(completions)} completions"
        scores = []
        for i, value in enumerate(out):
            try:
                scores.append(to_score(value))
            except ValueError:
                raise AssertionError(f"row {i}: a score must be a finite number or None, got {value!r}") from None
        return scores

    return score


@pytest.fixture(scope="session")
def grpo_compose(grpo_registry: Any) -> Callable[[str], Any]:
    """``grpo_compose(toml_text)``: the validated, composed ``[rewards.*]`` tables (ConfigError otherwise)."""
    def compose(text: str) -> Any:
        doc = parse_toml(text)
        composed = rewards_from_doc(doc, grpo_registry)
        doc.raise_if_problems()
        return composed

    return compose
