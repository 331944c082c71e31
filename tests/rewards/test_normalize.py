"""Number parsing and text normalisation (grpo_rewards.answers.normalize)."""

from fractions import Fraction

import pytest

from grpo_rewards.answers.normalize import format_number, is_integer_literal, normalize_text, parse_number

F = Fraction


@pytest.mark.parametrize(
    "text, value",
    [
        ("72", F(72)),
        ("  72 \n", F(72)),
        ("72.", F(72)),
        ("4.0", F(4)),
        ("4.000", F(4)),
        ("5.", F(5)),
        (".5", F(1, 2)),
        ("0.75", F(3, 4)),
        ("1,234", F(1234)),
        ("1,234,567.25", F(123456725, 100)),
        ("$1,080", F(1080)),
        ("$ 18", F(18)),
        ("\\$18", F(18)),
        ("€5", F(5)),
        ("-$5", F(-5)),
        ("$-5", F(-5)),
        ("- 5", F(-5)),
        ("−5", F(-5)),  # unicode minus
        ("–5", F(-5)),  # en dash
        ("+5", F(5)),
        ("50%", F(50)),
        ("50 \\%", F(50)),
        ("1e3", F(1000)),
        ("1.5E-3", F(3, 2000)),
        ("3/4", F(3, 4)),
        ("-3/4", F(-3, 4)),
        ("6 / 8", F(3, 4)),
        ("\\frac{3}{4}", F(3, 4)),
        ("\\dfrac{6}{8}", F(3, 4)),
        ("-\\tfrac{1}{2}", F(-1, 2)),
        ("\\frac12", F(1, 2)),
        ("$\\frac{1}{2}$", F(1, 2)),
        ("\\(42\\)", F(42)),
        ("\\boxed{42}", F(42)),
        ("\\text{42}", F(42)),
        ("1{,}000", F(1000)),
        ("1\\,000", F(1000)),
        ("007", F(7)),
        ("10,000", F(10000)),  # a leading group may hold a 0 after its first digit
        ("100 000", F(100000)),
    ],
)
def test_parses(text, value):
    assert parse_number(text) == value


@pytest.mark.parametrize(
    "text",
    ["", "   ", "abc", "72 apples", "12,34", "1,2,3", "0,111", "-0,111", "0 111", "$0,500", "0,111,222", "--5", "-$-5", "1/0", "\\frac{1}{0}",
     "1e999", "٣", "７２", "1..2", "5-3", "3 4", "$", "%", "1/", ".", "e5", "x" * 1000, "1" * 20_001],
)
def test_rejects(text):
    assert parse_number(text) is None


def test_exact_not_float():
    # 0.1 + 0.2 style rounding never decides equality: the values are exact fractions
    assert parse_number("0.3") == parse_number("3/10")
    assert parse_number("0.30000000000000004") != parse_number("0.3")
    assert parse_number("9007199254740993") != parse_number("9007199254740992")  # beyond float precision


def test_huge_exponent_is_refused_quickly():
    assert parse_number("1e400") == F(10) ** 400
    assert parse_number("1e401") is None


@pytest.mark.parametrize(
    "value, text",
    [(F(72), "72"), (F(-1, 4), "-0.25"), (F(1, 3), "1/3"), (F(-2, 3), "-2/3"), (F(1, 20), "0.05"),
     (F(15432, 125), "123.456"), (F(0), "0"), (F(-5, 2), "-2.5")],
)
def test_format_number_round_trips(value, text):
    assert format_number(value) == text
    assert parse_number(text) == value


def test_normalize_text():
    assert normalize_text("  Paris.  ") == "paris"
    assert normalize_text("New   York\n") == "new york"
    assert normalize_text("\\text{Yes}") == "yes"
    assert normalize_text("Paris", case_sensitive=True) == "Paris"


def test_integer_literal():
    assert is_integer_literal("72")
    assert is_integer_literal(" 72\n")
    assert not is_integer_literal("-7")
    assert is_integer_literal("-7", allow_negative=True)
    assert is_integer_literal("−7", allow_negative=True)
    assert not is_integer_literal("--7", allow_negative=True)
    assert not is_integer_literal("-", allow_negative=True)
    for text in ("7.0", "1,000", "$7", "", "²", "٣", "7a"):
        assert not is_integer_literal(text, allow_negative=True), text


def test_long_adversarial_answers_are_cheap():
    import time

    start = time.perf_counter()
    for text in ("x. " * 50_000, "$" * 100_000, "\\boxed{" * 20_000 + "}" * 20_000, " ." * 50_000):
        normalize_text(text)
        parse_number(text)
    assert time.perf_counter() - start < 3.0  # wrappers are peeled a bounded number of times
