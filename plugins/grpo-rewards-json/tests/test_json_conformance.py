"""The package as the toolkit sees it: found through its entry point, the kit's conformance suite for
each reward, and ``grpo rewards check`` on each."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import strategies as st

from grpo_rewards import load_registry
from grpo_rewards.testing import RewardConformance

_SCHEMAS = [{"type": "object"}, {"type": "array", "items": {"type": "integer"}},
            {"type": "object", "required": ["answer"], "properties": {"answer": {"type": "number"}}}]


def test_found_through_its_own_distribution_and_entry_point():
    registry = load_registry()
    info = next(p for p in registry.plugins if p.name == "json_rewards")
    assert info.distribution == "grpo-rewards-json"
    assert info.registers == {"rewards": ["json_valid", "json_schema"]}


class TestJsonValid(RewardConformance):
    reward_name = "json_valid"
    bounds = (0.0, 1.0)


class TestJsonValidAnyTopLevel(RewardConformance):
    reward_name = "json_valid"
    params = {"top_level": "any", "value": 2.0, "wrong_value": -1.0}
    bounds = (-1.0, 2.0)


class TestJsonSchemaFromATable(RewardConformance):
    reward_name = "json_schema"
    params = {"schema": _SCHEMAS[2]}
    bounds = (0.0, 1.0)


class TestJsonSchemaFromAColumn(RewardConformance):
    reward_name = "json_schema"
    columns = {"schema": st.sampled_from(_SCHEMAS).flatmap(lambda s: st.sampled_from([s, json.dumps(s)]))}
    bounds = (0.0, 1.0)


@pytest.mark.parametrize("args", [["json_valid"], ["json_valid", "top_level=\"any\""],
                                  ["json_schema", 'schema={type="object"}'],
                                  ["json_schema", 'schema={type="integer"}']])
def test_grpo_rewards_check_finds_no_hack(args):
    run = subprocess.run([sys.executable, "-m", "grpo_rewards", "rewards", "check", *args],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "no trick beats an honest wrong answer" in run.stdout
