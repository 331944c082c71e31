"""One number grammar: the rewards that compare numbers agree, row by row, on what equals what.

``exact_match``, ``math_equivalence`` and ``numeric_proximity`` (full value only when
exact) all read numbers with :mod:`grpo_rewards.answers.numbers` and its one percent rule.
Each row of the table states the expected verdict; every reward runs through it.
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from grpo_rewards.answers.numbers import Number, compared_values, numbers_equal
from grpo_rewards.builtins.exact_match import exact_match
from grpo_rewards.builtins.math_equivalence import math_equivalence
from grpo_rewards.builtins.numeric_proximity import numeric_proximity

# (answer, reference, equal?)
TABLE = [
    # the percent rule: p% equals p (GSM8K's bare percentages) and p/100 (its value)
    ("50%", "50", True),
    ("50%", "0.5", True),
    ("50", "50%", True),
    ("0.5", "50%", True),
    ("50\\%", "1/2", True),
    ("50%", "5", False),
    ("0.05", "50%", False),
    ("50%", "50%", True),
    ("0.5%", "50%", False),  # two percentages: their numbers must be equal
    # exponents
    ("1e3", "1000", True),
    ("1000", "1e3", True),
    ("1.5e3", "1,500", True),
    ("1e3", "100", False),
    # thousands separators
    ("1,000", "1000", True),
    ("1000", "1,000", True),
    ("1 000", "1000", True),
    ("1,000", "100", False),
    ("1,00", "100", False),  # a malformed group is not a number: wrong against a number
    # fractions and decimals
    ("3/4", "0.75", True),
    ("0.75", "3/4", True),
    ("\\frac{3}{4}", "0.75", True),
    ("3/4", "0.7", False),
]

IDS = [f"{a}|{r}" for a, r, _ in TABLE]


@pytest.fixture(scope="module")
def rewards():
    return {
        "exact_match": exact_match(value=1.0, wrong_value=0.0),
        "math_equivalence": math_equivalence(value=1.0, wrong_value=0.0, workers=1),
        "numeric_proximity": numeric_proximity(value=1.0),
    }


@pytest.mark.parametrize("answer, reference, equal", TABLE, ids=IDS)
@pytest.mark.parametrize("name", ["exact_match", "math_equivalence", "numeric_proximity"])
def test_every_number_reward_agrees_with_the_table(rewards, name, answer, reference, equal):
    score = rewards[name]([f"<answer>{answer}</answer>"], answer=[reference])[0]
    if name == "numeric_proximity":
        assert (score == 1.0) is equal, score  # full value only for an exact answer
    else:
        assert score == (1.0 if equal else 0.0)


def test_math_equivalence_without_require_literal_agrees_too():
    reward = math_equivalence(require_literal=False, workers=1)
    rows = [(a, r, eq) for a, r, eq in TABLE if a != "1,00"]  # math-verify reads "1,00" as 1.0: not a literal
    scores = reward([f"<answer>{a}</answer>" for a, _, _ in rows], answer=[r for _, r, _ in rows])
    assert scores == [1.0 if eq else 0.0 for _, _, eq in rows]


def test_numeric_proximity_reads_a_percentage_as_the_reference_does():
    reward = numeric_proximity(value=1.0, tolerance=0.1)
    near_value, near_number, far = reward(["<answer>49%</answer>"] * 3, answer=["0.5", "50", "0.05"])
    assert near_value == pytest.approx(1 / (1 + 0.2**2))  # 0.49 against 0.5: relative error 0.02
    assert near_number == pytest.approx(1 / (1 + 0.2**2))  # 49 against 50: relative error 0.02
    assert far < 0.1
    tiered = numeric_proximity(mode="tiered")
    assert tiered(["<answer>50%</answer>", "<answer>45%</answer>"], answer=["0.5", "0.5"]) == [5.0, 2.0]


@pytest.mark.parametrize(
    "a, b, expected",
    [
        (Number(Fraction(49), True), Number(Fraction(1, 2)), (Fraction(49, 100), Fraction(1, 2))),
        (Number(Fraction(1, 2)), Number(Fraction(49), True), (Fraction(1, 2), Fraction(49, 100))),
        (Number(Fraction(49), True), Number(Fraction(50)), (Fraction(49), Fraction(50))),
        (Number(Fraction(49), True), Number(Fraction(50), True), (Fraction(49), Fraction(50))),
    ],
)
def test_compared_values_pick_the_nearer_reading_of_a_percentage(a, b, expected):
    assert compared_values(a, b) == expected
    assert numbers_equal(a, b) is (expected[0] == expected[1])


def test_math_check_reads_money_with_the_number_grammar():
    # "$1e3" is the number 1000 (the grammar's exponent), so "999 + 1" is equivalent to it
    reward = math_equivalence(require_literal=False, workers=1)
    assert reward(["<answer>999 + 1</answer>", "<answer>1233 + 1.5</answer>", "<answer>999</answer>"],
                  answer=["$1e3", "$1,234.50", "$1e3"]) == [1.0, 1.0, 0.0]
