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
