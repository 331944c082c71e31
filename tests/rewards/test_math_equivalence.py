"""math_equivalence and verify:math: renderings, unparseable golds, timeouts from worker threads, properties."""

from __future__ import annotations

import json
import math
import random
import threading
import time
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import grpo_rewards
from grpo_rewards.builtins.math_equivalence import math_equivalence, math_verifier
from grpo_rewards.isolation import pool as timeout_pool
from grpo_rewards.verdict import Status

HANG = "9^{9^{9^{9}}}"  # math-verify tries to evaluate this tower of powers: it never finishes
PROPERTY = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def correct():
    yield math_equivalence(workers=2, timeout_seconds=5.0)
    timeout_pool.shutdown()


def score(reward, completion: str, gold: str) -> float | None:
    return reward([completion], answer=[gold])[0]


@pytest.mark.parametrize(
    ("completion", "gold"),
    [
        ("<answer>72</answer>", "She has 9 * 8 = 72 apples.\n#### 72"),
        ("Total: 1,234 dollars\n#### 1,234", "1234"),
        ("So it is \\boxed{\\frac{1}{2}}.", "0.5"),
        ("\\boxed{\\sqrt{2}}", "\\sqrt{2}"),
        ("Answer: 2^{1/2}", "\\sqrt{2}"),
        ("<answer>$72</answer>", "72"),
        ("<answer>72.00</answer>", "72"),
        ("<answer>3/4</answer>", "\\frac{3}{4}"),
        ("<answer>x^2+1</answer>", "1+x^2"),
        ("<answer>\\frac12</answer>", "\\frac{1}{2}"),
        ("<answer>-5</answer>", "-5"),
        ("We get 10% of it.\n#### 10%", "\\frac{1}{10}"),
    ],
)
def test_equivalent_answers_score_value(correct, completion, gold):
    assert score(correct, completion, gold) == 1.0


@pytest.mark.parametrize(
    ("completion", "gold"),
    [
        ("<answer>71</answer>", "#### 72"),
        ("\\boxed{\\sqrt{3}}", "\\sqrt{2}"),
        ("<answer>many</answer>", "70"),  # unparseable answer: wrong, not None
        ("I do not know.", "5"),  # nothing to extract
    ],
)
def test_wrong_or_missing_answers_score_wrong_value(correct, completion, gold):
    assert score(correct, completion, gold) == 0.0


@pytest.mark.parametrize("gold", ["garbage words", "", "{", "see the figure", "$$"])
def test_unparseable_gold_scores_none_never_one(correct, gold):
    # even a completion repeating the gold verbatim must not be rewarded against a gold that did not parse
    assert correct([f"<answer>{gold}</answer>", "<answer>1</answer>"], answer=[gold, gold]) == [None, None]
    verdict = math_verifier(workers=2)(gold, gold)
    assert verdict.status is Status.UNDECIDED and "could not parse the reference" in verdict.reason


def test_bare_latex_gold_is_wrapped_and_parsed():
    verdict = math_verifier(workers=2)("1.4142135623730951", "\\sqrt{2}")
    assert verdict.status is Status.OK
    assert verdict.parsed == {"reference": "sqrt(2)", "answer": "1.4142135623730951"}


@pytest.mark.parametrize(
    ("completion", "gold", "expected"),
    [
        ("\\boxed{x + 1}", "1", 0.0),  # plain-text algebra is not one of its numbers
        ("<answer>2x+3</answer>", "2", 0.0),
        ("<answer>3x</answer>", "3", 0.0),
        ("<answer>1</answer>", "1+x", 0.0),
        ("<answer>x + 1</answer>", "1+x", 1.0),
        ("<answer>5 cm</answer>", "5", 1.0),  # a unit math-verify knows is still dropped
        ("<answer>1024</answer>", "the value is 2^{10} = 1024", 1.0),  # prose is not wrapped in $...$
        ("<answer>1023</answer>", "the value is 2^{10} = 1024", 0.0),
        ("<answer>$12:00$</answer>", "$12:00$", 1.0),  # math-verify's string fallback, where it is right
        ("<answer>$13:00$</answer>", "$12:00$", 0.0),
        ("<answer>17*23+5</answer>", "396", 1.0),  # arithmetic accepted only without require_literal
        ("<answer>2^{10}</answer>", "1024", 1.0),
    ],
)
def test_algebra_prose_and_string_fallback_through_math_verify(completion, gold, expected):
    reward = math_equivalence(workers=2, require_literal=False)
    assert reward([completion], answer=[gold]) == [expected]


@pytest.mark.parametrize(
    ("completion", "expected"),
    [("<answer>17*23+5</answer>", 0.0), ("<answer>2^{10} - 628</answer>", 0.0), ("<answer>\\sqrt{156816}</answer>", 0.0),
     ("<answer>396</answer>", 1.0), ("<answer>x = 396</answer>", 1.0), ("<answer>\\frac{792}{2}</answer>", 1.0)],
)
def test_require_literal_is_the_default_against_a_plain_number(correct, completion, expected):
    assert score(correct, completion, "396") == expected
    whole = math_equivalence(workers=2, extract="none")  # math-verify finds the answer; it must still be a literal
    assert whole([completion.replace("<answer>", "$").replace("</answer>", "$")], answer=["396"]) == [expected]


@pytest.mark.parametrize(
    ("completion", "gold", "expected"),
    [
        # a boxed list, tuple, interval or matrix is LaTeX, not plain text (-2,1 is not the number -2.1)
        ("so \\boxed{-2,1}", "$-2,1$", 1.0),
        ("so \\boxed{-2,1}", "$-2.1$", 0.0),
        ("\\boxed{(6,31,-1)}", "(6,31,-1)", 1.0),  # a bare tuple reference parses too
        ("\\boxed{(6,31,-1)}", "(6,31,1)", 0.0),
        ("\\boxed{[-4, 0]}", "$[-4,0]$", 1.0),
        ("\\boxed{[-4, 0]}", "$(-4,0)$", 0.0),  # a closed interval is not the open one
        ("\\boxed{\\begin{pmatrix} 0 & 3 \\\\ 0 & -1 \\end{pmatrix}}", "$\\begin{pmatrix} 0 & 3 \\\\ 0 & -1 \\end{pmatrix}$", 1.0),
        ("\\boxed{\\begin{pmatrix} 0 & 3 \\\\ 0 & 1 \\end{pmatrix}}", "$\\begin{pmatrix} 0 & 3 \\\\ 0 & -1 \\end{pmatrix}$", 0.0),
        # several boxes are one list, compared as a set ("find all solutions")
        ("x = \\boxed{2} or x = \\boxed{3}", "2, 3", 1.0),
        ("x = \\boxed{3} or x = \\boxed{2}", "$2, 3$", 1.0),
        ("x = \\boxed{2} or x = \\boxed{4}", "2, 3", 0.0),
        ("\\boxed{(2, 2)} and \\boxed{(6, 2)}", "$(2, 2), (6, 2)$", 1.0),
        ("<answer>1,234</answer>", "1234", 1.0),  # a number literal stays a number, not a list
        ("\\boxed{1.22}", "1,22", 1.0),  # a reference is plain text: 1,22 is a decimal comma
        ("\\boxed{1,22}", "1,22", 0.0),  # a boxed answer is LaTeX: the list 1, 22
    ],
)
def test_lists_tuples_intervals_and_matrices_are_latex(correct, completion, gold, expected):
    assert score(correct, completion, gold) == expected


@pytest.mark.parametrize(
    ("completion", "gold", "expected"),
    [
        ("<answer>12</answer>", "12:30", 0.0),  # the hour alone is not the time (plain text read 12:30 as 12)
        ("<answer>7</answer>", "7:32", 0.0),  # nor the ratio's first term
        ("<answer>12:30</answer>", "12:30", 1.0),
        ("<answer>7:32</answer>", "$S_{MBCN}:S=7:32$", 1.0),  # Math-Verify's numina case: the ratio 7/32
        ("<answer>7/32</answer>", "7:32", 1.0),
        ("<answer>12:00</answer>", "12:00", 1.0),  # no value (12/0): its own text only
        ("<answer>13:00</answer>", "12:00", 0.0),
        ("<answer>7:32</answer>", "7", 0.0),
    ],
)
def test_a_bare_ratio_or_time_is_not_the_number_before_its_colon(correct, completion, gold, expected):
    assert score(correct, completion, gold) == expected


def test_a_whole_completion_is_plain_text_where_a_comma_is_a_decimal_comma():
    whole = math_equivalence(workers=2, extract="none", require_literal=False)
    assert whole(["1000,99", "1000,98", "so $-2,1$"], answer=["1000.99", "1000.99", "$-2,1$"]) == [1.0, 0.0, 1.0]


def test_integers_longer_than_pythons_str_limit_parse():
    big = "1" * 5000
    reward = math_equivalence(workers=2)
    assert reward([f"<answer>{big}</answer>", f"<answer>{big[:-1]}2</answer>"], answer=[big, big]) == [1.0, 0.0]
    algebra = reward([f"<answer>{big}x</answer>", f"<answer>{big[:-1]}2x</answer>"], answer=[f"{big}x"] * 2)
    assert algebra == [1.0, 0.0]  # through math-verify in the pool


def test_parameters_value_wrong_value_and_extraction():
    reward = math_equivalence(value=2.5, wrong_value=-1.0, extract="regex", pattern=r"RESULT=(\S+)", workers=2)
    assert reward(["RESULT=4 (not 5)", "RESULT=5", "4"], answer=["4", "4", "4"]) == [2.5, -1.0, -1.0]
    whole = math_equivalence(extract="none", workers=2)  # math-verify reads the whole completion
    assert whole(["First $x=3$, so the result is $\\boxed{6}$"], answer=["6"]) == [1.0]
    other_column = math_equivalence(reference_column="solution", workers=2)
    assert other_column(["<answer>6</answer>"], solution=["6"]) == [1.0]


def test_chat_completions_and_junk_rows_do_not_raise(correct):
    rows = [[{"role": "assistant", "content": "<answer>4</answer>"}], 17, None, {"x": 1}, "<answer>4</answer>"]
    assert correct(rows, answer=["4", "4", "4", "4", None]) == [1.0, None, None, None, None]


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"extract": "magic"}, "unknown extract method 'magic'; choose one of .*, none"),
        ({"extract": "boxed", "pattern": "x"}, "'pattern' is only used with extract = 'regex'"),
        ({"extract": "regex"}, "needs a 'pattern'"),
        ({"extract": "regex", "pattern": "(unclosed"}, "not a valid regular expression"),
        ({"timeout_seconds": 0}, "timeout_seconds must be a positive number"),
        ({"start_method": "thread"}, "start_method must be one of"),
        ({"workers": -1}, "workers must be"),
    ],
)
def test_bad_parameters_are_clear_errors(params, message):
    with pytest.raises(ValueError, match=message):
        math_equivalence(**params)


def test_missing_reference_column_names_it(correct):
    with pytest.raises(KeyError, match="'answer' is missing"):
        correct(["<answer>1</answer>"])


def test_registered_reward_and_verifier_from_the_registry():
    reward = grpo_rewards.reward("math_equivalence", value=3.0, workers=2)
    assert reward(["<answer>\\frac{6}{4}</answer>"], answer=["1.5"]) == [3.0]
    as_reward = grpo_rewards.reward("verify:math", workers=2)
    assert as_reward(["<answer>1.5</answer>", "<answer>2</answer>"], answer=["3/2", "3/2"]) == [1.0, 0.0]
    # no answer: wrong against a reference that parses, not counted against one that does not (as the reward)
    missing, golds = ["no answer at all", "no answer either"], ["garbage words", "3"]
    assert as_reward(missing, answer=golds) == reward(missing, answer=golds) == [None, 0.0]


@pytest.mark.parametrize("answer", [HANG, "9^{9^{9}}", "(9^9)^{(9^9)}", "2^{123456789}", "100000!",
                                    "{" * 40 + "1" + "}" * 40, "1+" * 600 + "1"])
def test_explosive_answers_are_refused_before_the_pool_as_wrong(answer):
    reward = math_equivalence(timeout_seconds=30.0, workers=2, wrong_value=-1.0, require_literal=False)
    start = time.perf_counter()
    assert reward([f"\\boxed{{{answer}}}", "\\boxed{\\sqrt{2}}"], answer=["\\sqrt{2}"] * 2) == [-1.0, 1.0]
    assert time.perf_counter() - start < 20  # refused at once, not after the 30 s limit


@pytest.mark.parametrize("answer", [HANG, "9^{9^{9}}", "2^{123456789}", "100000!", "{" * 40 + "1" + "}" * 40,
                                    "1+" * 600 + "1"])
def test_explosive_answers_are_refused_in_a_whole_completion_too(answer):
    reward = math_equivalence(timeout_seconds=30.0, workers=2, wrong_value=-1.0, require_literal=False, extract="none")
    reasoning = "We work it out step by step.\n" * 60  # longer than the answer cap: the cap reads the math spans
    start = time.perf_counter()
    completions = [f"{reasoning}So it is $\\boxed{{{answer}}}$.", f"{reasoning}So it is $\\boxed{{\\sqrt{{2}}}}$."]
    assert reward(completions, answer=["\\sqrt{2}"] * 2) == [-1.0, 1.0]
    assert time.perf_counter() - start < 20  # refused at once, not after the 30 s limit


def test_a_long_completion_is_scored_on_its_answer_with_extract_none():
    reward = math_equivalence(workers=2, extract="none", require_literal=False)
    reasoning = "".join(f"Step {i}: we add $x_{{{i}}}$ to the total and keep going.\n" for i in range(200))
    assert len(reasoning) > 10_000
    completions = [f"{reasoning}The answer is $\\boxed{{\\frac{{1}}{{2}}}}$.", f"{reasoning}The answer is $\\boxed{{3}}$.",
                   "a" * 40_000 + " $\\boxed{0.5}$"]  # past MAX_COMPLETION_CHARS: refused
    assert reward(completions, answer=["0.5"] * 3) == [1.0, 0.0, 0.0]


SLOW = "(x+1)^{999}"  # not refused before the pool (no tower, no huge power), but sympy takes ~25 s on it


def test_a_timeout_against_a_scorable_reference_scores_wrong_value_not_none():
    reward = math_equivalence(timeout_seconds=1.0, workers=1, wrong_value=-1.0, require_literal=False)
    assert reward([f"\\boxed{{{SLOW}}}", "\\boxed{1+x}"], answer=["x + 1"] * 2) == [-1.0, 1.0]
    verdict = math_verifier(timeout_seconds=1.0, workers=1, require_literal=False)(SLOW, "x + 1")
    assert verdict.status is Status.WRONG and "could not be scored" in verdict.reason


def test_batch_timeout_seconds_bounds_a_whole_batch():
    reward = math_equivalence(timeout_seconds=60.0, batch_timeout_seconds=3.0, workers=1, wrong_value=-1.0,
                              require_literal=False)
    assert reward(["\\boxed{1+x}"], answer=["x + 1"]) == [1.0]  # the pool is up and warm: not timed here
    slow = [f"\\boxed{{(x+1)^{{{999 - k}}}}}" for k in range(3)]
    start = time.perf_counter()
    scores = reward(["\\boxed{1+x}", *slow], answer=["x + 1"] * 4)
    took = time.perf_counter() - start
    assert scores == [1.0, -1.0, -1.0, -1.0]
    assert took < 3.0 + 15  # the budget, plus asking once whether the reference scores against itself
    with pytest.raises(ValueError, match="batch_timeout_seconds must be a positive number"):
        math_equivalence(batch_timeout_seconds=0)


def test_a_fresh_worker_loads_math_verify_before_its_first_item_is_timed():
    # the first parse in a new process loads math-verify's LaTeX parser (over a second): a warm-up in the
    # worker's initializer, so an item's time limit only counts the item
    timeout_pool.shutdown()
    reward = math_equivalence(timeout_seconds=1.0, workers=1, require_literal=False)
    assert reward(["\\boxed{x + 1}"], answer=["1+x"]) == [1.0]


def test_called_from_many_threads_at_once(correct):
    results: dict[int, list] = {}

    def work(k: int) -> None:
        results[k] = correct([f"<answer>{k}</answer>", f"<answer>{k + 1}</answer>"], answer=[str(k)] * 2)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert results == {k: [1.0, 0.0] for k in range(6)}


# ------------------------------------------------------------------ properties ----


def renderings(x: Fraction) -> list[str]:
    """Ways a completion may state the number x; math-verify must read each as x."""
    out = [f"\\frac{{{x.numerator}}}{{{x.denominator}}}", f"{x.numerator}/{x.denominator}"]
    if x.denominator == 1:
        n = x.numerator
        out += [str(n), f"{n:,}", f"{n}.00", f"${n:,}" if n >= 0 else f"-${-n:,}"]
    elif 10**6 % x.denominator == 0:
        out.append(f"{float(x):.6f}".rstrip("0"))
    return out


def wrappers(answer: str) -> list[str]:
    return [f"<answer>{answer}</answer>", f"Reasoning...\n#### {answer}", f"So \\boxed{{{answer}}}.", f"Answer: {answer}"]


fractions = st.builds(
    Fraction, st.integers(-10**6, 10**6), st.sampled_from([1, 1, 1, 2, 3, 4, 5, 8, 25, 7, 12])
)


@PROPERTY
@given(x=fractions)
def test_a_number_rendered_any_supported_way_verifies_equal_to_itself(correct, x):
    completions = [w for r in renderings(x) for w in wrappers(r)]
    golds = renderings(x) + [f"Work.\n#### {renderings(x)[-1]}"]
    for gold in golds:
        scores = correct(completions, answer=[gold] * len(completions))
        bad = [c for c, s in zip(completions, scores, strict=True) if s != 1.0]
        assert not bad, f"gold {gold!r}: not equal to {bad}"
    wrong = correct([w for w in wrappers(str(x + 1))], answer=[golds[0]] * 4)
    assert wrong == [0.0] * 4


math_texts = st.one_of(
    st.text(max_size=40),
    st.text(alphabet="0123456789+-*/^_{}()\\.,$ xabfrcqst", max_size=30),
    st.sampled_from(["\\frac{1}{2}", "\\sqrt{2}", "#### 5", "\\boxed{", "<answer>", "1e3", "∞", "NaN"]),
)


@PROPERTY
@given(rows=st.lists(st.tuples(math_texts, math_texts), min_size=1, max_size=8))
def test_junk_never_raises_and_scores_are_in_bounds(correct, rows):
    reward = math_equivalence(value=2.0, wrong_value=-0.5, workers=2)
    scores = reward([c for c, _ in rows], answer=[g for _, g in rows])
    assert len(scores) == len(rows)
    assert all(s is None or (math.isfinite(s) and s in (2.0, -0.5)) for s in scores)


pool_of_rows = [
    ("<answer>4</answer>", "4"), ("<answer>5</answer>", "4"), ("\\boxed{\\frac{1}{2}}", "0.5"),
    ("no answer", "3"), ("<answer>2</answer>", "garbage words"), ("#### 1,000", "1000"), ("<answer>x+1</answer>", "1+x"),
    ("<answer>1+x</answer>", "1"), ("<answer>50%</answer>", "0.5"),
]


@PROPERTY
@given(rows=st.lists(st.sampled_from(pool_of_rows), min_size=1, max_size=10), seed=st.integers(0, 10**6))
def test_batch_scores_equal_rows_one_by_one_in_any_order(correct, rows, seed):
    batch = correct([c for c, _ in rows], answer=[g for _, g in rows])
    one_by_one = [correct([c], answer=[g])[0] for c, g in rows]
    assert batch == one_by_one
    order = list(range(len(rows)))
    random.Random(seed).shuffle(order)
    shuffled = correct([rows[i][0] for i in order], answer=[rows[i][1] for i in order])
    assert shuffled == [batch[i] for i in order]


@PROPERTY
@given(gold=st.text(alphabet="abcdefghijklmnopqrstuvwxyz ", min_size=1, max_size=20))
def test_undecided_gold_is_never_rewarded(correct, gold):
    verdict = math_verifier(workers=2)(gold, gold)
    score_ = correct([f"<answer>{gold}</answer>"], answer=[gold])[0]
    if verdict.status is Status.UNDECIDED:
        assert score_ is None
    else:
        assert score_ in (0.0, 1.0)


int_renderings = st.sampled_from(["{:d}", "{:,d}", "${:,d}", "#### {:d}"])


@PROPERTY
@given(x=st.integers(-10**12, 10**12), dy=st.sampled_from([0, 0, 1, -1, 1000]),
       fx=st.sampled_from(["{:d}", "{:,d}", "#### {:d}"]), fy=st.sampled_from(["{:d}", "{:,d}"]))
def test_number_grammar_fast_path_agrees_with_math_verify(x, dy, fx, fy):
    import logging

    from math_verify import parse, verify

    from grpo_rewards.builtins import math_check

    logging.getLogger("math_verify").setLevel(logging.ERROR)

    def render(fmt: str, n: int) -> str:
        return fmt.format(n).replace("$-", "-$")

    gold, answer = render(fx, x), render(fy, x + dy).removeprefix("#### ")
    quick = math_check.literal_check(gold, answer, True)
    assert quick is not None
    by_math_verify = verify(parse(math_check.gold_text(gold), parsing_timeout=None),
                            parse(answer, parsing_timeout=None), timeout_seconds=None)
    assert (quick[0] == "ok") == by_math_verify


GSM8K = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "gsm8k" / "test.jsonl"


@pytest.mark.skipif(not GSM8K.exists(), reason="GSM8K test split not available")
def test_gsm8k_solutions_verify_against_their_own_answers_and_not_others(correct):
    rows = [json.loads(line) for line in GSM8K.read_text().splitlines()[:300]]
    solutions = [r["answer"] for r in rows]
    assert correct(solutions, answer=solutions) == [1.0] * len(rows)
    shifted = solutions[1:] + solutions[:1]
    wrong = correct(solutions, answer=shifted)
    finals = [s.rsplit("####", 1)[1].strip() for s in solutions]
    expected = [1.0 if a.replace(",", "") == b.replace(",", "") else 0.0
                for a, b in zip(finals, finals[1:] + finals[:1], strict=True)]
    assert wrong == expected
    # the same answers as LaTeX fractions go through math-verify in the pool
    latex = [f"so \\boxed{{\\frac{{{2 * int(f.replace(',', ''))}}}{{2}}}}" for f in finals[:60]]
    assert correct(latex, answer=solutions[:60]) == [1.0] * 60
