"""strict_format / soft_format: the notebook's layouts, with multi-line reasoning counted."""

import pytest

from grpo_rewards.builtins.formats import soft_format, strict_format

from . import unsloth_reference as unsloth

ONE_LINE = "<reasoning>\n48/2 = 24, 48 + 24 = 72\n</reasoning>\n<answer>\n72\n</answer>\n"
MULTI_LINE = "<reasoning>\nNatalia sold 48/2 = 24 clips in May.\nAltogether 48 + 24 = 72.\n</reasoning>\n<answer>\n72\n</answer>\n"


def test_multi_line_reasoning_counts_unlike_the_notebook():
    assert unsloth.strict_format(MULTI_LINE) == 0.0 and unsloth.soft_format(MULTI_LINE) == 0.0  # the known bug
    assert strict_format()([MULTI_LINE]) == [0.5]
    assert soft_format()([MULTI_LINE]) == [0.5]


@pytest.mark.parametrize(
    "text, strict, soft",
    [
        (ONE_LINE, 0.5, 0.5),
        (MULTI_LINE, 0.5, 0.5),
        (ONE_LINE + "\n", 0.5, 0.5),  # "\n$" also matches before one more final newline
        (ONE_LINE + "\n\n", 0.0, 0.5),
        (ONE_LINE.rstrip("\n"), 0.0, 0.5),  # strict wants the trailing newline by default
        (ONE_LINE + "extra", 0.0, 0.5),  # soft allows text after the answer
        (" " + ONE_LINE, 0.0, 0.0),  # both anchored at the start
        ("<reasoning>x</reasoning> <answer>72</answer>", 0.0, 0.5),
        ("<reasoning>\nx\n</reasoning>\n\n<answer>\n72\n</answer>\n", 0.0, 0.5),
        (ONE_LINE.replace("\n72\n", "\nline one\nline two\n"), 0.5, 0.5),  # multi-line answer
        (ONE_LINE + ONE_LINE, 0.0, 0.5),  # two rounds: strict wants one of each tag
        ("<answer>\n72\n</answer>\n", 0.0, 0.0),
        ("<reasoning>\nx\n</reasoning>\n", 0.0, 0.0),
        ("", 0.0, 0.0),
    ],
)
def test_layouts(text, strict, soft):
    assert strict_format()([text]) == [strict]
    assert soft_format()([text]) == [soft]


@pytest.mark.parametrize("text", [ONE_LINE, ONE_LINE + "\n", ONE_LINE + "\n\n", ONE_LINE.rstrip("\n"), ONE_LINE + "x",
                                  " " + ONE_LINE, "<answer>\n1\n</answer>\n"])
def test_strict_same_as_notebook_on_single_line_sections(text):
    assert strict_format()([text]) == [unsloth.strict_format(text)]


@pytest.mark.parametrize("text", ["<reasoning>x</reasoning>\n<answer>y</answer>", "<reasoning>x</reasoning><answer>y</answer> z",
                                  " <reasoning>x</reasoning><answer>y</answer>", "<reasoning>x</reasoning>a<answer>y</answer>",
                                  "<reasoning>x</reasoning>  \n\t<answer></answer>", "<answer>y</answer>"])
def test_soft_same_as_notebook_without_newlines_inside_blocks(text):
    assert soft_format()([text]) == [unsloth.soft_format(text)]


def test_parameters():
    think = MULTI_LINE.replace("reasoning", "think")
    assert strict_format()([think]) == [0.0]
    assert strict_format(reasoning_tag="think")([think]) == [0.5]
    assert soft_format(reasoning_tag="think", value=1.0, wrong_value=-1.0)([think, "x"]) == [1.0, -1.0]
    assert strict_format(trailing_newline=False)([ONE_LINE.rstrip("\n"), ONE_LINE + "\n\n  "]) == [0.5, 0.5]
    assert strict_format(trailing_newline=False)([ONE_LINE + "x"]) == [0.0]
    # R1-style templates write "<think>\n" into the prompt: the completion starts inside the reasoning
    opened = "Natalia sold 24.\n</think>\n<answer>\n72\n</answer>\n"
    assert strict_format(reasoning_tag="think", opened_in_prompt=True)([opened]) == [0.5]
    assert soft_format(reasoning_tag="think", opened_in_prompt=True)([opened]) == [0.5]
    assert soft_format(reasoning_tag="think")([opened]) == [0.0]
    with pytest.raises(ValueError, match="reasoning_tag must be a tag name"):
        strict_format(reasoning_tag="a b")
    with pytest.raises(ValueError, match="must differ"):
        soft_format(reasoning_tag="x", answer_tag="x")


def test_pathological_input_is_fast():
    import time

    text = "<reasoning>\n" + "\n</reasoning>\n<answer>\n" * 2000 + "x" * 100_000
    start = time.perf_counter()
    strict_format()([text])
    soft_format()([text])
    assert time.perf_counter() - start < 5.0
