"""The further forms of the number grammar: words, Indian grouping, currency codes, scientific notation,
mixed numbers, parentheses and Markdown emphasis (grpo_rewards.answers.numbers, grpo_rewards.answers.number_words)."""

from fractions import Fraction as F

import pytest

from grpo_rewards.answers.extraction import extract_answer
from grpo_rewards.answers.numbers import parse_literal, parse_number


@pytest.mark.parametrize(("text", "value"), [
    ("seven", F(7)),
    ("Nineteen", F(19)),
    ("sixty-three", F(63)),
    ("sixty three", F(63)),
    ("three hundred", F(300)),
    ("a hundred and one", F(101)),
    ("four thousand and nine", F(4009)),
    ("one million two hundred thousand", F(1_200_000)),
    ("negative eight", F(-8)),
    ("a dozen", F(12)),
    ("zero", F(0)),
])
def test_integers_in_words(text, value):
    assert parse_number(text) == value


@pytest.mark.parametrize("text", [
    "seven seven", "thousand", "hundred", "ninety zero", "two thousand three thousand", "one and", "and",
    "three quarters", "third", "siete", "the answer", "seven apples", "zero zero",
])
def test_word_sequences_that_are_no_integer(text):
    assert parse_number(text) is None


@pytest.mark.parametrize(("text", "value"), [
    ("5,00,000", F(500_000)),
    ("3,25,40,000", F(32_540_000)),
    ("₹2,50,000", F(250_000)),
    ("INR 7,50,000", F(750_000)),
])
def test_indian_digit_grouping(text, value):
    assert parse_number(text) == value


@pytest.mark.parametrize(("text", "value"), [
    ("USD 40", F(40)), ("40 USD", F(40)), ("EUR 3.50", F(7, 2)), ("Rs. 80", F(80)), ("Rs 80", F(80)),
    ("80€", F(80)), ("19.99$", F(1999, 100)), ("₩5000", F(5000)), ("CHF -2", F(-2)),
])
def test_currency_symbols_and_codes(text, value):
    assert parse_number(text) == value


@pytest.mark.parametrize(("text", "value"), [
    ("6.02 \\times 10^{23}", F(602) * 10**21),
    ("3 \\times 10^{-2}", F(3, 100)),
    ("2.5\\cdot 10^4", F(25_000)),
    ("4×10^3", F(4000)),
])
def test_scientific_notation(text, value):
    assert parse_number(text) == value


@pytest.mark.parametrize(("text", "value"), [
    ("2\\frac{3}{4}", F(11, 4)), ("-1\\dfrac{1}{3}", F(-4, 3)), ("5 \\frac14", F(21, 4)), ("7 2/3", F(23, 3)),
])
def test_mixed_numbers(text, value):
    assert parse_number(text) == value


@pytest.mark.parametrize("text", ["2\\frac{5}{4}", "2 5/4", "10^{3}", "3 \\times 10", "12,3,456", "2\\frac{-1}{2}"])
def test_forms_that_stay_refused(text):
    assert parse_number(text) is None


def test_ambiguous_separators_keep_their_one_reading():
    assert parse_number("4,567") == 4567
    assert parse_number("4.567") == F(4567, 1000)
    assert parse_number("4,56") is None


@pytest.mark.parametrize(("text", "value"), [
    ("**19**", F(19)), ("__19__", F(19)), ("*19*", F(19)), ("(19)", F(19)), ("\\left(\\frac{2}{7}\\right)", F(2, 7)),
    ("**\\$19**", F(19)),
])
def test_emphasis_and_parentheses_are_peeled(text, value):
    assert parse_number(text) == value


def test_decimal_flag_marks_what_was_written_with_a_point():
    assert parse_literal("0.25").decimal and parse_literal("2.5e1").decimal
    assert not parse_literal("1/4").decimal and not parse_literal("25").decimal


@pytest.mark.parametrize(("text", "answer"), [
    ("so the distance is 3.84 \\times 10^{5} km", "3.84 \\times 10^{5}"),
    ("she needs 2\\frac{1}{4} cups", "2\\frac{1}{4}"),
    ("the flat costs 45,00,000 rupees", "45,00,000"),
    ("a deposit of 1,25,000 was made", "1,25,000"),
])
def test_prose_finds_the_whole_number(text, answer):
    assert extract_answer(text, "last_number") == answer
