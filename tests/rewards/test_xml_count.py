"""xml_count: Unsloth's count_xml term for term, configurable tags, and the lenient mode."""

import pytest

from grpo_rewards.builtins.xml_count import xml_count

from . import unsloth_reference as unsloth

PERFECT = "<reasoning>\nStep 1.\nStep 2.\n</reasoning>\n<answer>\n72\n</answer>\n"
CASES = [
    PERFECT,
    PERFECT.rstrip("\n"),  # the notebook's quirk: no "\n</answer>\n", so the whole text is charged
    PERFECT + "trailing words",
    PERFECT.replace("<reasoning>\n", "<reasoning>"),
    PERFECT + PERFECT,
    "<answer>\n72\n</answer>\n",
    "just text",
    "",
    "<reasoning>\n\n</reasoning>\n<answer>\n\n</answer>\n\n\n",
]


@pytest.mark.parametrize("text", CASES)
def test_unsloth_mode_is_count_xml(text):
    assert xml_count()([text]) == pytest.approx([unsloth.count_xml(text)], abs=1e-12)


def test_values():
    assert xml_count()([PERFECT]) == [0.5]
    assert xml_count()([PERFECT.rstrip("\n")]) == pytest.approx([0.5 + 0.001 - 0.001 * len(PERFECT.rstrip("\n"))])
    assert xml_count()([PERFECT + "abc"]) == pytest.approx([0.5 - 0.003 - 0.003])
    assert xml_count()(["no tags"]) == [0.0]


def test_think_tags_and_weights():
    think = PERFECT.replace("reasoning", "think")
    assert xml_count()([think]) == [0.25]  # only the answer tags count with the default tags
    assert xml_count(reasoning_tag="think")([think]) == [0.5]
    assert xml_count(reasoning_tag="think", per_tag=1.0)([think]) == [4.0]
    assert xml_count(per_trailing_char=0.01)([PERFECT + "ab"]) == pytest.approx([0.5 - 0.02 - 0.02])


def test_lenient_mode():
    fn = xml_count(mode="lenient")
    assert fn(["<reasoning>x</reasoning><answer>72</answer>"]) == [0.5]
    assert fn([PERFECT.rstrip("\n")]) == [0.5]  # no newline games
    assert fn([PERFECT + "  \n"]) == [0.5]  # trailing whitespace is free
    assert fn([PERFECT + "abc"]) == pytest.approx([0.5 - 0.003])
    assert fn([PERFECT + PERFECT]) == [0.0]


def test_chat_messages():
    assert xml_count()([[{"role": "assistant", "content": PERFECT}]]) == [0.5]


@pytest.mark.parametrize(
    "params, message",
    [
        ({"mode": "strict"}, "unknown mode 'strict'"),
        ({"reasoning_tag": "<think>"}, "reasoning_tag must be a tag name"),
        ({"answer_tag": ""}, "answer_tag must be a tag name"),
        ({"reasoning_tag": "answer"}, "must differ"),
    ],
)
def test_bad_parameters(params, message):
    with pytest.raises(ValueError, match=message):
        xml_count(**params)


# Tags out of place, each against the same text with ``<>`` written ``()`` (no tag at all, same length)
OUT_OF_ORDER = [
    "</answer>\n72\n<answer>\n</reasoning>\nStep 1.\n<reasoning>\n",  # everything backwards
    "</reasoning>\nStep 1.\n<reasoning>\n</answer>\n72\n<answer>\n",  # each closing tag before its opening tag
    "<answer>\n72\n</answer>\n<reasoning>\nStep 1.\n</reasoning>\n",  # the answer block first
    "</reasoning>\n</answer>\n\n<reasoning>\n<answer>\n72\n",  # closers, then openers
]


@pytest.mark.parametrize("mode", ["unsloth", "lenient"])
@pytest.mark.parametrize("text", OUT_OF_ORDER)
def test_tags_out_of_order_earn_no_more_than_no_tags(mode, text):
    untagged = text.replace("<", "(").replace(">", ")")
    fn = xml_count(mode=mode)
    assert fn([text]) == fn([untagged]) == [0.0]
    assert xml_count(mode=mode, check_order=False)([text])[0] > 0.0  # what counting alone pays


@pytest.mark.parametrize("text", OUT_OF_ORDER + CASES)
def test_without_the_order_check_unsloth_mode_is_count_xml_on_any_input(text):
    assert xml_count(check_order=False)([text]) == pytest.approx([unsloth.count_xml(text)], abs=1e-12)


def test_a_missing_tag_costs_only_its_own_term():
    no_open = PERFECT.replace("<reasoning>\n", "")  # a chat template that opens the block in the prompt
    assert xml_count()([no_open]) == [0.375]
    assert xml_count(mode="lenient")([no_open]) == [0.375]
    # a tag in place still counts next to one out of place: the reasoning block is fine, the answer is not
    half = "<reasoning>\nStep 1.\n</reasoning>\n</answer>\n72\n<answer>\n"
    assert xml_count(mode="lenient")([half]) == [0.25]


def test_tags_in_other_languages_and_the_chat_form_keep_their_order():
    text = "<reasoning>\n先算 6 * 7。\n</reasoning>\n<answer>\n42\n</answer>\n"
    backwards = "</answer>\n42\n<answer>\n</reasoning>\n先算 6 * 7。\n<reasoning>\n"
    fn = xml_count()
    assert fn([text, [{"role": "assistant", "content": backwards}]]) == [0.5, 0.0]
