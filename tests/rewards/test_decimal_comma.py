"""The decimal comma (grpo_rewards.answers.numbers.decimal_points): read where it is unambiguous (after thousands
groups of dots or spaces, LaTeX ``{,}``, one comma in a text with a decimal-comma context), and otherwise neither a
decimal nor either of its pieces."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grpo_rewards import reward
from grpo_rewards.answers.extraction import extract_answer
from grpo_rewards.answers.numbers import ambiguous_comma, decimal_points, parse_literal, parse_number


@pytest.mark.parametrize(("literal", "ambiguous"), [
    ("3,5", True), ("1,22", True), ("12,34", True), ("3,1415", True), ("0,111", True), ("1234,567", True),
    ("-3,5", True), ("1,234", False), ("12,345", False), ("3.5", False), ("1,2,3", False), ("3", False),
])
def test_which_commas_are_ambiguous(literal: str, ambiguous: bool) -> None:
    assert ambiguous_comma(literal) is ambiguous


@pytest.mark.parametrize(("text", "expected"), [
    ("la respuesta es 3,5", "la respuesta es 3.5"),
    ("Die Antwort ist 3,5 kg und 0,25 l.", "Die Antwort ist 3.5 kg und 0.25 l."),
    ("Die Antwort ist 1,234.", "Die Antwort ist 1,234."),  # a group of three: thousands in every text
    ("the answer is 3,5", "the answer is 3,5"),  # no context: left as written
    ("we get 1.234,5 and 2,5", "we get 1234.5 and 2.5"),  # a grouped decimal comma is a context
    ("we get 1 234,5", "we get 1234.5"),
    ("Ergebnis: 1,2,3", "Ergebnis: 1,2,3"),  # a list of three stays a list
    ("Réponse : 12,5 %", "Réponse : 12.5 %"),
    ("La respuesta es 0,111", "La respuesta es 0,111"),  # before three digits: never a decimal comma
    ("we get 1.234,567", "we get 1.234,567"),
])
def test_decimal_points(text: str, expected: str) -> None:
    assert decimal_points(text) == expected


@pytest.mark.parametrize(("completion", "answer"), [
    ("la respuesta es 3,5", "3.5"),
    ("La réponse est 3,5.", "3.5"),
    ("Ответ: 2,75", "2.75"),
    ("the answer is 3,5", "3,5"),
    ("so it is 3,5", "3,5"),  # the last number: not the 5 after the comma
    ("it costs $1,50", "1,50"),
    ("numbers 1,2,3", "3"),  # a list of three is still read as before
    ("we get 1.234,5 euros", "1234.5"),
    ("\\boxed{3{,}5}", "3{,}5"),
])
def test_extraction(completion: str, answer: str) -> None:
    assert extract_answer(completion) == answer


def test_literals() -> None:
    assert parse_number("3{,}5") == Fraction(7, 2) and parse_number("1{,}234") == 1234
    assert parse_number("1.234,5") == Fraction(2469, 2) and parse_number("12.345.678,9") == Fraction(123456789, 10)
    assert parse_literal("3,5") is None and parse_literal("1,22") is None
    assert parse_number("1,234") == 1234 and parse_number("1.234") == Fraction(1234, 1000)
    assert parse_literal("0,111") is None and parse_literal("1.234,567") is None


@pytest.mark.parametrize("name", ["exact_match", "numeric_proximity", "math_equivalence"])
def test_rewards_read_the_rule(name: str) -> None:
    params = {"exact_match": {"value": 1.0}, "numeric_proximity": {"mode": "tiered", "missing_value": 0.0,
              "tiers": {"exact": 1.0, "near": 0.0, "close": 0.0, "far": 0.0, "unparsable": 0.0}},
              "math_equivalence": {"workers": 1}}[name]
    fn = reward(name, **params)
    rows = [("La respuesta final es 3,5.", "3.5", 1.0), ("Die Antwort ist 0,25.", "0.25", 1.0),
            ("The answer is 3,5.", "3.5", 0.0), ("The answer is 3,5.", "3", 0.0), ("The answer is 3,5.", "5", 0.0),
            ("We get 1.234,5 m.", "1234.5", 1.0)]
    assert fn([c for c, _, _ in rows], answer=[r for _, r, _ in rows]) == [s for _, _, s in rows]


@settings(max_examples=200, deadline=None, database=None)
@given(whole=st.integers(0, 10**6), decimals=st.from_regex(r"\A[0-9]{1,2}\Z|\A[0-9]{4,6}\Z"),
       sentence=st.sampled_from(["La respuesta es {}.", "Die Antwort ist {}.", "La réponse est {} m.", "Ответ: {}"]))
def test_a_decimal_comma_in_context_is_the_decimal(whole: int, decimals: str, sentence: str) -> None:
    completion = sentence.format(f"{whole},{decimals}")
    assert parse_number(extract_answer(completion) or "") == Fraction(f"{whole}.{decimals}")


@settings(max_examples=200, deadline=None, database=None)
@given(whole=st.integers(0, 10**6), decimals=st.from_regex(r"\A[0-9]{1,2}\Z|\A[0-9]{4,6}\Z"),
       sentence=st.sampled_from(["The answer is {}.", "So we get {} in all.", "Answer: {}", "<answer>{}</answer>"]))
def test_without_context_neither_piece_is_the_answer(whole: int, decimals: str, sentence: str) -> None:
    answer = extract_answer(sentence.format(f"{whole},{decimals}"))
    assert answer is None or parse_literal(answer) is None


@settings(max_examples=200, deadline=None, database=None)
@given(st.text(alphabet="0123456789,. abc\n", max_size=60))
def test_text_without_a_comma_before_a_digit_is_unchanged(text: str) -> None:
    if ",0" not in text and not any(f",{d}" in text for d in "123456789"):
        assert decimal_points(text) == text
