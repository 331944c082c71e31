"""The built-in rewards run the same conformance suite third-party plugins run."""

from __future__ import annotations

import subprocess
import sys

from grpo_rewards.testing import RewardConformance
from grpo_rewards.testing.strategies import rendered_numbers

_ANSWER = {"answer": rendered_numbers().map(lambda vt: vt[1])}


class TestExactMatch(RewardConformance):
    reward_name = "exact_match"
    columns = _ANSWER
    bounds = (0.0, 2.0)  # value defaults to 2.0


class TestNumericProximity(RewardConformance):
    reward_name = "numeric_proximity"
    columns = _ANSWER


class TestIntegerFormat(RewardConformance):
    reward_name = "integer_format"


class TestXmlCount(RewardConformance):
    reward_name = "xml_count"


class TestStrictFormat(RewardConformance):
    reward_name = "strict_format"


class TestSoftFormat(RewardConformance):
    reward_name = "soft_format"


class TestFinalAnswerFormat(RewardConformance):
    reward_name = "final_answer_format"
    bounds = (0.0, 1.0)


class TestXmlCountQwen3Count(RewardConformance):
    reward_name = "xml_count"
    params = {"mode": "count", "per_tag": 0.5, "per_bad_tag": -1.0, "opened_in_prompt": True,
              "reasoning_start": "<start_working_out>", "reasoning_end": "<end_working_out>",
              "answer_start": "<SOLUTION>", "answer_end": "</SOLUTION>"}
    bounds = (-3.0, 1.5)


class TestXmlFormat(RewardConformance):
    reward_name = "xml_format"
    bounds = (0.0, 1.0)


class TestXmlFormatVerifiers(RewardConformance):
    reward_name = "xml_format"
    params = {"mode": "verifiers", "fields": ["reasoning", ["code", "answer"]]}
    bounds = (0.0, 1.0 + 1e-9)


class TestRepetitionPenalty(RewardConformance):
    reward_name = "repetition_penalty"


class TestLengthWindow(RewardConformance):
    reward_name = "length_window"


def test_kit_imports_no_torch() -> None:
    code = "import sys, grpo_rewards.testing, grpo_rewards.testing.strategies; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_numbers_are_rendered_in_the_forms_the_grammar_accepts() -> None:
    from fractions import Fraction

    from grpo_rewards.testing.strategies import _renderings

    assert {"1234", "1,234", "$1234$", "\\boxed{1234}", "1234.0"} <= set(_renderings(Fraction(1234)))
    assert {"3/4", "0.75", "\\frac{3}{4}"} <= set(_renderings(Fraction(3, 4)))
