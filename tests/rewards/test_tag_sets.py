"""Format rewards take any tag set: the Unsloth Qwen3 notebook's layout (``<start_working_out>`` ...
``<end_working_out>`` ``<SOLUTION>`` ... ``</SOLUTION>``) through ``final_answer_format`` (match_format_exactly)
and ``xml_count`` in ``count`` mode (match_format_approximately), term for term on any sequence of the
notebook's pieces, and the defaults that differ from the notebook on purpose."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grpo_rewards import reward

from . import unsloth_reference as unsloth

QWEN3 = {"reasoning_start": "<start_working_out>", "reasoning_end": "<end_working_out>",
         "answer_start": "<SOLUTION>", "answer_end": "</SOLUTION>"}
EOS = unsloth.QWEN3_EOS
EXACTLY = {**QWEN3, "value": 3.0, "eos": EOS, "end": "line"}
APPROXIMATELY = {**QWEN3, "mode": "count", "per_tag": 0.5, "per_bad_tag": -1.0, "opened_in_prompt": True,
                 "check_order": False}
PIECES = ["<start_working_out>", "<end_working_out>", "<SOLUTION>", "</SOLUTION>", EOS, "\n", " ", "72", "x",
          "<SOLUTION", "</SOLUTION> ", "ок", "答"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=12).map("".join))
def test_the_notebooks_two_format_rewards_term_for_term(text):
    assert reward("final_answer_format", **EXACTLY)([text]) == [unsloth.match_format_exactly(text)]
    assert reward("xml_count", **APPROXIMATELY)([text]) == [unsloth.match_format_approximately(text)]


LAYOUT = "Half of 48 is 24.<end_working_out><SOLUTION>72</SOLUTION>"


def test_final_answer_format_by_default_ends_at_the_answer():
    fn = reward("final_answer_format", **QWEN3, eos=EOS)
    texts = [LAYOUT, LAYOUT + f"\n{EOS}\n", LAYOUT + "\nHope this helps!", LAYOUT + " Hope this helps!"]
    assert fn(texts) == [1.0, 1.0, 0.0, 0.0]
    assert reward("final_answer_format", **QWEN3, eos=EOS, end="line")(texts) == [1.0, 1.0, 1.0, 0.0]


def test_final_answer_format_needs_the_reasoning_closed_first_and_an_answer():
    fn = reward("final_answer_format", **QWEN3)
    assert fn(["<SOLUTION>72</SOLUTION>", "<SOLUTION>72</SOLUTION><end_working_out>",
               "x<end_working_out><SOLUTION></SOLUTION>", "x<end_working_out>\n<SOLUTION>\n答案是七十二\n</SOLUTION>\n"]) \
        == [0.0, 0.0, 0.0, 1.0]


def test_final_answer_format_default_tags_and_linear_time():
    import time

    fn = reward("final_answer_format", reasoning_tag="think")
    assert fn(["<think>\nx\n</think>\n<answer>\n72\n</answer>\n", "<answer>72</answer>"]) == [1.0, 0.0]
    hostile = "</think>" + "<answer>x</answer> y" * 20_000
    start = time.process_time()
    assert fn([hostile]) == [0.0]
    assert reward("final_answer_format", reasoning_tag="think", end="line")([hostile]) == [0.0]
    assert time.process_time() - start < 1.0


def test_count_mode_checks_order_by_default():
    fn = reward("xml_count", **{**APPROXIMATELY, "check_order": True})
    assert fn([LAYOUT, "</SOLUTION>72<SOLUTION><end_working_out>x", "<SOLUTION>72</SOLUTION>x<end_working_out>"]) \
        == [1.5, -3.0, -3.0]
    notebook = reward("xml_count", **APPROXIMATELY)
    assert notebook(["</SOLUTION>72<SOLUTION><end_working_out>x"]) == [1.5]  # what the notebook pays backwards


def test_strict_and_soft_format_take_the_markers():
    strict = reward("strict_format", **QWEN3, value=1.0)
    soft = reward("soft_format", **QWEN3, value=1.0, opened_in_prompt=True)
    text = "\nHalf of 48 is 24.\n<end_working_out>\n<SOLUTION>\n72\n</SOLUTION>\n"
    assert strict(["<start_working_out>" + text, text]) == [1.0, 0.0]
    assert soft([LAYOUT, "<SOLUTION>72</SOLUTION>"]) == [1.0, 0.0]


@pytest.mark.parametrize(("params", "message"), [
    ({"answer_start": " <SOLUTION>"}, "answer_start must be a marker"),
    ({"answer_start": "<S>", "answer_end": "</S><S>"}, "answer_start '<S>' occurs inside answer_end"),
    ({"reasoning_end": "<SOLUTION>", "answer_start": "<SOLUTION>"}, "occurs inside"),
])
@pytest.mark.parametrize("name", ["strict_format", "soft_format", "xml_count", "final_answer_format"])
def test_bad_markers_are_one_line_errors(name, params, message):
    with pytest.raises(ValueError, match=message):
        reward(name, **params)


def test_final_answer_format_bad_parameters():
    with pytest.raises(ValueError, match="end must be one of text, line"):
        reward("final_answer_format", end="file")
