"""What a reward author sees when something is wrong or unclear: where a plugin failed to import (and its
traceback with --debug), a misspelt hook, `grpo --version`, `rewards score --explain` and `--fail-on-error`,
`rewards show verify:X`, a verifier's own extraction, and `reward(name, **params)` checked like a config."""

from __future__ import annotations

import importlib.metadata
import json
import types

import pytest

from grpo_rewards import (
    ConfigError,
    PluginError,
    RewardSpec,
    Verdict,
    VerifierSpec,
    hookimpl,
    load_registry,
    reward,
)
from grpo_rewards.command_line import main
from grpo_rewards.tomlfile import parse_toml


@pytest.fixture
def fresh_default(monkeypatch):
    import grpo_rewards.plugins as plugins

    monkeypatch.setattr(plugins, "_default", None)
    monkeypatch.setenv("COLUMNS", "200")
    yield plugins
    plugins._default = None


def info_of(registry, name):
    return next(p for p in registry.plugins if p.name == name)


# ---- a plugin that fails to import: where, and the traceback on request ----


def test_an_import_failure_names_the_plugins_file_and_line(install_plugin, tmp_path):
    install_plugin("grpo-noimp", "0.1", "grpo_noimp_plugin", "import json\nimport fancylib_not_installed\n")
    error = info_of(load_registry(), "grpo_noimp_plugin").error
    assert "No module named 'fancylib_not_installed'" in error
    assert error.endswith(f"(at {tmp_path / 'grpo_noimp_plugin.py'}:2)")


def test_a_syntax_error_names_its_own_line_not_the_import_machinery(install_plugin, tmp_path):
    install_plugin("grpo-syntax", "0.1", "grpo_syntax_plugin", "x = 1\n\ndef broken(:\n    pass\n")
    error = info_of(load_registry(), "grpo_syntax_plugin").error
    assert error.startswith("SyntaxError:") and error.endswith(f"(at {tmp_path / 'grpo_syntax_plugin.py'}:3)")
    assert "frozen" not in error


def test_a_failure_inside_a_helper_module_names_both_places(install_plugin, tmp_path):
    (tmp_path / "grpo_helper_lib.py").write_text("VALUE = 1\nraise ValueError('helper broke')\n")
    install_plugin("grpo-deep", "0.1", "grpo_deep_plugin", "import os\n\nimport grpo_helper_lib\n")
    error = info_of(load_registry(), "grpo_deep_plugin").error
    assert error == (f"ValueError: helper broke (at {tmp_path / 'grpo_helper_lib.py'}:2, "
                     f"from {tmp_path / 'grpo_deep_plugin.py'}:3)")


def test_debug_prints_the_traceback_of_a_plugin_that_failed_to_load(install_plugin, fresh_default, capsys):
    install_plugin("grpo-noimp", "0.1", "grpo_noimp_plugin", "import json\nimport fancylib_not_installed\n")
    assert main(["plugins"]) == 0
    assert "Traceback" not in capsys.readouterr().err
    fresh_default._default = None
    assert main(["--debug", "plugins"]) == 0
    err = capsys.readouterr().err
    assert "traceback of plugin grpo-noimp 0.1 (plugin 'grpo_noimp_plugin'):\nTraceback (most recent call last)" in err
    assert "ModuleNotFoundError: No module named 'fancylib_not_installed'" in err


def test_a_misspelt_hook_without_hookimpl_gets_a_did_you_mean(install_plugin):
    install_plugin("grpo-typo2", "0.1", "grpo_typo2_plugin", """
        def grpo_register_reward(register):  # neither the right name nor marked
            pass

        def grpo_helper_of_mine():  # not close to any hook: left alone
            pass
        """)
    info = info_of(load_registry(), "grpo_typo2_plugin")
    assert info.error is None
    assert info.warnings == ["grpo_register_reward is not a hook, so it is never called; did you mean "
                             "'grpo_register_rewards'? (and mark it `@grpo_rewards.hookimpl`)"]


def test_version(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.startswith(f"grpo-toolkit {importlib.metadata.version('grpo-toolkit')} (Python 3.")


# ---- verifiers: their keys, their own extraction, why they scored ----


def find_units(text: str) -> str | None:
    """A verifier's own extraction: the last '<number> km' in the text."""
    import re

    found = re.findall(r"(\d+(?:\.\d+)?)\s*km\b", text)
    return found[-1] if found else None


def make_km(*, tolerance: float = 0.0):
    """Kilometres within a tolerance."""

    def verify(answer: str, reference: str) -> Verdict:
        try:
            a, r = float(answer), float(reference)
        except ValueError:
            return Verdict.undecided(f"not a distance: {answer!r} / {reference!r}")
        return Verdict.correct(a, f"{a} km ~ {r} km") if abs(a - r) <= tolerance else Verdict.wrong(a, f"{a} != {r}")

    return verify


def make_same(*, ignore_case: bool = True):
    def verify(answer: str, reference: str) -> Verdict:
        a, r = (answer.lower(), reference.lower()) if ignore_case else (answer, reference)
        return Verdict.correct(a, "same text") if a == r else Verdict.wrong(a, f"{a!r} != {r!r}")

    return verify


def make_flaky():
    def flaky(completions, **kw):
        if any("boom" in c for c in completions):
            raise RuntimeError("flaky reward exploded")
        return [1.0] * len(completions)

    return flaky


PLUGIN = types.SimpleNamespace(
    grpo_register_verifiers=hookimpl(lambda register: [
        register(VerifierSpec(name="km", factory=make_km, extract=find_units)),
        register(VerifierSpec(name="same", factory=make_same)),
    ]),
    grpo_register_rewards=hookimpl(lambda register: register(RewardSpec(name="flaky", factory=make_flaky))),
)


@pytest.fixture
def registry(fresh_default):
    reg = load_registry(extra_plugins=[("authorkit", PLUGIN)])
    fresh_default._default = reg
    return reg


def test_a_verifier_brings_its_own_extraction(registry):
    from grpo_rewards.reward_config import rewards_from_doc

    completions = ["<think>maybe 9 km</think>It is 12 km away.", "about 12.4 km", "<answer>12</answer>"]
    km = reward("verify:km", tolerance=0.5)
    assert km(completions, answer=["12", "12", "12"]) == [1.0, 1.0, 0.0]  # reasoning left out; no 'km': no answer
    tagged = reward("verify:km", extract="answer_tag")  # a config can still pick a shared method
    assert tagged(completions, answer=["12", "12", "12"]) == [0.0, 0.0, 1.0]
    doc = parse_toml('[rewards.d]\nuse = "verify:same"\nextract = "verifier"\n', "r.toml")
    assert rewards_from_doc(doc, registry) is None
    assert "verifier 'same' brings no extraction of its own" in str(doc.problems[0])
    assert str(doc.problems[0]).startswith("r.toml:3: rewards.d.extract: verify:same: ")


def test_a_verifier_extraction_that_is_not_callable_is_refused(install_plugin):
    install_plugin("grpo-badext", "0.1", "grpo_badext_plugin", """
        from grpo_rewards import hookimpl, VerifierSpec

        @hookimpl
        def grpo_register_verifiers(register):
            register(VerifierSpec(name="v", factory=lambda: None, extract="answer_tag"))
        """)
    registry = load_registry()
    assert "'v' has an extract that is not callable (str)" in info_of(registry, "grpo_badext_plugin").error
    assert "v" not in registry.verifiers


def test_rewards_show_verify_lists_the_keys_verify_accepts(registry, capsys):
    assert main(["rewards", "show", "verify:km"]) == 0
    out = capsys.readouterr().out
    assert "tolerance: float = 0.0" in out
    keys = out.split("keys of the reward around the verifier", 1)[1]
    for line in ("value: float = 1.0", "wrong_value: float = 0.0", "extract: str = 'verifier'",
                 "pattern: str | None = None", "reference_column: str = 'answer'"):
        assert line in keys
    assert main(["rewards", "show", "verify:same"]) == 0
    assert "extract: str = 'auto'" in capsys.readouterr().out


def test_score_explain_says_why_each_row_scored(registry, tmp_path, capsys):
    config = tmp_path / "r.toml"
    config.write_text('[rewards.dist]\nuse = "verify:km"\n\n[rewards.name]\nuse = "verify:same"\n'
                      'extract = "answer_tag"\n\n[rewards.other]\nuse = "flaky"\n')
    src = tmp_path / "rows.jsonl"
    src.write_text("\n".join(json.dumps(r) for r in [
        {"completion": "<answer>Oslo</answer> 5 km", "answer": "5"},
        {"completion": "no distance here", "answer": "5"},
        {"completion": "<answer>x</answer> 7 km", "answer": None},
    ]) + "\n")
    out = tmp_path / "out.jsonl"
    assert main(["rewards", "score", str(config), "-i", str(src), "-o", str(out), "--explain"]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows[0]["explain"]["dist"] == {"status": "ok", "answer": "5", "parsed": 5.0, "reason": "5.0 km ~ 5.0 km"}
    assert rows[0]["explain"]["name"] == {"status": "wrong", "answer": "Oslo", "parsed": "oslo", "reason": "'oslo' != '5'"}
    assert rows[1]["explain"]["dist"]["status"] == "no answer"
    assert rows[2]["explain"]["dist"] is None
    assert "other" not in rows[0]["explain"]  # a plain reward has nothing to say
    err = capsys.readouterr().err
    assert f"{src}:1: dist: ok ('5'): 5.0 km ~ 5.0 km" in err
    assert f"{src}:1: name: wrong ('Oslo'): 'oslo' != '5'" in err
    assert f"{src}:3: dist: does not apply (no reference)" in err
    assert main(["rewards", "score", str(config), "-i", str(src), "-o", str(out)]) == 0
    assert "explain" not in json.loads(out.read_text().splitlines()[0])


def test_score_fail_on_error_exits_1_when_a_reward_raised(registry, tmp_path, capsys):
    config = tmp_path / "r.toml"
    config.write_text('[rewards.other]\nuse = "flaky"\n')
    src = tmp_path / "rows.jsonl"
    src.write_text('{"completion": "fine"}\n{"completion": "boom"}\n')
    out = tmp_path / "out.jsonl"
    assert main(["rewards", "score", str(config), "-i", str(src), "-o", str(out)]) == 0
    assert main(["rewards", "score", str(config), "-i", str(src), "-o", str(out), "--fail-on-error"]) == 1
    assert "error: reward 'other' (flaky) failed on 1 row(s)" in capsys.readouterr().err
    assert [json.loads(line)["other"] for line in out.read_text().splitlines()] == [1.0, None]  # still written
    src.write_text('{"completion": "fine"}\n')
    assert main(["rewards", "score", str(config), "-i", str(src), "-o", str(out), "--fail-on-error"]) == 0


# ---- reward(name, **params) checked as a config is ----


def test_python_reward_checks_its_parameters_like_a_config(registry):
    with pytest.raises(ConfigError) as caught:
        reward("exact_match", valeu=2.0, wrong_value="zero")
    assert str(caught.value).splitlines() == [
        "reward('exact_match'): valeu: unknown parameter of 'exact_match'; did you mean 'value'?",
        "reward('exact_match'): wrong_value: expected float, got str 'zero'",
    ]
    with pytest.raises(ConfigError, match="'weight' is a key of a \\[rewards.<alias>\\] table"):
        reward("exact_match", weight=2.0)
    with pytest.raises(ConfigError, match="tolerance: expected float, got a boolean"):
        reward("verify:km", tolerance=True)
    with pytest.raises(PluginError, match="did you mean 'exact_match'"):
        reward("exact_mach")
    assert reward("exact_match", value=3.0)(["<answer>4</answer>"], answer=["4"]) == [3.0]


def test_explain_gives_what_was_parsed_as_json():
    from grpo_rewards import reward_from_verifier

    class Unit:
        def __str__(self) -> str:
            return "km"

    def halves(answer: str, reference: str) -> Verdict:
        return Verdict.correct({"answer": int(answer), "sides": (int(reference), 2.5), "unit": Unit()}, "same")

    why = reward_from_verifier(halves).explain(["<answer>12</answer>"], answer=["12"])
    assert why == [{"status": "ok", "answer": "12", "parsed": {"answer": 12, "sides": [12, 2.5], "unit": "km"},
                    "reason": "same"}]
    assert json.loads(json.dumps(why)) == why


def test_the_built_in_correctness_rewards_explain_themselves(fresh_default, tmp_path):
    config = tmp_path / "r.toml"
    config.write_text('[rewards.exact]\nuse = "exact_match"\n\n[rewards.math]\nuse = "math_equivalence"\nworkers = 1\n')
    src = tmp_path / "rows.jsonl"
    src.write_text("\n".join(json.dumps(r) for r in [
        {"completion": "<answer>\\frac{1}{2}</answer>", "answer": "0.5"},
        {"completion": "<answer>7</answer>", "answer": "8"},
        {"completion": "no number at all", "answer": "3"},
        {"completion": "<answer>4</answer>", "answer": None},
    ]) + "\n")
    out = tmp_path / "out.jsonl"
    assert main(["rewards", "score", str(config), "-i", str(src), "-o", str(out), "--explain"]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    math = [r["explain"]["math"] for r in rows]
    assert [w and (w["status"], w["answer"]) for w in math] == [
        ("ok", "\\frac{1}{2}"), ("wrong", "7"), ("no answer", None), None]
    assert [r["math"] for r in rows] == [1.0, 0.0, 0.0, None]  # the scores the verdicts explain
    exact = [r["explain"]["exact"] for r in rows]
    assert [w and (w["status"], w["answer"]) for w in exact] == [
        ("ok", "\\frac{1}{2}"), ("wrong", "7"), ("no answer", None), None]  # \frac{1}{2} is a number literal
    assert [r["exact"] for r in rows] == [2.0, 0.0, 0.0, None]
    assert exact[1]["reason"] == "7 != 8"
