"""`grpo rewards list|show`, and verifiers used as rewards through `use = "verify:<name>"`."""

from __future__ import annotations

import re
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


def make_marked_up(*, value: float = 1.0):
    """``value`` inside ``[min_words, max_words]``, [red]not red[/red], see :func:`~grpo.x.helper`."""
    return lambda completions, **kw: [value] * len(completions)


MARKUP_PLUGIN = types.SimpleNamespace(
    grpo_register_rewards=hookimpl(lambda register: register(RewardSpec(
        name="a_reward_name_longer_than_any_column_would_give_it", factory=make_marked_up,
        description="``value`` inside ``[min_words, max_words]``, [red]not red[/red], see :func:`~grpo.x.helper`"))),
)
WORD = re.compile(r"[^\s│┃]+")


def _words(text: str) -> list[str]:
    return WORD.findall(text)


@pytest.fixture
def every_registry(monkeypatch):
    """The installed registry (every built-in and plugin reward and verifier) plus a long, markup-laden one."""
    import grpo_rewards.plugins as plugins

    reg = load_registry(extra_plugins=[("markup_plugin_with_a_long_name", MARKUP_PLUGIN)])
    monkeypatch.setattr(plugins, "_default", reg)
    return reg


@pytest.mark.parametrize("width", [80, 60])
def test_rewards_list_never_cuts_a_name_or_a_word_at_any_width(every_registry, capsys, monkeypatch, width):
    from grpo_rewards.tables import doc_text

    monkeypatch.setenv("COLUMNS", str(width))
    assert main(["rewards", "list"]) == 0
    out = capsys.readouterr().out
    assert "…" not in out and max(len(line) for line in out.splitlines()) <= max(width, 52)
    words = set(_words(out))
    names = [*every_registry.rewards, *(f"verify:{n}" for n in every_registry.verifiers)]
    assert len(names) >= 20
    for name in names:
        assert name in words, f"{name!r} cut at {width} columns"
    for spec in [*every_registry.rewards.values(), *every_registry.verifiers.values()]:
        missing = [w for w in _words(doc_text(spec.summary)) if w not in words]
        assert not missing, f"{spec.name}: {missing} not shown whole at {width} columns"
    assert "`[min_words," in words and "max_words]`," in words and "[red]not" in words  # markup shown as text
    assert "`value`" in words and "`helper`" in words and not re.search(r"(?<!`)``(?!`)", out)


@pytest.mark.parametrize("width", [80, 60])
def test_plugins_table_never_cuts_a_name(every_registry, capsys, monkeypatch, width):
    monkeypatch.setenv("COLUMNS", str(width))
    assert main(["plugins"]) == 0
    out = capsys.readouterr().out
    words = set(_words(out.replace(",", " ").replace(";", " ")))
    assert "…" not in out
    for info in every_registry.plugins:
        assert info.name in words, info.name
        assert info.distribution in out, info.distribution
        for names in info.registers.values():
            assert set(names) <= words, names


def test_rewards_show_writes_docs_without_rst_or_markup_loss(every_registry, capsys):
    names = [*every_registry.rewards, *(f"verify:{n}" for n in every_registry.verifiers)]
    for name in names:
        assert main(["rewards", "show", name]) == 0, name
        out = capsys.readouterr().out
        assert not re.search(r"(?<!`)``(?!`)", out), (name, out)
        assert not re.search(r":(func|class|meth|mod|data|attr):`", out), (name, out)
    assert main(["rewards", "show", "a_reward_name_longer_than_any_column_would_give_it"]) == 0
    assert "`value` inside `[min_words, max_words]`, [red]not red[/red], see `helper`" in capsys.readouterr().out


@pytest.mark.parametrize("width", [80, 60])
def test_score_summary_never_cuts_an_alias_or_a_reward_name(every_registry, capsys, monkeypatch, tmp_path, width):
    monkeypatch.setenv("COLUMNS", str(width))
    config = tmp_path / "r.toml"
    config.write_text('[rewards.no_repeated_ngrams_in_the_answer]\nuse = "ngram_repetition_penalty"\n\n'
                      '[rewards.numeric_answer_is_right]\nuse = "verify:numeric"\n\n[rewards.fmt]\nuse = "xml_count"\n')
    src = tmp_path / "rows.jsonl"
    src.write_text('{"completion": "<answer>4</answer>", "answer": "4"}\n')
    assert main(["rewards", "score", str(config), "--input", str(src), "--output", str(tmp_path / "o.jsonl")]) == 0
    out = capsys.readouterr().out
    words = set(_words(out))
    assert "…" not in out
    for name in ("no_repeated_ngrams_in_the_answer", "ngram_repetition_penalty", "numeric_answer_is_right",
                 "verify:numeric", "xml_count", "fmt", "total", "1.0000"):
        assert name in words, f"{name!r} cut at {width} columns:\n{out}"
