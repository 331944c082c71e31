"""A code-execution backend from a third-party plugin: registered through ``grpo_register_sandbox_backends``,
named by a code reward's ``backend`` key, started with that reward's options and handed its programs."""

from __future__ import annotations

import json
import types
from typing import Any

import pytest

from grpo_rewards import hookimpl, load_registry, reward
from grpo_rewards.sandbox.program import OK, RunResult


class LastLineBackend:
    """Runs nothing: a program's output is its last line of code (so ``3`` prints 3)."""

    made: list[LastLineBackend] = []

    def __init__(self, **options: Any):
        self.options, self.programs = options, []
        LastLineBackend.made.append(self)

    def run(self, programs: list[Any]) -> list[RunResult]:
        self.programs += programs
        return [RunResult(OK, stdout=p.code.strip().splitlines()[-1] + "\n", exit_code=0) for p in programs]

    def metrics(self) -> dict[str, Any]:
        return {"programs": len(self.programs)}

    def close(self) -> None:
        pass


PLUGIN = types.SimpleNamespace(grpo_register_sandbox_backends=hookimpl(
    lambda register: register("last_line", LastLineBackend)))


@pytest.fixture
def registry():
    """A registry holding the plugin, given per call: the process-wide one does not know ``last_line``."""
    LastLineBackend.made.clear()
    return load_registry(extra_plugins=[("last_line_plugin", PLUGIN)])


def test_a_registered_sandbox_backend_runs_the_code_rewards_programs(registry):
    code = reward("code_execution", backend="last_line", url="http://sandbox.invalid:1", concurrency=3,
                  registry=registry)
    tests = json.dumps({"inputs": ["1 2\n", "2 2\n"], "outputs": ["3", "4"]})
    completions = ["```python\nprint('x')\n3\n```", "```python\n4\n```", "no code"]
    assert code(completions, verification_info=[tests] * 3) == [0.5, 0.5, 0.0]
    [backend] = LastLineBackend.made
    assert backend.options == {"url": "http://sandbox.invalid:1", "concurrency": 3}
    assert [(p.stdin, p.code.strip().splitlines()[-1]) for p in backend.programs] == [
        ("1 2\n", "3"), ("2 2\n", "3"), ("1 2\n", "4"), ("2 2\n", "4")]
    assert code.metrics()["backend"] == {"programs": 4}


def test_an_unregistered_sandbox_backend_is_refused_with_a_did_you_mean(registry):
    from grpo_rewards.plugins import PluginError

    with pytest.raises(PluginError, match="unknown sandbox backend 'last_lin'; did you mean 'last_line'"):
        reward("code_execution", backend="last_lin", url="http://sandbox.invalid:1", registry=registry)


def test_a_toml_composition_given_a_registry_finds_its_sandbox_backend(registry, tmp_path):
    from grpo_rewards.plugins import PluginError
    from grpo_rewards.reward_config import load_rewards

    path = tmp_path / "rewards.toml"
    path.write_text('[rewards.code]\nuse = "code_execution"\nbackend = "last_line"\nurl = "http://sandbox.invalid:2"\n'
                    'concurrency = 5\n')
    composed = load_rewards(str(path), registry)
    tests = json.dumps({"inputs": ["1 2\n"], "outputs": ["3"]})
    # scored by last_line (the code's last line is its output), in the reward's worker process
    assert composed(["```python\n3\n```", "```python\n4\n```"], verification_info=[tests] * 2) == [1.0, 0.0]
    with pytest.raises(PluginError, match="unknown sandbox backend 'last_line'"):
        reward("code_execution", backend="last_line", url="http://sandbox.invalid:2")  # the process-wide registry
