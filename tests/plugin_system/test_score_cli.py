"""`grpo rewards score`: per-alias fields and total, malformed rows reported by line and skipped."""

from __future__ import annotations

import json

import pytest

from grpo_rewards.command_line import main

PLUGIN = """
from grpo_rewards import hookimpl, RewardSpec, completion_text

def make_echo_match():
    '''1.0 when the completion text equals the answer column.'''
    def echo_match(completions, answer, **kw):
        return [float(completion_text(c).strip() == str(a)) for c, a in zip(completions, answer)]
    return echo_match

def make_has_prompt():
    def has_prompt(completions, prompts=None, **kw):
        return [None if p is None else 1.0 for p in (prompts or [None] * len(completions))]
    return has_prompt

@hookimpl
def grpo_register_rewards(register):
    register(RewardSpec(name="echo_match", factory=make_echo_match, columns=("answer",)))
    register(RewardSpec(name="has_prompt", factory=make_has_prompt))
"""


@pytest.fixture
def scorer_env(install_plugin, monkeypatch, tmp_path):
    import grpo_rewards.plugins as plugins

    install_plugin("grpo-echo", "0.1", "grpo_echo_plugin", PLUGIN)
    monkeypatch.setattr(plugins, "_default", None)
    config = tmp_path / "r.toml"
    config.write_text('[rewards.match]\nuse = "echo_match"\nweight = 2\n\n[rewards.prompted]\nuse = "has_prompt"\n')
    yield tmp_path, config
    monkeypatch.setattr(plugins, "_default", None)


def test_score_writes_one_field_per_alias_and_total(scorer_env, capsys):
    tmp_path, config = scorer_env
    rows = [
        {"completion": "4", "answer": "4", "prompt": "2+2?"},
        {"completion": [{"role": "assistant", "content": "5"}], "answer": "4"},
        {"completion": "7", "answer": "7", "id": 3},
    ]
    lines = [json.dumps(r) for r in rows]
    lines.insert(1, "{not json")
    lines.insert(3, json.dumps({"answer": "1"}))
    lines.insert(4, json.dumps({"completion": 5, "answer": "5"}))
    src = tmp_path / "rows.jsonl"
    src.write_text("\n".join(lines) + "\n")
    out = tmp_path / "scored.jsonl"
    assert main(["rewards", "score", str(config), "--input", str(src), "--output", str(out)]) == 0
    scored = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["match"] for r in scored] == [1.0, 0.0, 1.0]
    assert [r["prompted"] for r in scored] == [1.0, None, None]
    assert [r["total"] for r in scored] == [3.0, 0.0, 2.0]
    assert scored[2]["id"] == 3 and scored[0]["prompt"] == "2+2?"
    captured = capsys.readouterr()
    assert f"{src}:2: invalid JSON" in captured.err
    assert f"{src}:4: missing field 'completion'" in captured.err
    assert f"{src}:5: 'completion' must be text" in captured.err
    assert "3 rows scored, 3 skipped" in captured.out


def test_missing_input_file_is_a_one_line_error(scorer_env, capsys):
    tmp_path, config = scorer_env
    assert main(["rewards", "score", str(config), "--input", str(tmp_path / "nope.jsonl")]) == 2
    assert "nope.jsonl" in capsys.readouterr().err
