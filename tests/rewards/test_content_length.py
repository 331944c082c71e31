"""grpo_rewards.content_length: the length padding cannot buy, in characters and in token ids."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grpo_rewards.content_length import content_length, content_text, content_token_count

TEXT = "Half of 48 is 24. Then 48 + 24 = 72, so she sold 72 clips."


@pytest.mark.parametrize("padding", ["\n" * 5000, " Let me check." * 500, "\n让我再检查一遍" * 300, "-" * 10_000,
                                     " ha" * 1000, "!" * 200])
def test_padding_adds_at_most_one_copy_of_itself(padding):
    unit = {"\n" * 5000: "", "-" * 10_000: "-", "!" * 200: "!"}.get(padding, padding[: len(padding) // 300 or 1])
    once = content_length(TEXT + unit * (2 if unit in {" ha"} else 1))
    assert content_length(TEXT + padding) <= once
    assert content_length(TEXT + padding * 2) == content_length(TEXT + padding)


def test_runs_of_spaces_between_words_are_one_space():
    assert content_length(TEXT.replace(" ", "   \t ")) == content_length(TEXT) == len(TEXT)


def test_new_text_is_counted():
    more = TEXT + " Next month she sold 10 more, which makes 82 in all."
    assert content_length(more) > content_length(TEXT) + 40
    assert content_length("第一步：48 的一半是 24。第二步：48 + 24 = 72。") > 20


def test_whitespace_is_one_space_and_repeats_are_kept_once():
    assert content_text("a\n\n\nb    c") == "a b c"
    assert content_text("Wait. Wait. Wait. So 72.") == "Wait. So 72."
    assert content_text("Answer: 7!!!!!!!") == "Answer: 7!"


_TOKEN = re.compile(r"\w+|[^\w\s]|\s")


def ids(text: str) -> list[int]:
    return [sum(map(ord, t)) for t in _TOKEN.findall(text)]


@pytest.mark.parametrize("padding", ["\n" * 3000, " " * 3000, " Let me check." * 300, "." * 3000])
def test_token_count_leaves_padding_out(padding):
    padded = TEXT + padding
    assert content_token_count(ids(padded), padded) <= len(ids(TEXT)) + 4
    assert content_token_count(ids(TEXT), TEXT) == pytest.approx(len(ids(TEXT)), rel=0.1)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300), st.lists(st.integers(0, 300_000), max_size=200))
def test_never_more_than_the_raw_length(text, token_ids):
    assert 0 <= content_length(text) <= len(text)
    assert 0 <= content_token_count(token_ids, text) <= len(token_ids)
