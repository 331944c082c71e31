"""TRL's reward tests (cases/trl.json) against math_equivalence."""

from __future__ import annotations

import pytest

from grpo_rewards.builtins import timeout_pool

from . import suite

SUITE = suite.load("trl")


@pytest.fixture(scope="module", autouse=True)
def stop_pool_after():
    yield
    timeout_pool.shutdown()


@pytest.mark.parametrize("case", suite.params(SUITE))
def test_case(case):
    suite.check("trl", case)
