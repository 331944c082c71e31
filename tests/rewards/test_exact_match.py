"""exact_match and the numeric/exact verifiers."""

import json
from pathlib import Path

import pytest

from grpo_rewards.builtins.exact_match import (
    exact_match,
    make_exact_verifier,
    make_numeric_verifier,
    reference_answer,
)
from grpo_rewards.verdict import Status

from . import unsloth_reference as unsloth

GSM8K_TRAIN = Path(__file__).resolve().parents[3] / "shared" / "data" / "gsm8k" / "train.jsonl"


def score(completions, answers, **params):
    return exact_match(**params)(completions, answer=answers)


@pytest.mark.parametrize(
    "completion, reference",
    [
        ("<answer>72</answer>", "72"),
        ("<answer>\n72\n</answer>", "Natalia sold ... <<48+24=72>>72 clips.\n#### 72"),  # full GSM8K solution
        ("<answer>1,080</answer>", "1080"),
        ("<answer>1080</answer>", "1,080"),
        ("<answer>$1080.00</answer>", "1080"),
        ("<answer>72.0</answer>", "72"),
        ("<answer> 72 </answer>", "72"),
        ("<answer>0.75</answer>", "3/4"),
        ("<answer>\\frac{3}{4}</answer>", "0.75"),
        ("<answer>−5</answer>", "-5"),
        ("<answer>50%</answer>", "50"),
        ("So the total is\n#### 72", "72"),
        ("We get \\boxed{72}.", "72"),
        ("Answer: 72", "#### 72"),
        ("<answer>Paris</answer>", "paris"),
        ("<answer>New  York.</answer>", "new york"),
        ([{"role": "assistant", "content": "<answer>9</answer>"}], "9"),
    ],
)
def test_correct(completion, reference):
    assert score([completion], [reference]) == [2.0]


@pytest.mark.parametrize(
    "completion, reference",
    [
        ("<answer>71</answer>", "72"),
        ("<answer>72 apples</answer>", "72"),  # not a number as written: exact means exact
        ("<answer>seventy-one</answer>", "72"),  # integers in words are numbers: 71 is not 72
        ("no answer at all", "72"),
        ("<answer></answer>", "72"),
        ("<answer>London</answer>", "Paris"),
        ("<answer>0.7500001</answer>", "3/4"),
    ],
)
def test_wrong(completion, reference):
    assert score([completion], [reference]) == [0.0]


def test_values_and_missing_reference():
    c = ["<answer>1</answer>", "<answer>2</answer>", "<answer>3</answer>", "<answer>4</answer>"]
    assert score(c, ["1", "3", "", None], value=1.0, wrong_value=-1.0) == [1.0, -1.0, None, None]


def test_extraction_and_reference_parameters():
    c = ["<answer>5</answer> #### 6"]
    assert score(c, ["5"]) == [0.0]  # two explicit answers that differ: a hedge
    assert score(c, ["5"], extract="answer_tag") == [2.0]
    assert score(c, ["6"], extract="gsm8k") == [2.0]
    assert score(["the result: [7]"], ["7"], extract="regex", pattern=r"\[(\d+)\]") == [2.0]
    assert score(["<answer>Paris</answer>"], ["paris"], case_sensitive=True) == [0.0]
    # reference_extract = "none" compares the reference as written
    assert score(["<answer>72</answer>"], ["x #### 72"], reference_extract="none") == [0.0]
    assert score(["<answer>2</answer>"], ["\\boxed{2}"], reference_extract="boxed") == [2.0]
    fn = exact_match(reference_column="gold")
    assert fn(["<answer>2</answer>"], gold=["2"]) == [2.0]
    with pytest.raises(KeyError, match="gold"):
        fn(["<answer>2</answer>"], answer=["2"])


@pytest.mark.parametrize(
    "params, message",
    [
        ({"extract": "xml"}, "unknown extract method 'xml'"),
        ({"extract": "regex"}, "needs a 'pattern'"),
        ({"extract": "regex", "pattern": "("}, "not a valid regular expression"),
        ({"pattern": r"(\d+)"}, "only used with extract = 'regex'"),
        ({"reference_extract": "regex"}, "unknown reference_extract 'regex'"),
    ],
)
def test_bad_parameters(params, message):
    with pytest.raises(ValueError, match=message):
        exact_match(**params)


def test_verifiers_explain_their_verdicts():
    numeric = make_numeric_verifier()
    v = numeric("1,080", "blah #### 1080")
    assert v.status is Status.OK and v.reason == "1080 == 1080"
    v = numeric("7", "8")
    assert v.status is Status.WRONG and v.reason == "7 != 8"
    assert numeric("seven", "8").status is Status.WRONG
    assert numeric("7", "Paris").status is Status.UNDECIDED
    exact = make_exact_verifier()
    assert exact("PARIS", "paris").ok
    assert not make_exact_verifier(case_sensitive=True)("PARIS", "paris").ok
    assert exact("x", "").status is Status.UNDECIDED


def test_reference_answer():
    assert reference_answer("work\n#### 72") == "72"
    assert reference_answer(" 72 ") == "72"
    assert reference_answer(None) == ""
    assert reference_answer("work\n#### 72", "none") == "work\n#### 72"


def test_matches_unsloth_wherever_unsloth_says_correct():
    """Every completion Unsloth's correctness_reward_func scores 2.0 scores 2.0 here (default extraction)."""
    answers = ["72", "1080", "5", "-3", "0"]
    for a in answers:
        for completion in (f"<reasoning>\nwork\n</reasoning>\n<answer>\n{a}\n</answer>\n", f"<answer>{a}</answer>",
                           f"junk <answer> {a} </answer> tail"):
            assert unsloth.correctness(completion, a) == 2.0
            assert score([completion], [a]) == [2.0]


def test_toml_config_builds_it(tmp_path):
    from grpo_rewards import load_rewards

    cfg = tmp_path / "r.toml"
    cfg.write_text('[rewards.correct]\nuse = "exact_match"\nvalue = 3.0\nextract = "gsm8k"\n')
    composed = load_rewards(str(cfg))
    assert composed(["#### 1,000", "#### 999"], answer=["1000", "1000"]) == [3.0, 0.0]
    cfg.write_text('[rewards.correct]\nuse = "exact_match"\nextract = "xml"\n')
    with pytest.raises(Exception, match=r"r.toml:\d+: rewards.correct(\.extract)?: exact_match: unknown extract method 'xml'"):
        load_rewards(str(cfg))


def test_verifier_through_toml(tmp_path):
    from grpo_rewards import load_rewards

    cfg = tmp_path / "r.toml"
    cfg.write_text('[rewards.num]\nuse = "verify:numeric"\nvalue = 1.0\n')
    composed = load_rewards(str(cfg))
    assert composed(["<answer>4.0</answer>", "<answer>5</answer>", "<answer>5</answer>"], answer=["4", "4", "Paris"]) == [1.0, 0.0, None]


@pytest.mark.skipif(not GSM8K_TRAIN.exists(), reason="GSM8K not available on this machine")
def test_every_gsm8k_solution_matches_its_own_answer():
    """A completion that *is* the reference solution scores 2.0, for all 7,473 GSM8K train rows."""
    rows = [json.loads(line) for line in GSM8K_TRAIN.open()]
    solutions = [r["answer"] for r in rows]
    finals = [s.split("####")[-1].strip() for s in solutions]
    assert score(solutions, solutions) == [2.0] * len(rows)
    assert score([f"<answer>{f}</answer>" for f in finals], solutions) == [2.0] * len(rows)
    shifted = finals[1:] + finals[:1]
    wrong = sum(s == 0.0 for s in score([f"<answer>{f}</answer>" for f in shifted], solutions))
    assert wrong == sum(a != b for a, b in zip(shifted, finals))


def test_verify_reward_with_a_missing_reference_does_not_count():
    # str(None) is "None": an answer "None" must not match a missing reference
    from grpo_rewards.builtins.exact_match import make_exact_verifier, make_numeric_verifier
    from grpo_rewards.verdict import reward_from_verifier

    for verifier in (make_exact_verifier(), make_numeric_verifier()):
        reward = reward_from_verifier(verifier)
        assert reward(["<answer>None</answer>", "<answer>4</answer>"], answer=[None, None]) == [None, None]
    assert exact_match()(["<answer>None</answer>"], answer=[None]) == [None]
