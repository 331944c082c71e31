"""The shipped examples: every built-in's `grpo rewards show` snippet, and examples/rewards.toml on completions.jsonl."""

import json
from pathlib import Path

import pytest

from grpo_rewards import load_rewards
from grpo_rewards.builtins import exact_match, formats, integer_format, numeric_proximity, xml_count
from grpo_rewards.command_line import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SPECS = [s for m in (exact_match, formats, integer_format, numeric_proximity, xml_count)
         for s in (*m.REWARD_SPECS, *getattr(m, "VERIFIER_SPECS", ()))]


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_show_snippet_is_a_valid_config(spec, tmp_path):
    config = tmp_path / "r.toml"
    config.write_text(spec.example)
    composed = load_rewards(str(config))
    scores = composed(["<reasoning>\nx\n</reasoning>\n<answer>\n4\n</answer>\n"], answer=["4"])
    assert len(scores) == 1 and scores[0] is not None


def test_example_config_scores_the_example_completions(tmp_path, capsys):
    out = tmp_path / "scored.jsonl"
    assert main(["rewards", "score", str(EXAMPLES / "rewards.toml"), "--input", str(EXAMPLES / "completions.jsonl"),
                 "--output", str(out)]) == 0
    rows = [json.loads(line) for line in out.open()]
    assert len(rows) == 40
    aliases = ["correct", "correct_in_tags", "close", "integer", "layout", "strict_layout", "tags"]
    assert all(r[a] is not None for r in rows for a in aliases)  # no reward failed on any row
    perfect = [r for r in rows if isinstance(r["completion"], str) and r["completion"].endswith("\n</answer>\n")
               and r["correct"] == 2.0 and r["strict_layout"] == 0.5]
    assert perfect and all(r["total"] == pytest.approx(5.0) for r in perfect)
    junk = [r for r in rows if r["completion"] == "I'm not sure how to solve this problem."]
    assert junk and all(r["total"] == 0.0 for r in junk)
    # a correct answer always outscores a wrong one in the same layout
    right = [r["total"] for r in rows if r["correct"] == 2.0]
    wrong = [r["total"] for r in rows if r["correct"] == 0.0]
    assert min(right) > sum(wrong) / len(wrong)
    assert "40 rows scored, 0 skipped" in capsys.readouterr().out  # the summary table
