"""Every peer suite's cases (``cases/<suite>.json``) against the built-in meant to reproduce each peer function:
Math-Verify's tables against ``math_equivalence``; open-r1's against ``math_equivalence``, ``strict_format`` and
``xml_count``; TRL's against ``math_equivalence``; the Unsloth notebooks' against ``exact_match``,
``integer_format``, ``strict_format``, ``soft_format``, ``xml_count`` and ``numeric_proximity``; the graders of
lm-evaluation-harness and simple-evals on the answer formats of the model families users train against
``exact_match``; Qwen2.5-Math's grader too."""

from __future__ import annotations

import pytest

from grpo_rewards.isolation import pool as timeout_pool

from . import suite

SUITES = suite.SUITES


@pytest.fixture(scope="module", autouse=True)
def stop_pool_after():
    yield
    timeout_pool.shutdown()


@pytest.mark.parametrize(("name", "case"), [
    pytest.param(name, *p.values, id=f"{name}:{p.id}", marks=p.marks)
    for name in SUITES for p in suite.params(suite.load(name))
])
def test_case(name, case):
    suite.check(name, case)
