"""The kit's pytest plugin: loaded through its ``pytest11`` entry point, torch-free, and its fixtures build,
score and compose rewards from a registry holding only the plugin under test."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import grpo_rewards
from grpo_rewards import load_registry


def test_fixtures_build_score_and_compose(grpo_reward, grpo_score, grpo_compose) -> None:  # type: ignore[no-untyped-def]
    assert grpo_reward("exact_match")(["<answer>4</answer>", "<answer>5</answer>"], answer=["4", "4"]) == [2.0, 0.0]
    assert grpo_score("exact_match", ["<answer>4</answer>", "<answer>5</answer>"], params={"value": 3},
                      answer=["4", None]) == [3.0, None]
    total = grpo_compose('[rewards.c]\nuse = "exact_match"\nvalue = 1.0\n')
    assert total(["<answer>4</answer>"], answer=["4"])[0] == 1.0


def test_the_scorer_checks_the_contract(grpo_score) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(AssertionError, match="1 scores for 2 completions"):
        grpo_score(lambda completions, **_: [1.0], ["a", "b"])
    with pytest.raises(AssertionError, match="row 1: a score must be a finite number or None, got nan"):
        grpo_score(lambda completions, **_: [1.0, float("nan")], ["a", "b"])


def test_the_reward_fixture_checks_parameters(grpo_reward) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(grpo_rewards.ConfigError, match="valeu"):
        grpo_reward("exact_match", valeu=2.0)


def test_a_registry_of_only_some_plugins() -> None:
    registry = load_registry(only=["grpo-reward-length"])
    assert [p.distribution for p in registry.plugins] == ["grpo-reward-length"]
    assert set(registry.rewards) == {"length_window", "repetition_penalty"} and registry.verifiers == {}
    # bigrams of "a a a a": 3, 1 of them unique: max_penalty * (1 - 1/3)
    fn = grpo_rewards.reward("repetition_penalty", registry=registry, ngram_size=2, max_penalty=-1.0)
    assert fn(["a a a a"]) == [pytest.approx(-2 / 3)]
    with pytest.raises(grpo_rewards.PluginError, match="unknown reward 'exact_match'"):
        grpo_rewards.reward("exact_match", registry=registry)
    assert "not an installed plugin" in load_registry(only=["no-such-plugin"]).problems[0]


def _pytest_in(folder: Path, ini: str, test: str) -> subprocess.CompletedProcess[str]:
    (folder / "pyproject.toml").write_text(f"[tool.pytest.ini_options]\n{ini}\n")
    (folder / "test_it.py").write_text(textwrap.dedent(test))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "GRPO_"))}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(folder)],
                          cwd=folder, capture_output=True, text=True, env=env, timeout=300)


def test_loaded_by_its_entry_point_holding_only_the_plugin_under_test_without_torch(tmp_path: Path) -> None:
    run = _pytest_in(tmp_path, 'grpo_plugin = "grpo-reward-length"', """
        import sys

        def test_only_the_plugin(grpo_registry, grpo_reward, grpo_compose):
            assert set(grpo_registry.rewards) == {"length_window", "repetition_penalty"}
            assert grpo_reward("length_window", min_words=1, max_words=2)(["one two"]) == [1.0]
            assert grpo_compose('[rewards.r]\\nuse = "repetition_penalty"\\n')(["a b"]) == [0.0]

        def test_no_torch():
            assert "torch" not in sys.modules
    """)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "2 passed" in run.stdout


def test_a_plugin_that_is_not_installed_is_a_usage_error(tmp_path: Path) -> None:
    run = _pytest_in(tmp_path, 'grpo_plugin = "not-installed-anywhere"', """
        def test_it(grpo_registry):
            pass
    """)
    assert run.returncode != 0
    assert "grpo_plugin = 'not-installed-anywhere'" in run.stdout + run.stderr
    assert "pip install -e ." in run.stdout + run.stderr
