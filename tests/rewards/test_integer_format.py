"""integer_format: Unsloth's int_reward_func, with extraction, negatives and value-based judging."""

import pytest

from grpo_rewards.builtins.integer_format import integer_format

from . import unsloth_reference as unsloth


def score(completions, **params):
    return integer_format(**params)(completions)


def test_defaults():
    c = ["<answer>72</answer>", "<answer>-7</answer>", "<answer>7.5</answer>", "<answer>1,000</answer>",
         "#### 72", "\\boxed{3}", "no number", "<answer>x</answer>", "<answer>²</answer>"]
    assert score(c) == [0.5, 0.0, 0.0, 0.0, 0.5, 0.5, 0.0, 0.0, 0.0]


def test_negative_and_value_judging():
    c = ["<answer>-7</answer>", "<answer>−7</answer>", "<answer>1,000</answer>", "<answer>4.0</answer>",
         "<answer>$72</answer>", "<answer>-4.0</answer>", "<answer>7.5</answer>"]
    assert score(c, allow_negative=True) == [0.5, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0]
    assert score(c, strict=False) == [0.0, 0.0, 0.5, 0.5, 0.5, 0.0, 0.0]
    assert score(c, strict=False, allow_negative=True) == [0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.0]
    assert score(c[:1], allow_negative=True, value=1.0, wrong_value=-1.0) == [1.0]
    assert score(c[-1:], value=1.0, wrong_value=-1.0) == [-1.0]


def test_extraction_parameters():
    assert score(["<answer>5</answer> more words"]) == [0.5]
    assert score(["<answer>5</answer> #### 6.5"]) == [0.0]  # two explicit answers that differ: no integer
    assert score(["<answer>5</answer> #### 6.5"], extract="gsm8k") == [0.0]
    assert score(["[[8]]"], extract="regex", pattern=r"\[\[(.*?)\]\]") == [0.5]
    with pytest.raises(ValueError, match="unknown extract method"):
        integer_format(extract="nope")


@pytest.mark.parametrize(
    "answer",
    ["72", "0", "007", "-3", "7.0", "1,000", "abc", "", "  12  ", "1 2", "+5"],
)
def test_same_as_unsloth_on_tagged_ascii_answers(answer):
    """With extract = answer_tag, on ASCII answers, our default is the notebook's isdigit rule."""
    completion = f"<reasoning>\nwork\n</reasoning>\n<answer>\n{answer}\n</answer>\n"
    assert score([completion], extract="answer_tag") == [unsloth.int_reward(completion)]
