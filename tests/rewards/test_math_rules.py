"""math_equivalence's rules beyond equal values: units, false relations, hedges in prose, mixed numbers,
the precision rule, simplest exact forms under require_literal, solution lists, the exposed math-verify options."""

from __future__ import annotations

import pytest

from grpo_rewards.answers.units import compare_units, split_unit
from grpo_rewards.builtins.math_equivalence import math_equivalence, with_units
from grpo_rewards.isolation import pool as timeout_pool


@pytest.fixture(scope="module")
def judge():
    yield math_equivalence(workers=1, timeout_seconds=20.0)
    timeout_pool.shutdown()


def scores(reward, rows: list[tuple[str, str]]) -> list[float | None]:
    return reward([c for c, _ in rows], answer=[g for _, g in rows])


UNIT_ROWS = [  # (completion, gold, score)
    ("\\boxed{8 km}", "8 m", 0.0),
    ("\\boxed{4 \\text{ minutes}}", "4 hours", 0.0),
    ("\\boxed{7\\text{ cm}^2}", "7\\text{ cm}^3", 0.0),
    ("\\boxed{7 \\text{ cm}^3}", "7\\text{ cm}^3", 1.0),
    ("\\boxed{2 s}", "2 kg", 0.0),
    ("\\boxed{250 m}", "0.25 km", 1.0),  # an equal quantity in another unit
    ("\\boxed{90 \\text{ minutes}}", "1.5 hours", 1.0),
    ("\\boxed{2 \\text{ metres}}", "2 m", 1.0),  # the same unit spelled out
    ("\\boxed{3 hours}", "3 hr", 1.0),
    ("\\boxed{3}", "3 hours", 0.0),  # a unit in the reference: the answer needs one
    ("\\boxed{5\\text{ apples}}", "5\\text{ apples}", 1.0),
    ("\\boxed{5\\text{ pears}}", "5\\text{ apples}", 0.0),
    ("\\boxed{12}", "12", 1.0),  # no unit in the reference: nothing to check
]


def test_units_of_the_reference_bind_the_answer(judge):
    assert scores(judge, [(c, g) for c, g, _ in UNIT_ROWS]) == [s for _, _, s in UNIT_ROWS]


def test_unit_grammar():
    assert split_unit("12 km") == ("12", "km")
    assert split_unit("5\\text{ cm}^3") == ("5", "cm^3")
    assert split_unit("60 km/h") == ("60", "km/h")
    assert split_unit("2x") is None and split_unit("12") is None and split_unit("12 apples") is None
    assert compare_units("m", "km") == 1000
    assert compare_units("km/h", "m/s") == pytest.approx(3.6)
    assert isinstance(compare_units("cm^3", "cm^2"), str)
    assert with_units("4 hours", "240 min") == ("4", "4")


RELATION_ROWS = [
    ("\\boxed{\\sqrt{3} = \\sqrt{2}}", "\\sqrt{2}", 0.0),  # a false equation is wrong
    ("\\boxed{6 \\cdot 7 = 41}", "41", 0.0),
    ("\\boxed{6 \\cdot 7 = 42}", "42", 1.0),  # a true one is its last side
    ("\\boxed{x = 9}", "9", 1.0),
    ("\\boxed{2 < 1}", "1", 0.0),
]


def test_a_false_relation_is_wrong(judge):
    assert scores(judge, [(c, g) for c, g, _ in RELATION_ROWS]) == [s for _, _, s in RELATION_ROWS]


def test_several_math_spans_in_prose_are_a_hedge(judge):
    hedge = "<answer>maybe $\\sqrt{5}$, though $\\sqrt{6}$ could be right</answer>"
    restated = "<answer>it is $\\sqrt{5}$, which is $5^{1/2}$</answer>"
    assert scores(judge, [(hedge, "\\sqrt{5}"), (hedge, "\\sqrt{6}"), (restated, "\\sqrt{5}")]) == [0.0, 0.0, 1.0]


def test_mixed_numbers_on_both_sides(judge):
    rows = [("\\boxed{4\\frac{2}{3}}", "\\frac{14}{3}"), ("\\boxed{\\frac{14}{3}}", "4\\frac{2}{3}"),
            ("\\boxed{4\\frac{2}{3}}", "4\\frac{2}{3}"), ("\\boxed{4\\frac{1}{3}}", "4\\frac{2}{3}")]
    assert scores(judge, rows) == [1.0, 1.0, 1.0, 0.0]


def test_one_precision_rule_for_literals_and_math_verify(judge):
    rows = [("\\boxed{0.1428571428571}", "\\frac{1}{7}"), ("\\boxed{0.1428571428571}", "1/7"),
            ("\\boxed{0.142857}", "1/7"), ("\\boxed{0.1429}", "1/7"), ("\\boxed{1.414214}", "\\sqrt{2}"),
            ("\\boxed{1.4142}", "\\sqrt{2}")]
    assert scores(judge, rows) == [1.0, 1.0, 1.0, 0.0, 1.0, 0.0]
    coarse = math_equivalence(workers=1, timeout_seconds=20.0, precision=3)
    assert scores(coarse, [("\\boxed{0.143}", "1/7"), ("\\boxed{1.414}", "\\sqrt{2}"), ("\\boxed{0.14}", "1/7")]) \
        == [1.0, 1.0, 0.0]


EXACT_ROWS = [
    ("\\boxed{\\sqrt{19}}", "4.358898943540674", 1.0),  # simplest exact form of a decimal reference
    ("\\boxed{\\frac{1+\\sqrt{5}}{2}}", "1.618033988749895", 1.0),
    ("\\boxed{\\left( \\frac{2}{9} \\right)}", "2/9", 1.0),
    ("\\boxed{\\sqrt{25}}", "5", 0.0),  # arithmetic left to do
    ("\\boxed{19 \\cdot 3 + 2}", "59", 0.0),
    ("\\boxed{(58+1)}", "59", 0.0),
    ("\\boxed{3^{4}}", "81", 0.0),
    ("\\boxed{2 \\cdot 5 \\sqrt{3}}", "17.32050807568877", 0.0),
    ("\\boxed{\\sqrt{12}}", "3.4641016151377544", 0.0),  # 2\\sqrt{3} is its simplest form
]


def test_require_literal_accepts_simplest_exact_forms_only(judge):
    assert scores(judge, [(c, g) for c, g, _ in EXACT_ROWS]) == [s for _, _, s in EXACT_ROWS]


def test_a_list_of_solutions_is_a_set(judge):
    gold = "$$y = 3, y = \\frac{1 \\pm \\sqrt{5}}{2}$$"
    rows = [("\\boxed{y = 3, y = \\frac{1 \\pm \\sqrt{5}}{2}}", gold),
            ("\\boxed{\\frac{1-\\sqrt{5}}{2}, 3, \\frac{1+\\sqrt{5}}{2}}", gold),
            ("\\boxed{y = 3}", gold)]
    assert scores(judge, rows) == [1.0, 1.0, 0.0]


def test_math_verify_options_are_parameters():
    loose = math_equivalence(workers=1, timeout_seconds=20.0, strict=False)
    assert scores(loose, [("$g(t)$", "$g(s)$")]) == [0.0]  # auto: the last number / no answer
    whole = math_equivalence(workers=1, timeout_seconds=20.0, strict=False, extract="none")
    strict = math_equivalence(workers=1, timeout_seconds=20.0, extract="none")
    assert scores(whole, [("$g(t)$", "$g(s)$")]) == [1.0]
    assert scores(strict, [("$g(t)$", "$g(s)$")]) == [0.0]
    sets = math_equivalence(workers=1, timeout_seconds=20.0, extract="none", allow_set_relation_comp=True)
    assert scores(sets, [("$-1 \\le x \\le 4$", "$x \\in [-1,4]$")]) == [1.0]
    for bad in ({"precision": -1}, {"precision": 2.5}, {"match_types": ["words"]}, {"match_types": "latex"},
                {"strict": "yes"}):
        with pytest.raises(ValueError):
            math_equivalence(**bad)
