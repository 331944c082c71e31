"""The metamorphic properties (grpo_rewards.testing.metamorphic) over every built-in reward and the rewards of
the repository's plugins, on generated golds of every kind; code answers through the sandbox's extraction.

Each reward reads the kinds it is for (a number reward numbers, ``math_equivalence`` sets, intervals and
expressions too); a reward that reads no answer is held to "padding never pays" alone. The example counts
keep this file near a minute on two cores, while each property still meets every template and padding.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grpo_rewards import get_registry, reward
from grpo_rewards.sandbox.extract import extract_code
from grpo_rewards.testing import metamorphic
from grpo_rewards.testing.strategies import MARKERS, NUMERIC_KINDS, TEMPLATES, Gold, golds

NUMBERS = (*NUMERIC_KINDS, "letter")
MATH = (*NUMERIC_KINDS, "unit", "set", "interval", "expression")
TIERS = {"exact": 1.0, "near": 0.0, "close": 0.0, "far": 0.0, "unparsable": 0.0}

# name -> (parameters, the kinds it reads or None for a reward that reads no answer, examples)
READERS: dict[str, tuple[dict[str, Any], tuple[str, ...] | None, int]] = {
    "exact_match": ({"value": 1.0, "wrong_value": 0.0}, NUMBERS, 60),
    "numeric_proximity": ({"mode": "tiered", "tiers": TIERS, "missing_value": 0.0}, NUMERIC_KINDS, 60),
    "math_equivalence": ({"workers": 1}, MATH, 30),
    "cosine_scaled": ({}, MATH, 15),
    "json_valid": ({}, ("json",), 30),
}
NOT_CHECKED = {
    "code_execution": "runs code in the sandbox; its extraction is checked below",
    "code_execution_binary": "runs code in the sandbox; its extraction is checked below",
    "email_rules": "pays for the words of an email reply (keywords, length): no answer, and words are its content",
    "json_schema": "reads the same JSON as json_valid, then checks it against the row's schema",
    "llm_judge": "a model's verdict on a rubric, no reference: its template is checked by the injection probes",
    "pairwise_judge": "a model's preference between two completions: checked by the injection probes",
    "majority_vote": "agreement within a group, no reference: its answers are read by the same grammar",
    "reward_model": "a trained model's score, no reference: tests/core/test_reward_model_builtin.py",
}
COLUMNS = {"language": "python", "schema": '{"type": "object"}'}


def _names() -> list[str]:
    return sorted(set(get_registry().rewards) - set(NOT_CHECKED))


def _scorer(name: str) -> metamorphic.Score:
    params = READERS.get(name, ({}, None, 0))[0]
    fn = reward(name, **params)
    columns = [c for c in get_registry().rewards[name].columns if c in COLUMNS]

    def score(completion: str, gold: Gold) -> float | None:
        cells = {c: [COLUMNS[c]] for c in columns}
        if "answer" in get_registry().rewards[name].columns:
            cells["answer"] = [gold.reference]
        got = fn([completion], **cells)[0]
        if name == "cosine_scaled" and got is not None:
            return 1.0 if got > 0 else got  # right (a positive score) or how wrong: the length scales the rest
        return got

    return score


def test_every_reward_is_checked_or_excluded_with_a_reason() -> None:
    assert set(NOT_CHECKED) <= set(get_registry().rewards)
    assert set(READERS) <= set(_names())


@pytest.mark.parametrize("name", _names())
def test_metamorphic_properties(name: str) -> None:
    params, kinds, examples = READERS.get(name, ({}, None, 0))
    score = _scorer(name)
    if kinds is None:  # no answer read: padding alone, over golds of every kind
        found = metamorphic.violations(score, full=1.0, kinds=MATH, examples=12, properties=("padding never pays",))
    else:
        found = metamorphic.violations(score, full=1.0, kinds=kinds, examples=examples)
    assert found == []


@settings(max_examples=40, deadline=None, database=None, derandomize=True)
@given(golds(("code",)), st.sampled_from(["```python\n{}```", "```py\n{}```", "Here:\n```python\n{}```\nDone.",
                                          "```python\n{}```\nUsage:\n```\nf(2)\n```",
                                          "<think>\n```python\nprint(0)\n```\n</think>\n```python\n{}```"]))
def test_code_in_any_frame_is_the_code(gold: Gold, frame: str) -> None:
    assert extract_code(frame.format(gold.right))[0] == gold.right
    assert extract_code(f"<think>\n```python\n{gold.right}```\n</think>\nI cannot help.")[0] is None


@settings(max_examples=30, deadline=None, database=None, derandomize=True)
@given(golds(("json",)), st.sampled_from(list(MARKERS[:2]) + list(TEMPLATES.values())))
def test_json_rewards_read_only_the_answer(gold: Gold, frame: str) -> None:
    json.loads(gold.right)
    fn = reward("json_valid")
    assert fn([f"```json\n{gold.right}\n```"]) == [1.0]
    assert fn([f"<think>\n```json\n{gold.right}\n```\n</think>\nNo."]) == [0.0]
    assert fn([f"```json\n{gold.wrong}\n```\n```\n{gold.right}\n```"]) == [0.0]
