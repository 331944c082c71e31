"""`grpo rewards list|show`, and verifiers used as rewards through `use = "verify:<name>"`."""

from __future__ import annotations

import types

import pytest

from grpo_rewards import RewardSpec, Verdict, VerifierSpec, hookimpl, load_registry, rewards_from_doc
from grpo_rewards.command_line import main
from grpo_rewards.tomlfile import parse_toml


def make_same_text(*, ignore_case: bool = True):
    """Correct when the answer equals the reference as text."""

    def verify(answer: str, reference: str) -> Verdict:
        if reference == "?":
            return Verdict.undecided("reference is unknown")
        a, r = (answer.lower(), reference.lower()) if ignore_case else (answer, reference)
        return Verdict.correct(a) if a == r else Verdict.wrong(a, f"{a!r} != {r!r}")

    return verify


def make_bonus(*, amount: float = 1.5, label: str = "b"):
    """A constant bonus, for listing."""
    return lambda completions, **kw: [amount] * len(completions)


PLUGIN = types.SimpleNamespace(
    grpo_register_verifiers=hookimpl(lambda register: register(VerifierSpec(name="same_text", factory=make_same_text))),
    grpo_register_rewards=hookimpl(
        lambda register: register(
            RewardSpec(name="bonus", factory=make_bonus, example='[rewards.b]\nuse = "bonus"\namount = 2.0\n')
        )
    ),
)


@pytest.fixture
def registry(monkeypatch):
    import grpo_rewards.plugins as plugins

    reg = load_registry(extra_plugins=[("inproc", PLUGIN)])
    monkeypatch.setattr(plugins, "_default", reg)
    monkeypatch.setenv("COLUMNS", "200")
    return reg


def test_verifier_becomes_a_reward_with_value_and_extraction(registry):
    doc = parse_toml(
        '[rewards.same]\nuse = "verify:same_text"\nvalue = 3.0\nextract = "answer_tag"\nignore_case = false\n',
        "r.toml",
    )
    composed = rewards_from_doc(doc, registry)
    assert doc.problems == []
    completions = ["<answer>Paris</answer>", "<answer>paris</answer>", "no tag here", "<answer>x</answer>"]
    assert composed(completions, answer=["Paris", "Paris", "Paris", "?"]) == [3.0, 0.0, 0.0, None]


def test_verifier_reward_rejects_unknown_keys(registry):
    doc = parse_toml('[rewards.same]\nuse = "verify:same_text"\nignore_cas = false\n', "r.toml")
    assert rewards_from_doc(doc, registry) is None
    assert str(doc.problems[0]) == "r.toml:3: rewards.same.ignore_cas: unknown parameter of 'verify:same_text'; did you mean 'ignore_case'?"


def test_rewards_list_shows_rewards_and_verifiers(registry, capsys):
    assert main(["rewards", "list"]) == 0
    out = capsys.readouterr().out
    assert "bonus" in out and "A constant bonus, for listing." in out
    assert "verify:same_text" in out and "inproc" in out


def test_rewards_show_prints_parameters_defaults_and_example(registry, capsys):
    assert main(["rewards", "show", "bonus"]) == 0
    out = capsys.readouterr().out
    assert "amount: float = 1.5" in out and "label: str = 'b'" in out
    assert 'use = "bonus"' in out
    assert main(["rewards", "show", "verify:same_text"]) == 0
    assert "ignore_case: bool = True" in capsys.readouterr().out


def test_rewards_show_unknown_name_exits_2(registry, capsys):
    assert main(["rewards", "show", "bonsu"]) == 2
    assert "did you mean 'bonus'" in capsys.readouterr().err
