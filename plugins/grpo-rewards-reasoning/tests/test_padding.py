"""cosine_scaled's length is what padding cannot buy (``measure = "content"``, the default): a wrong answer
padded with blank lines, runs of spaces or dots, or a sentence said again and again scores as the same answer
unpadded, in characters and in token ids; more words still make a longer answer."""

from __future__ import annotations

import re

import pytest

from grpo_rewards import reward

WRONG = "<think>\nHalf of 48 is 24, and 48 + 24 is 71.\n</think>\n<answer>\n71\n</answer>"
RIGHT = WRONG.replace("71", "72")
_TOKEN = re.compile(r"\w+|[^\w\s]|\s")


def ids(text: str) -> list[int]:
    """A word-level stand-in for a tokenizer: one id per word, mark or whitespace character (stable ids)."""
    return [sum(map(ord, t)) for t in _TOKEN.findall(text)]


def padded(text: str, how: str) -> str:
    think = text.index("\n</think>")
    fill = {
        "blank lines": "\n" * 3000,
        "dots": "." * 4000,
        "one sentence again and again": " Let me check that again." * 200,
        "one line in Chinese again and again": "\n让我再检查一遍" * 300,
        "one line in Arabic again and again": "\nدعني أتحقق مرة أخرى" * 200,
    }.get(how)
    if how == "spaces between words":
        return text.replace(" ", " " * 30)
    return text[:think] + fill + text[think:]


HOW = ["blank lines", "dots", "one sentence again and again", "one line in Chinese again and again",
       "one line in Arabic again and again", "spaces between words"]
PADDED_ONCE = {  # the padding's content said once: what a padded answer is worth
    "dots": ".",
    "one sentence again and again": " Let me check that again.",
    "one line in Chinese again and again": "\n让我再检查一遍",
    "one line in Arabic again and again": "\nدعني أتحقق مرة أخرى",
}


def once(text: str, how: str) -> str:
    fill = PADDED_ONCE.get(how, "")
    think = text.index("\n</think>")
    return text[:think] + fill + text[think:]


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("answer", [WRONG, RIGHT])
def test_padding_buys_nothing_in_characters(how, answer):
    fn = reward("cosine_scaled", max_len=400)
    plain, pad = fn([once(answer, how), padded(answer, how)], answer=["72", "72"])
    assert pad <= plain + 1e-12 if answer is WRONG else pad >= plain - 1e-12  # padding never pays
    assert pad == pytest.approx(plain, abs=5e-3)  # and costs at most a character or two
    raw = reward("cosine_scaled", max_len=400, measure="raw")
    raw_plain, raw_pad = raw([once(answer, how), padded(answer, how)], answer=["72", "72"])
    assert (raw_pad > raw_plain) if answer is WRONG else (raw_pad < raw_plain)  # what the peers' schedule does


@pytest.mark.parametrize("how", HOW)
def test_padding_buys_nothing_in_token_ids(how):
    fn = reward("cosine_scaled", max_len=100)
    texts = [once(WRONG, how), padded(WRONG, how)]
    plain, pad = fn(texts, answer=["72", "72"], completion_ids=[ids(t) for t in texts])
    assert pad <= plain + 1e-12
    raw = reward("cosine_scaled", max_len=100, measure="raw")
    raw_plain, raw_pad = raw(texts, answer=["72", "72"], completion_ids=[ids(t) for t in texts])
    assert raw_pad > raw_plain


def test_more_words_still_make_a_longer_answer():
    fn = reward("cosine_scaled", max_len=400)
    longer = WRONG.replace("71.", "71. Then I add the two months again, which gives the same total.")
    short, long_ = fn([WRONG, longer], answer=["72", "72"])
    assert long_ > short
    right_short, right_long = fn([RIGHT, longer.replace("71", "72")], answer=["72", "72"])
    assert right_short > right_long


def test_measure_is_checked():
    with pytest.raises(ValueError, match="measure must be one of content, raw"):
        reward("cosine_scaled", measure="tokens")
