"""The Unsloth notebooks' reward functions (cases/unsloth.json) against exact_match, integer_format, strict_format, soft_format, xml_count and numeric_proximity."""

from __future__ import annotations

import pytest

from grpo_rewards.builtins import timeout_pool

from . import suite

unsloth = suite.module_at("tests/rewards/unsloth_reference.py")  # the oracle tests/rewards uses

SUITE = suite.load("unsloth")


@pytest.fixture(scope="module", autouse=True)
def stop_pool_after():
    yield
    timeout_pool.shutdown()


@pytest.mark.parametrize("case", suite.params(SUITE))
def test_case(case):
    suite.check("unsloth", case)


REFERENCE = {  # tests/rewards/unsloth_reference.py, the oracle other tests use, per notebook function
    "correctness_reward_func": lambda case: unsloth.correctness(case["completion"], case["columns"]["answer"]),
    "int_reward_func": lambda case: unsloth.int_reward(case["completion"]),
    "strict_format_reward_func": lambda case: unsloth.strict_format(case["completion"]),
    "soft_format_reward_func": lambda case: unsloth.soft_format(case["completion"]),
    "xmlcount_reward_func": lambda case: unsloth.count_xml(case["completion"]),
}


@pytest.mark.parametrize("case", [c for c in SUITE["cases"] if c["peer"] in REFERENCE], ids=lambda c: c["id"])
def test_reference_transcription_scores_as_the_notebook(case):
    assert REFERENCE[case["peer"]](case) == pytest.approx(case["expected"], abs=1e-12)
