"""Under ``float_tolerance`` an expected integer compares exactly, through the code reward and
``grpo rewards score`` (judging runs in the trainer, whatever the profile)."""

from __future__ import annotations

import json

from grpo_rewards import reward
from grpo_rewards.command_line import main

from .conftest import needs_default

pytestmark = needs_default

TESTS = {"language": "python", "test_cases": [{"input": "", "output": "1000000007 0.5\n"}]}
COMPLETIONS = ["```python\nprint(1000000008, 0.5)\n```",  # off by one in the last digit: within 1e-6 relatively
               "```python\nprint(1000000007.0000001, 0.5)\n```",  # not an integer
               "```python\nprint(1000000007, 0.5000001)\n```"]  # the float within tolerance: passes


def test_the_reward_compares_integers_exactly():
    tolerant = reward("code_execution", float_tolerance=1e-6, cpu_seconds=2.0, wall_seconds=4.0)
    assert tolerant(COMPLETIONS, verification_info=[json.dumps(TESTS)] * 3) == [0.0, 0.0, 1.0]


def test_rewards_score_compares_integers_exactly(tmp_path):
    config = tmp_path / "rewards.toml"
    config.write_text('[rewards.tests]\nuse = "code_execution"\nfloat_tolerance = 1e-6\ncpu_seconds = 2.0\n'
                      'wall_seconds = 4.0\n')
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps({"completion": c, "verification_info": TESTS}) + "\n" for c in COMPLETIONS))
    out = tmp_path / "scored.jsonl"
    assert main(["rewards", "score", str(config), "--input", str(data), "--output", str(out)]) == 0
    assert [json.loads(line)["tests"] for line in out.read_text().splitlines()] == [0.0, 0.0, 1.0]
