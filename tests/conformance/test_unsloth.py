"""tests/rewards/unsloth_reference.py, the oracle of the reward tests, scores the Unsloth cases (cases/unsloth.json) as
the notebooks' own reward functions do (the cases themselves run in test_peer_cases.py)."""

from __future__ import annotations

import pytest

from . import suite

unsloth = suite.module_at("tests/rewards/unsloth_reference.py")  # the oracle tests/rewards uses

SUITE = suite.load("unsloth")


REFERENCE = {  # tests/rewards/unsloth_reference.py, the oracle other tests use, per notebook function
    "correctness_reward_func": lambda case: unsloth.correctness(case["completion"], case["columns"]["answer"]),
    "int_reward_func": lambda case: unsloth.int_reward(case["completion"]),
    "strict_format_reward_func": lambda case: unsloth.strict_format(case["completion"]),
    "soft_format_reward_func": lambda case: unsloth.soft_format(case["completion"]),
    "xmlcount_reward_func": lambda case: unsloth.count_xml(case["completion"]),
    "match_format_exactly": lambda case: unsloth.match_format_exactly(case["completion"]),
    "match_format_approximately": lambda case: unsloth.match_format_approximately(case["completion"]),
}


@pytest.mark.parametrize("case", [c for c in SUITE["cases"] if c["peer"] in REFERENCE], ids=lambda c: c["id"])
def test_reference_transcription_scores_as_the_notebook(case):
    assert REFERENCE[case["peer"]](case) == pytest.approx(case["expected"], abs=1e-12)
