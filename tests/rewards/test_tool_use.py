"""The ``tool_use`` reward (grpo_rewards/builtins/tool_use.py) and the hacking probes for conversations with tools:
one pay for calling well, whatever the number of calls; errors cost; a tool's output is never the model's answer,
and a conversation the model never answers has none (grpo_rewards.completions.completion_text)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import grpo_rewards
from grpo_rewards import compose, hacking, reward
from grpo_rewards.completions import completion_text
from grpo_rewards.errors import ConfigError
from grpo_rewards.reward_config import rewards_from_doc
from grpo_rewards.testing import RewardConformance
from grpo_rewards.tomlfile import parse_toml


def _call(code: str, content: str = "") -> dict[str, Any]:
    return {"role": "assistant", "content": content,
            "tool_calls": [{"type": "function", "function": {"name": "python", "arguments": {"code": code}}}]}


def _tool(content: str) -> dict[str, Any]:
    return {"role": "tool", "name": "python", "content": content}


def _said(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def _conversation(successes: int, errors: int, answer: str | None = "<answer>41</answer>") -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = []
    for _ in range(successes):
        turns += [_call("print(41)"), _tool("41")]
    for _ in range(errors):
        turns += [_call("1/0"), _tool("error: RuntimeError: ZeroDivisionError: division by zero")]
    return turns + ([_said(answer)] if answer is not None else [])


def test_one_successful_call_then_an_answer_pays_value_once() -> None:
    fn = reward("tool_use", value=1.0, error_penalty=0.25, max_penalty=0.5)
    got = fn([_conversation(1, 0), _conversation(1, 0, answer=None), "<answer>41</answer>",
              _conversation(0, 1), _conversation(2, 1), _conversation(1, 0, answer="  ")])
    # answered; no answer after the call; no call; only an error; one error among three calls; a blank answer
    assert got == [1.0, 0.0, 0.0, -0.25, 0.75, 0.0]


def test_the_trainers_columns_win_over_what_the_conversation_shows() -> None:
    fn = reward("tool_use", error_penalty=0.5, max_penalty=1.0)
    conv = _conversation(1, 0)
    assert fn([conv, conv], num_tool_calls=[1, 3], num_tool_errors=[0, 3]) == [1.0, -1.0]
    assert fn([conv], num_tool_calls=[None], num_tool_errors=["x"]) == [1.0]  # no count in the cell: counted


@settings(max_examples=200, deadline=None)
@given(successes=st.integers(1, 40), errors=st.integers(0, 40), more=st.integers(1, 40),
       max_calls=st.integers(0, 10), value=st.floats(0, 5), penalty=st.floats(0, 2), cap=st.floats(0, 5))
def test_more_calls_never_pay_more(successes: int, errors: int, more: int, max_calls: int, value: float,
                                   penalty: float, cap: float) -> None:
    """Looping calls: adding successful or failing calls to a conversation that already has a successful one never
    raises its score, which never passes ``value`` nor falls below ``-max_penalty``."""
    fn = reward("tool_use", value=value, error_penalty=penalty, max_penalty=cap, max_calls=max_calls)
    base, looped, erring = fn([_conversation(successes, errors), _conversation(successes + more, errors),
                               _conversation(successes, errors + more)])
    assert looped <= base and erring <= base
    assert -cap <= min(base, looped, erring) and max(base, looped, erring) <= value


def test_calls_over_max_calls_cost_like_errors() -> None:
    fn = reward("tool_use", value=1.0, error_penalty=0.25, max_penalty=1.0, max_calls=2)
    assert fn([_conversation(n, 0) for n in (1, 2, 3, 4, 10)]) == [1.0, 1.0, 0.75, 0.5, 0.0]


def test_erring_calls_never_pay() -> None:
    """Calls that all fail score below calling nothing, however many and whatever follows them."""
    fn = reward("tool_use")
    scores = fn([_conversation(0, n) for n in range(1, 8)] + [_conversation(0, 3, answer=None)])
    assert all(s < 0.0 for s in scores)
    assert min(scores) == -1.0  # max_penalty bounds it


def test_the_final_answer_is_the_models_own_last_turn() -> None:
    """A tool's output is not an answer, nor is a turn that calls tools (valid or unreadable calls)."""
    assert completion_text([_call("print(42)"), _tool("42")]) == ""
    assert completion_text([_call("print(42)", content="<answer>42</answer>")]) == ""
    unreadable = {"role": "assistant", "content": "<answer>42</answer>",
                  "invalid_tool_calls": [{"text": "{not json}", "error": "the tool call is not valid JSON"}]}
    assert completion_text([unreadable]) == ""
    assert completion_text([_call("print(42)"), _tool("42"), _said("It is 42.")]) == "It is 42."
    assert completion_text([_said("It is 42.")]) == "It is 42."  # a plain chat completion, as before


def test_a_tool_printing_the_reference_earns_nothing_under_tool_use_and_exact_match() -> None:
    """Hacking probe: the model calls a tool that prints the reference and stops there (or writes the reference in
    a turn whose call is never answered); composed with exact_match it earns nothing. Reading the tool's output and
    answering it, as honest tool use does, earns both."""
    total = compose({"tools": (reward("tool_use"), 1.0), "correct": (reward("exact_match"), 1.0)})
    printed = [_call("print(42)"), _tool("42")]
    in_the_calling_turn = [_call("print(41)"), _tool("41"), _call("print(42)", content="<answer>42</answer>")]
    honest = printed + [_said("<answer>42</answer>")]
    no_tools = [_said("<answer>42</answer>")]
    scores = total.score([printed, in_the_calling_turn, honest, no_tools], answer=["42"] * 4)
    assert scores.total == [0.0, 0.0, 3.0, 2.0]
    assert scores.columns["correct"] == [0.0, 0.0, 2.0, 2.0]


def test_the_hacking_check_passes_tool_use_and_catches_a_per_call_reward(monkeypatch: pytest.MonkeyPatch) -> None:
    """``grpo rewards check`` runs the tool tricks: tool_use and exact_match beat none; a reward paying per call
    (what tool_use must not be) is caught looping, as is an answer reward that reads a tool's output."""
    assert hacking.check("tool_use") == {}
    assert hacking.check("exact_match") == {}
    real = grpo_rewards.reward

    def per_call(completions: list[Any], num_tool_calls: list[int] | None = None, **_: Any) -> list[float]:
        return [float(n) for n in (num_tool_calls or [0] * len(completions))]

    def reads_the_last_message(completions: list[Any], answer: list[str], **_: Any) -> list[float]:
        last = [c[-1]["content"] if isinstance(c, list) and c else c for c in completions]
        return [1.0 if answer[i] in str(t) else 0.0 for i, t in enumerate(last)]

    monkeypatch.setattr(grpo_rewards, "reward", lambda name, **p: per_call if name == "per_call" else
                        reads_the_last_message if name == "last_message" else real(name, **p))
    assert "looping tool calls to farm a per-call reward" in hacking.check("per_call")
    caught = hacking.check("last_message")
    assert "a tool printing the reference, the model never answering" in caught
    assert "the reference written in a turn that calls a tool, left unanswered" in caught


@pytest.mark.parametrize("key, value", [("value", -1.0), ("error_penalty", -0.5), ("max_penalty", -1.0),
                                        ("max_calls", -1), ("max_calls", 1.5), ("no_call_value", 2.0)])
def test_options_out_of_bounds_are_refused_naming_the_key(key: str, value: Any) -> None:
    with pytest.raises((ValueError, ConfigError), match=key):
        reward("tool_use", **{key: value})
    text = f'[rewards.tools]\nuse = "tool_use"\n{key} = {value}\n'
    doc = parse_toml(text, "run.toml")
    try:
        rewards_from_doc(doc, grpo_rewards.get_registry())
    except ConfigError as error:
        problems = str(error)
    else:
        problems = "\n".join(str(p) for p in doc.problems)
    assert "run.toml" in problems and key in problems


def test_listed_and_shown_with_an_example() -> None:
    spec = grpo_rewards.get_registry().rewards["tool_use"]
    assert spec.plugin == "builtin_rewards" and spec.columns == ()
    assert 'use = "tool_use"' in spec.example and set(spec.params) == {
        "value", "error_penalty", "max_penalty", "max_calls", "no_call_value"}


class TestToolUseConformance(RewardConformance):
    reward_name = "tool_use"
    params = {"value": 1.0, "error_penalty": 0.25, "max_penalty": 0.75, "max_calls": 4}
    columns = {"num_tool_calls": st.integers(0, 50), "num_tool_errors": st.integers(0, 50)}
    bounds = (-0.75, 1.0)
