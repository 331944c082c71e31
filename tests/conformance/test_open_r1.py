"""open-r1's reward tests (cases/open_r1.json) against math_equivalence, strict_format and xml_count."""

from __future__ import annotations

import pytest

from grpo_rewards.builtins import timeout_pool

from . import suite

SUITE = suite.load("open_r1")


@pytest.fixture(scope="module", autouse=True)
def stop_pool_after():
    yield
    timeout_pool.shutdown()


@pytest.mark.parametrize("case", suite.params(SUITE))
def test_case(case):
    suite.check("open_r1", case)
