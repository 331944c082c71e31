"""The Unsloth notebooks' reward functions (cases/unsloth.json) against exact_match, integer_format, strict_format, soft_format, xml_count and numeric_proximity."""

from __future__ import annotations

import pytest

from grpo_rewards.builtins import timeout_pool

from . import suite

SUITE = suite.load("unsloth")


@pytest.fixture(scope="module", autouse=True)
def stop_pool_after():
    yield
    timeout_pool.shutdown()


@pytest.mark.parametrize("case", suite.params(SUITE))
def test_case(case):
    suite.check("unsloth", case)
