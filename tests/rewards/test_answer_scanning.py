"""The word patterns of the answer grammar (:mod:`grpo_rewards.answers.scanning`) find what the plain
case-insensitive pattern with word boundaries finds, at the same places, with the same groups."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grpo_rewards.answers import extraction, prose
from grpo_rewards.answers.scanning import words

# characters a boundary or a case can hinge on: letters of the words in both cases, the letters re.IGNORECASE
# folds onto ASCII ones (İ ı ſ K), word and non-word neighbours, CJK
ALPHABET = "abutsoiAIBUTSOİıſKk_1 \t\n.,'é但是不过но"
TEXT = st.text(alphabet=ALPHABET, max_size=40)

CASES = [  # (bounded, unbounded, the plain pattern they stand for)
    (["but", "so", "sub", "it", "is"], (), r"(?i:\b(?:but|so|sub|it|is))"),
    ([w + r"\b" for w in ("but", "о", "no", "но")], ("但是", "不过"), r"(?i:\b(?:but|о|no|но)\b|但是|不过)"),
    ([("first", "but"), ("second", "bus"), ("third", "it")], (), r"(?i:\b(?:(?P<first>but)|(?P<second>bus)|(?P<third>it)))"),
]


def _found(pattern: re.Pattern[str], text: str) -> list[tuple[tuple[int, int], tuple[bool, ...]]]:
    return [(m.span(), tuple(bool(g) for g in m.groupdict().values())) for m in pattern.finditer(text)]


@pytest.mark.parametrize(("bounded", "unbounded", "plain"), CASES)
@settings(max_examples=150, deadline=None)
@given(text=TEXT)
def test_words_finds_what_the_plain_pattern_finds(bounded: list, unbounded: tuple, plain: str, text: str) -> None:
    assert _found(re.compile(words(bounded, unbounded)), text) == _found(re.compile(plain), text)


@given(text=TEXT, start=st.integers(0, 40))
@settings(max_examples=150, deadline=None)
def test_a_search_from_a_position_sees_the_character_before_it(text: str, start: int) -> None:
    fast, plain = re.compile(words(["but", "so"])), re.compile(r"(?i:\b(?:but|so))")
    assert [m.span() for m in fast.finditer(text, start)] == [m.span() for m in plain.finditer(text, start)]


def test_the_grammar_patterns_read_as_before() -> None:
    """The grammar's patterns written with :func:`words` against their plain forms, on sentences that use them."""
    plain_phrase = re.compile(
        r"\b(?:(?P<final>final[ \t]+answer)|(?P<answer>answer))(?:[ \t*_]+(?:is|was|would be|will be)"
        r"|[ \t*_]*(?:(?P<eq>=)|is:))[ \t*_:]*(?P<rest>\S[^\n]*)", re.IGNORECASE)
    plain_revision = re.compile(
        r"\b(?:but|however|actually|wait|on second thought|after (?:re-?)?checking|that(?:'s| is| was) wrong|"
        r"на самом деле|но)\b|但是|实际上", re.IGNORECASE)
    texts = ["The final answer is 12.", "ANSWER = 3", "the answer: 4", "xanswer is 5", "Final\tanswer is: 7",
             "My answer was 3, but after rechecking it is 4", "Wait, THAT'S WRONG. Actually 5.", "но ответ 3",
             "但是答案是 3", "butter is not but", "İt is", "1but 2 but"]
    for text in texts:
        assert _read(extraction._PHRASE, text) == _read(plain_phrase, text), text
        fast = [m.span() for m in prose._REVISION.finditer(text) if m.group() in _revision_words(m.group())]
        assert fast == [m.span() for m in plain_revision.finditer(text)], text


def _read(pattern: re.Pattern[str], text: str) -> list[tuple]:
    """Each answer phrase: where, which word (a named group says which, not what), the sign and the rest."""
    return [(m.span(), bool(m.group("final")), bool(m.group("answer")), m.group("eq"), m.group("rest"))
            for m in pattern.finditer(text)]


def _revision_words(found: str) -> set[str]:
    """The revision words the plain pattern of the test above lists (the grammar's list is longer)."""
    listed = {"but", "however", "actually", "wait", "on second thought", "на самом деле", "но", "但是", "实际上"}
    low = found.lower()
    return {found} if low in listed or low.startswith("after") or low.startswith("that") else set()
