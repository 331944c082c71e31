"""xml_format: verifiers' XMLParser format reward (mode = "verifiers", its cases in tests/conformance) and the
default that pays only for tags in order and balanced."""

from __future__ import annotations

import pytest

from grpo_rewards import reward


def chat(*contents: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": c} for c in contents]


@pytest.mark.parametrize(("text", "ordered", "verifiers"), [
    ("<reasoning>x</reasoning><answer>42</answer>", 1.0, 1.0),
    ("\n<reasoning>\nx\n</reasoning>\n<answer>\n42\n</answer>\n", 1.0, 1.0),
    ("Just plain text", 0.0, 0.2),  # verifiers' spacing term is paid for anything
    ("</answer>42<answer></reasoning>x<reasoning>", 0.0, 0.2),  # backwards
    ("<answer>42</answer><reasoning>x</reasoning>", 0.0, 0.6),  # the answer block first
    ("<reasoning>x<answer>42</answer></reasoning>", 0.0, 0.8),  # nested
    ("<reasoning>x</answer>", 0.0, 0.6),  # unbalanced: no field parses
    ("<reasoning>x</reasoning>", 0.6, 0.6),  # one field of two, starts right, ends wrong
    ("<reasoning>x</reasoning><answer>41</answer><answer>42</answer>", 0.6, 1.0),  # two answers: not clean
    ("<reasoning>x</reasoning><answer>42", 0.4, 0.8),  # unbalanced: no spacing term
    ("<reasoning>思考</reasoning><answer>四十二</answer>", 1.0, 1.0),
])
def test_ordered_pays_for_format_only(text, ordered, verifiers):
    assert reward("xml_format")([chat(text), text]) == [pytest.approx(ordered)] * 2
    assert reward("xml_format", mode="verifiers")([chat(text)]) == [pytest.approx(verifiers)]


def test_alternatives_and_the_mean_over_assistant_messages():
    fn = reward("xml_format", fields=["reasoning", ["code", "answer"]])
    assert fn([chat("<reasoning>x</reasoning><code>print(1)</code>")]) == [1.0]
    assert fn([chat("<reasoning>x</reasoning><code>1</code><answer>1</answer>")]) == [pytest.approx(0.2 + 0.2)]
    two = chat("<reasoning>x</reasoning><answer>1</answer>", "plain")
    assert reward("xml_format")([two]) == [0.5]
    assert reward("xml_format", mode="verifiers")([two]) == [pytest.approx(0.6)]


def test_a_plain_string_is_one_message_except_for_verifiers():
    assert reward("xml_format", mode="verifiers")(["<reasoning>x</reasoning><answer>1</answer>"]) == [0.0]


def test_linear_time_on_hostile_input():
    import time

    text = "<answer>" * 50_000 + "<reasoning>x</reasoning>"
    start = time.process_time()
    reward("xml_format")([text])
    reward("xml_format", mode="verifiers")([chat(text)])
    assert time.process_time() - start < 1.0


@pytest.mark.parametrize(("params", "message"), [
    ({"fields": []}, "fields must be a non-empty list"),
    ({"fields": ["<answer>"]}, "fields must be a tag name"),
    ({"fields": ["a", ["b", "a"]]}, "duplicate tag"),
    ({"mode": "strict"}, "unknown mode 'strict'"),
])
def test_bad_parameters(params, message):
    with pytest.raises(ValueError, match=message):
        reward("xml_format", **params)
