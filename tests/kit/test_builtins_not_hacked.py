"""No hacking probe (grpo_rewards.hacking) beats an honest wrong answer on any built-in reward.

Every reward of the built-in plugins that can score the probes' sample row (it reads
at most the ``answer`` column) is checked; the others are listed with the reason.
A new built-in reward is either checked here or excluded by name.
"""

from __future__ import annotations

import pytest

from grpo_rewards import get_registry, hacking

BUILTIN_PLUGINS = ("builtin_rewards", "builtin_sandbox")
NOT_APPLICABLE = {
    "email_rules": "scores an email reply against keywords, an ideal reply and a recipient: no answer to hedge",
    "code_execution": "runs a code completion against the row's tests (verification_info): no answer column",
    "code_execution_binary": "runs a code completion against the row's tests (verification_info): no answer column",
}
PARAMS = {"math_equivalence": {"workers": 1},  # one worker process is enough for the probes' ten rows
          # a judge gets the prompt-injection probes, asked of a scripted endpoint (its own is never called)
          "llm_judge": {"model": "m", "base_url": "http://127.0.0.1:9/v1", "question": "Is the answer right?"},
          "pairwise_judge": {"model": "m", "base_url": "http://127.0.0.1:9/v1"}}


def _builtins() -> dict[str, tuple[str, ...]]:
    return {name: spec.columns for name, spec in get_registry().rewards.items() if spec.plugin in BUILTIN_PLUGINS}


def _checked() -> list[str]:
    return sorted(name for name, columns in _builtins().items() if set(columns) <= {"answer"})


def test_every_builtin_is_checked_or_excluded_with_a_reason() -> None:
    builtins = _builtins()
    assert {"exact_match", "numeric_proximity", "math_equivalence", "integer_format"} <= set(_checked())
    assert set(builtins) == set(_checked()) | set(NOT_APPLICABLE)
    assert not set(_checked()) & set(NOT_APPLICABLE)


@pytest.mark.parametrize("name", _checked())
def test_no_trick_beats_an_honest_wrong_answer(name: str) -> None:
    assert hacking.check(name, **PARAMS.get(name, {})) == {}
