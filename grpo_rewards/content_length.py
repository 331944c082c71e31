"""The length of a completion that padding cannot buy, for length-shaped rewards.

A reward that pays for length (``cosine_scaled`` pays a wrong answer more when it is longer,
``length_window`` pays for reaching a word count) is gamed most cheaply by padding: blank
lines, runs of spaces, a sentence said a hundred times, a wall of dots. :func:`content_text`
removes what padding adds:

1. the text is cut into pieces after each run of sentence ends (``.``, ``!``, ``?``, ``;``,
   their full-width forms ``。！？；``) and line breaks;
2. each piece's whitespace runs become one space, and a piece that is blank or that
   already occurred (a repeated sentence or line, compared without the spaces at its ends)
   is dropped;
   a piece is compared without the list number or step label it starts with (``2. Check.`` repeats
   ``1. Check.``; a list number alone is no content);
3. in what is left, a run repeated three or more times in a row is kept once: one
   character (``.....``, ``-----``), a phrase of up to six words (``ha ha ha ha``,
   ``let me check again let me check again ...``), of up to 24 Chinese, Japanese or
   Korean characters (``检查一遍检查一遍...``) or, inside a run of 24 or more characters written
   without spaces (a loop is a long run), of up to 16 other characters (``abcabcabc...``). A longer
   phrase said over and over is a repeated piece when it ends a sentence or a line.

:func:`content_length` is the number of characters left. In token ids (the ``completion_ids``
column, which the trainer passes) :func:`content_token_count` is the smaller of two counts
that padding cannot inflate: the ids left after step 3 is applied to the ids themselves
(a run of newline or space tokens, a phrase of up to 8 tokens said again and again), and
the ids times the share of the text's characters that are content (which also removes
sentences repeated at a distance and spaces spread between words). What padding cannot hide
is new text: a completion made longer with words it has not used before is longer.
"""

from __future__ import annotations

import operator
import re
from itertools import repeat

_PIECE_END = re.compile(r"(?<=[.!?;\n。！？；])(?![.!?;\n。！？；])")  # after a run of sentence ends
_SPACE = re.compile(r"\s+")
_SAME_CHAR = re.compile(r"(.)\1{2,}", re.DOTALL)
_SAME_WORDS = re.compile(r"(?<![^ ])((?:[^ ]+ ){1,6}?)\1{2,}")  # on text whose spaces are single, ending in one
_SAME_CJK = re.compile(r"([\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]{2,24}?)\1{2,}")
_SAME_RUN = re.compile(r"(\S{2,16}?)\1{2,}")  # a loop written without spaces: "abcabcabc", "1+1+1+1+"
_LONG_RUN = re.compile(r"[^ ]{24,}")  # in a text whose whitespace is single spaces
_LIST_START = r"[ \t]*(?:(?:step|item)[ \t]*)?(?:\d{1,4}|[a-z])[.):]"
_LIST_FIRST_LINE = re.compile(_LIST_START, re.IGNORECASE)
_LIST_LINE = re.compile(r"\n" + _LIST_START, re.IGNORECASE)  # a literal first: found without trying each position
#: a list number or step label at a piece's start: numbered padding repeats the piece after it
_ENUMERATOR = re.compile(r"^(?:(?:step|item)[ \t]*)?(?:\d{1,4}|[a-z])[.):][ \t]*", re.IGNORECASE)
_REPEATED_IDS = re.compile(r"(.{1,8}?)\1{2,}", re.DOTALL)  # token ids as characters: a phrase of up to 8 tokens


def _repeats_words(words: list[str]) -> bool:
    """Whether some phrase of up to six words occurs three times in a row: for a phrase of ``k`` words, ``2k``
    words in a row each equal to the word ``k`` after it (computed in C: ``map`` and ``bytes``)."""
    return any(b"\x01" * (2 * k) in bytes(map(operator.eq, words, words[k:])) for k in range(1, 7))


def content_text(text: str) -> str:
    """``text`` without its padding (module docs): whitespace runs, repeated pieces and repeated short units."""
    pieces = _PIECE_END.split(text)
    spaced = list(map(_SPACE.sub, repeat(" "), pieces))
    keys = map(str.strip, spaced)
    if _LIST_FIRST_LINE.match(text) or _LIST_LINE.search(text):  # a numbered list or steps: "2. Check." is "Check."
        keys = map(_ENUMERATOR.sub, repeat(""), keys)
    kept = dict(zip(keys, spaced))  # first occurrence of each piece, in order
    kept.pop("", None)  # blank pieces, and list numbers alone ("1.", "2.", ...)
    joined = _SAME_CHAR.sub(r"\1", "".join(kept.values()).strip())
    if _repeats_words(joined.split(" ")):
        joined = _SAME_WORDS.sub(r"\1", joined + " ")[:-1]
    joined = _SAME_CJK.sub(r"\1", joined)
    first = _LONG_RUN.search(joined)  # a loop is a long run; most texts have none
    return joined if first is None else joined[:first.start()] + _LONG_RUN.sub(_without_loops, joined[first.start():])


def _without_loops(run: re.Match[str]) -> str:
    """A long run of characters without spaces, each unit repeated three or more times in a row kept once."""
    return _SAME_RUN.sub(r"\1", run.group())


def content_length(text: str) -> int:
    """The number of characters of :func:`content_text`."""
    return len(content_text(text))


def content_token_count(ids: list[int], text: str) -> float:
    """The content of a completion in token ids (module docs): at most ``len(ids)``, padding left out."""
    if not ids:
        return 0.0
    symbols = "".join(map(chr, (i % 0x110000 for i in ids)))  # one character per id, to reuse the regex
    collapsed = len(_REPEATED_IDS.sub(r"\1", symbols))
    share = content_length(text) / len(text) if text else 1.0
    return float(min(collapsed, len(ids) * share))
