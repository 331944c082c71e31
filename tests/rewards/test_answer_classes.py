"""The classes of answers the grammar (grpo_rewards.answers) reads, each with its right and its wrong forms.

Each class is checked on the rewards that read an answer (``exact_match``, ``numeric_proximity`` in its
exact tier, ``math_equivalence``): a right form pays on every one, a hedge or a wrong value on none.
"""

from __future__ import annotations

import pytest

from grpo_rewards import extract_answer, reward
from grpo_rewards.answers.arithmetic import evaluate
from grpo_rewards.answers.numbers import parse_literal
from grpo_rewards.sandbox.extract import extract_code, without_main_block


@pytest.fixture(scope="module")
def rewards():
    return {"exact_match": reward("exact_match", value=1.0, wrong_value=0.0),
            "numeric_proximity": reward("numeric_proximity", mode="tiered",
                                        tiers={"exact": 1.0, "near": 0.0, "close": 0.0, "far": 0.0,
                                               "unparsable": 0.0}, missing_value=0.0),
            "math_equivalence": reward("math_equivalence", workers=1)}


def _paid(rewards: dict, completion: str, gold: str) -> dict[str, float]:
    return {name: fn([completion], answer=[gold])[0] for name, fn in rewards.items()}


RIGHT = [
    # ordinals, scale words, percent words, LaTeX forms, unicode fractions, a variable's value
    ("She finished in 3rd place.", "3"),
    ("<answer>3rd</answer>", "3"),
    ("The city has 1.2 million people.", "1200000"),
    ("<answer>1.2 million</answer>", "1200000"),
    ("<answer>12 percent</answer>", "12%"),
    ("The rate is 12 percent.", "12%"),
    ("<answer>\\frac {1}{2}</answer>", "0.5"),
    ("So we get $\\tfrac12$.", "1/2"),
    ("\\boxed{\\boldsymbol{12}}", "12"),
    ("\\boxed{0.\\overline{3}}", "1/3"),
    ("<answer>½</answer>", "1/2"),
    ("It takes 3½ cups.", "7/2"),
    ("<answer>x = 12</answer>", "12"),
    # model families' answer forms
    ("Final Answer: The final answer is $\\$18$. I hope it is correct.", "18"),
    ("Final Answer: The final answer is $18$. I hope it is correct.", "18"),
    ("<answer>The answer is 12.</answer>", "12"),
    ("```python\ndef solution():\n    pass\nanswer = 9 * 2\nprint(answer)\n```", "18"),
    # quoted claims, postscripts, tags named in the reasoning
    ('He said "the answer is 12", but counting again it is 15.', "15"),
    ("So she has 12 apples.\n\nP.S. This took me 3 steps.", "12"),
    ("Therefore the total is 12.\nNote: I assumed 3 apples per bag.", "12"),
    ("I will put the answer in <answer> tags.\n<answer>12</answer>", "12"),
    ("Use <answer> and </answer> tags.\n<answer>12</answer>", "12"),
]

WRONG = [
    # hedges of every form
    ("The answer is 12–13.", "12"),
    ("There are 5 boxes. The answer is 12–13.", "5"),
    ("The answer is at least 12.", "12"),
    ("It has more than 12 legs.", "12"),
    ("The answer is 12 (or 13 if we count the cat).", "12"),
    ("The answer is 12 (or 13 if we count the cat).", "13"),
    ("<answer>12</answer>\nSo \\boxed{13}", "12"),
    ("<answer>12</answer>\nSo \\boxed{13}", "13"),
    ("#### 12\n\\boxed{13}", "13"),
    ("#### 12\n\\boxed{13}", "12"),
    # a quoted claim, a postscript, a draft in the reasoning
    ('He said "the answer is 12", but counting again it is 15.', "12"),
    ("So she has 12 apples.\n\nP.S. This took me 3 steps.", "3"),
    ("<think>The answer is 12.</think> I cannot answer this.", "12"),
    ("<reasoning>The answer is 12.</reasoning> I cannot answer this.", "12"),
    ("<answer>The answer is 12.</answer>", "13"),
    ("```python\nanswer = 9 * 2\n```", "9"),
    # tiny quantities: 0 and values orders of magnitude off are wrong
    ("<answer>0</answer>", "3e-7"),
    ("<answer>3e-9</answer>", "3e-7"),
    ("<answer>0.0</answer>", "3 \\times 10^{-7}"),
    ("<answer>3.1e-7</answer>", "3e-7"),
    ("<answer>0</answer>", "1.6e-19"),
    ("<answer>1.6e-18</answer>", "1.6e-19"),
]


@pytest.mark.parametrize(("completion", "gold"), RIGHT)
def test_a_right_form_is_paid_by_every_reward(rewards, completion: str, gold: str) -> None:
    assert _paid(rewards, completion, gold) == dict.fromkeys(rewards, 1.0), extract_answer(completion)


@pytest.mark.parametrize(("completion", "gold"), WRONG)
def test_a_hedge_or_a_wrong_value_is_paid_by_none(rewards, completion: str, gold: str) -> None:
    assert _paid(rewards, completion, gold) == dict.fromkeys(rewards, 0.0), extract_answer(completion)


def test_tiny_quantities_keep_their_significant_digits(rewards) -> None:
    paid = _paid(rewards, "<answer>3.0000001e-7</answer>", "3e-7")
    assert paid["math_equivalence"] == 1.0  # within 6 significant digits, as 0.5000001 is 0.5
    proximity = reward("numeric_proximity")
    far = proximity(["<answer>0</answer>", "<answer>3e-9</answer>", "<answer>3e-7</answer>"], answer=["3e-7"] * 3)
    assert far[0] < 0.02 and far[1] < 0.02 and far[2] == 1.0  # relative error: 0 is 100% off, as 3e-9 is 99%


def test_glued_units_in_the_reference() -> None:
    em = reward("exact_match", value=1.0, wrong_value=0.0)
    assert em(["<answer>12 kg</answer>", "<answer>12kg</answer>", "<answer>13 kg</answer>"],
              answer=["12kg"] * 3) == [1.0, 1.0, 0.0]
    assert em(["<answer>12kg</answer>"], answer=["12 kg"]) == [1.0]
    me = reward("math_equivalence", workers=1)
    assert me(["<answer>12 kg</answer>", "<answer>12</answer>"], answer=["12kg"] * 2) == [1.0, 0.0]


def test_the_number_grammar_reads_the_new_forms() -> None:
    assert parse_literal("21st").value == 21 and parse_literal("3th") is None  # the suffix must fit
    assert parse_literal("12 percent").percent and parse_literal("12 per cent").value == 12
    assert parse_literal("0.1\\overline{6}").value * 6 == 1
    assert parse_literal("2 billion").value == 2 * 10**9
    assert parse_literal("x == 3") is None and parse_literal("a = b") is None


def test_program_of_thought_arithmetic_is_evaluated_without_running_code() -> None:
    assert evaluate("9 * 2") == 18 and evaluate("(3 + 4) / 2") * 2 == 7
    for hostile in ("__import__('os').system('x')", "9 ** 9 ** 9", "1 / 0", "x * 2", "9"):
        assert evaluate(hostile) is None
    assert extract_answer("answer = 9 * 2  # eighteen") == "18"


def test_a_demo_after_the_solution_is_left_out_of_function_tests() -> None:
    code = 'def f(x):\n    return 2 * x\n\n\nif __name__ == "__main__":\n    n = int(input())\n\n    print(f(n))\ny = 1\n'
    assert without_main_block(code) == "def f(x):\n    return 2 * x\n\n\ny = 1\n"
    assert without_main_block("print(1)\n") == "print(1)\n"


def test_code_and_json_are_never_read_from_the_reasoning() -> None:
    draft = "<think>\n```python\nprint(1)\n```\n</think>\nI cannot help with that."
    assert extract_code(draft)[0] is None
    assert extract_code("```python\nprint(1)\n```\n<think>unclosed\n```python\nprint(2)\n```")[0] == "print(1)\n"
    json_valid = reward("json_valid")
    assert json_valid(['<think>```json\n{"a": 1}\n```</think> Sorry, no.', '```json\n{"a": 1}\n```']) == [0.0, 1.0]
    # a trailing unlabelled snippet after the json block is not the JSON
    assert json_valid(['```json\n{"a": 1}\n```\nRun it with:\n```\npython main.py\n```']) == [1.0]
