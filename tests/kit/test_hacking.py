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


def _length_pays(completions, answer, **_):  # type: ignore[no-untyped-def]
    return [len(c) / 1e6 for c in completions]  # a wrong answer's score grows with its length


def _counts_tags(completions, **_):  # type: ignore[no-untyped-def]
    tags = ("<reasoning>", "</reasoning>", "<answer>", "</answer>")
    return [0.125 * sum(c.count(t) == 1 for t in tags) for c in completions]


def test_padding_probes_flag_a_reward_that_pays_for_length(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(grpo_rewards, "reward", lambda name, **p: _length_pays)
    padding = {t for t in hacking.PAIRED_TRICKS if "padded" in t}
    assert len(padding) == 5 and padding <= set(hacking.check("anything"))


def test_tag_order_probes_flag_a_format_reward_that_only_counts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(grpo_rewards, "reward", lambda name, **p: _counts_tags)
    flagged = set(hacking.check("anything"))
    assert {"tags in reverse order", "each closing tag before its opening tag",
            "the answer block before the reasoning block"} <= flagged
    assert not {t for t in flagged if "padded" in t}


def test_each_fair_completion_differs_from_its_trick_only_by_the_trick() -> None:
    for trick, (text, fair) in hacking.PAIRED_TRICKS.items():
        if "padded" in trick:
            assert len(text) > len(fair) + 500, trick
        else:  # same length and words, no tag
            assert len(text) == len(fair) and "<" not in fair and fair.replace("(", "<").replace(")", ">") == text


def test_a_reward_reading_token_ids_is_probed_in_token_ids_too(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []

    def ids_length(completions, completion_ids=None, **_):  # type: ignore[no-untyped-def]
        seen.append(completion_ids is not None)
        return [len(i) / 1e6 if completion_ids is not None else 0.0 for i in (completion_ids or completions)]

    monkeypatch.setattr(grpo_rewards, "reward", lambda name, **p: ids_length)
    monkeypatch.setattr(hacking, "_reads_token_ids", lambda name: True)
    flagged = hacking.check("anything")
    assert seen == [False, True, False]  # the text probes, the paired probes in ids, the tool tricks (no ids)
    assert "a wrong answer padded with blank lines (token ids)" in flagged
    assert "a wrong answer padded with blank lines" not in flagged
