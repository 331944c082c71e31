"""Math-Verify's own test tables (cases/math_verify.json) against ``math_equivalence`` (``extract = "none"``)."""

from __future__ import annotations

import pytest

from grpo_rewards.builtins import timeout_pool

from . import suite

SUITE = suite.load("math_verify")


@pytest.fixture(scope="module", autouse=True)
def stop_pool_after():
    yield
    timeout_pool.shutdown()


@pytest.mark.parametrize("case", suite.params(SUITE))
def test_case(case):
    suite.check("math_verify", case)
