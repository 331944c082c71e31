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


def _score(tmp_path, config_text, lines, *extra):
    config = tmp_path / "c.toml"
    config.write_text(config_text)
    src = tmp_path / "in.jsonl"
    src.write_text("".join(line + "\n" for line in lines))
    out = tmp_path / "out.jsonl"
    code = main(["rewards", "score", str(config), "--input", str(src), "--output", str(out), *extra])
    return code, src, out


def test_a_needed_column_no_row_has_is_refused_before_scoring(scorer_env, capsys):
    tmp_path, _ = scorer_env
    config = ('[rewards.match]\nuse = "echo_match"\n\n[rewards.exact]\nuse = "exact_match"\n\n'
              '[rewards.ver]\nuse = "verify:numeric"\nreference_column = "solution"\n\n[rewards.fmt]\nuse = "xml_count"\n')
    rows = [json.dumps({"completion": "<answer>4</answer>", "prompt": "2+2?", "id": i}) for i in range(5)]
    code, src, out = _score(tmp_path, config, rows)
    err = capsys.readouterr().err
    assert code == 2 and not out.exists()
    lines = err.splitlines()
    assert f"{src}: answer: no row has this column, which reward 'match' (echo_match) needs: every row would " \
           "score None (the rows have: id, prompt)" in lines
    assert any(line.startswith(f"{src}: answer: no row has this column, which reward 'exact' (exact_match)")
               for line in lines)
    assert any(line.startswith(f"{src}: solution: no row has this column, which reward 'ver' (verify:numeric)")
               for line in lines)
    assert "fmt" not in err  # xml_count reads no column
    # the column present but null in every row is the same mistake
    rows = [json.dumps({"completion": "4", "answer": None, "solution": "4"}) for _ in range(3)]
    code, src, out = _score(tmp_path, config, rows)
    err = capsys.readouterr().err
    assert code == 2 and not out.exists()
    assert f"{src}: answer: every row holds null in this column, which reward 'match' (echo_match) needs" in err


def test_rows_lacking_a_needed_column_are_scored_none_and_counted(scorer_env, capsys):
    tmp_path, _ = scorer_env
    rows = [json.dumps({"completion": "4", "answer": "4"}), json.dumps({"completion": "<answer>4</answer>"}),
            json.dumps({"completion": "4", "answer": None}), json.dumps({"completion": "4", "answer": "4"})]
    code, src, out = _score(tmp_path, '[rewards.exact]\nuse = "exact_match"\n', rows)
    assert code == 0
    assert [json.loads(line)["exact"] for line in out.read_text().splitlines()] == [2.0, None, None, 2.0]
    assert (f"warning: {src}: answer: 2 of 4 rows have no value here (first: line 2); reward 'exact' (exact_match) "
            "scores them None") in capsys.readouterr().err


def test_a_mostly_malformed_file_is_refused_and_half_is_scored(scorer_env, capsys):
    tmp_path, _ = scorer_env
    good = [json.dumps({"completion": "4", "answer": "4"})] * 3
    code, src, out = _score(tmp_path, '[rewards.exact]\nuse = "exact_match"\n', [*good, "nope", "[1]", "{", "7"])
    err = capsys.readouterr().err
    assert code == 2 and not out.exists()
    assert err.splitlines()[0] == (f"{src}: 4 of 7 rows are malformed (more than 50%): not scored; "
                                   "is this the file meant?")
    assert f"{src}:4: invalid JSON" in err and f"{src}:5: expected a JSON object, got list" in err
    code, src, out = _score(tmp_path, '[rewards.exact]\nuse = "exact_match"\n', [*good, "nope", "[1]", "{"])
    assert code == 0 and len(out.read_text().splitlines()) == 3
    assert "3 rows scored, 3 skipped" in capsys.readouterr().out


def test_a_json_object_in_a_text_reference_is_refused_by_line(scorer_env, capsys):
    tmp_path, _ = scorer_env
    config = ('[rewards.exact]\nuse = "exact_match"\n\n[rewards.ver]\nuse = "verify:exact"\n'
              'reference_column = "solution"\n')
    rows = [json.dumps({"completion": "<answer>4</answer>", "answer": "4", "solution": "4"}),
            json.dumps({"completion": "<answer>4</answer>", "answer": {"value": 4}, "solution": "4"}),
            json.dumps({"completion": "<answer>4</answer>", "answer": "4", "solution": ["4"]}),
            json.dumps({"completion": "<answer>4</answer>", "answer": 4, "solution": 4})]
    code, src, out = _score(tmp_path, config, rows)
    err = capsys.readouterr().err
    assert code == 0
    assert (f"skipped {src}:2: answer: holds a JSON object, not a text reference (reward 'exact' compares answers "
            "with it as text)") in err
    assert f"skipped {src}:3: solution: holds a JSON array, not a text reference (reward 'ver'" in err
    scored = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["exact"], r["ver"]) for r in scored] == [(2.0, 1.0), (2.0, 1.0)]  # a number is a reference


def test_a_prompt_that_is_not_text_or_messages_is_a_malformed_row(scorer_env, capsys):
    tmp_path, config = scorer_env
    rows = [json.dumps({"completion": "4", "answer": "4", "prompt": "2+2?"}),
            json.dumps({"completion": "4", "answer": "4", "prompt": {"text": "2+2?"}}),
            json.dumps({"completion": "4", "answer": "4", "prompt": [{"role": "user", "content": "2+2?"}]})]
    src = tmp_path / "p.jsonl"
    src.write_text("\n".join(rows) + "\n")
    assert main(["rewards", "score", str(config), "--input", str(src), "--output", str(tmp_path / "o.jsonl")]) == 0
    assert f"{src}:2: 'prompt' must be text or a list of chat messages" in capsys.readouterr().err
    assert len((tmp_path / "o.jsonl").read_text().splitlines()) == 2


def test_needed_columns_are_asked_of_the_reward():
    from grpo_rewards.columns import needed_columns

    def trl_style(completions, answer, tests, **kw):
        return [1.0] * len(completions)

    def optional(completions, completion_ids=None, **kw):
        return [0.0] * len(completions)

    def looks_up(completions, **columns):
        return [float(a == b) for a, b in zip(columns["answer"], columns["solution"], strict=True)]

    def broken(completions, **kw):
        raise RuntimeError("fails on any batch")

    assert needed_columns(trl_style) == ["answer", "tests"]
    assert needed_columns(trl_style, ["answer"]) == ["tests"]
    assert needed_columns(optional) == [] and needed_columns(broken) == []
    assert needed_columns(looks_up) == ["answer", "solution"]


def test_a_verifier_reward_never_scores_a_json_object_reference_as_text():
    from grpo_rewards import reward

    completions = ["<answer>4</answer>"] * 3
    for use in ("exact_match", "verify:exact", "verify:numeric"):
        fn = reward(use)
        assert fn(completions, answer=[{"value": 4}, [4], "4"])[:2] == [None, None], use
    why = reward("verify:exact").explain(completions, answer=[{"value": 4}, [4], "4"])
    assert why[0]["reason"] == "the reference is a JSON object, not text"
    assert why[1]["reason"] == "the reference is a JSON array, not text" and why[2]["status"] == "ok"
