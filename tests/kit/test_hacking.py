"""The hacking probes flag a reward a trick can game and pass one it cannot."""

from __future__ import annotations

import re

import pytest

import grpo_rewards
from grpo_rewards import hacking


def _substring(completions, answer, **_):  # type: ignore[no-untyped-def]
    return [1.0 if a in c else 0.0 for c, a in zip(completions, answer)]


def _single_tag_exact(completions, answer, **_):  # type: ignore[no-untyped-def]
    out = []
    for c, a in zip(completions, answer):
        tags = re.findall(r"<answer>\s*(.*?)\s*</answer>", c, re.S)
        out.append(1.0 if len(tags) == 1 and tags[0] == a else 0.0)
    return out


def test_a_substring_reward_is_hacked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(grpo_rewards, "reward", lambda name, **p: _substring)
    hacks = hacking.check("anything")
    assert {"several answer tags", "answer inside the reasoning", "the answer repeated in every form"} <= set(hacks)
    assert hacking.main(["anything"]) == 1


def test_a_strict_single_tag_reward_is_not(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(grpo_rewards, "reward", lambda name, **p: _single_tag_exact)
    assert hacking.check("anything") == {}
    assert hacking.main(["anything"]) == 0


def test_the_cli_command_exits_by_the_verdict() -> None:
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-m", "grpo_rewards", "rewards", "check", "xml_count"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "no trick beats" in run.stdout


def test_a_reward_needing_a_column_the_sample_row_lacks_is_a_one_line_error() -> None:
    import subprocess
    import sys

    pytest.importorskip("grpo_rewards_json")
    run = subprocess.run([sys.executable, "-m", "grpo_rewards", "rewards", "check", "json_schema"],
                         capture_output=True, text=True)
    assert run.returncode == 2, run.stderr
    assert run.stderr.strip().splitlines() == [
        "error: json_schema: column 'schema' is missing and no schema parameter is set; the probes' sample row "
        "has only the columns answer and prompts (give the reward what it needs as a parameter)"]
    given = subprocess.run([sys.executable, "-m", "grpo_rewards", "rewards", "check", "json_schema",
                            'schema={type="object"}'], capture_output=True, text=True)
    assert given.returncode == 0, given.stderr
