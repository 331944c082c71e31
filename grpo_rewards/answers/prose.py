"""How an answer written in prose is read: revisions, negations, disjunctions and ranges, option letters.

:mod:`grpo_rewards.answers.extraction` owns the order of the methods; this module owns the reading of
the words around a number when no tag, box, ``####`` or answer line marks it:

* **revisions**: a later "but", "actually", "wait", "after checking", "on second thought" (and
  their Spanish, French, German, Portuguese, Italian, Russian and Chinese equivalents) withdraws
  an answer announced before it: "I first thought the answer was 12, but after checking, the
  total is 13" answers 13 (:func:`after_revision`);
* **negations**: a number said not to be the answer is skipped ("13, not 12"; "12 is wrong")
  (:func:`negated`);
* **bounds**: "at least 12", "more than 12", "≥ 12" bound the answer without giving it: a hedge
  (:func:`bounded`);
* **quoted claims**: a sentence in quotation marks ("he said \"the answer is 12\"") is someone's claim,
  not the completion's answer (:func:`quoted_spans`);
* **postscripts**: a ``P.S.`` line, or a ``Note:`` line after the conclusion, is an aside: its numbers
  are not the answer (:func:`before_postscript`);
* **disjunctions and ranges**: "12 or 13", "between 10 and 14", "from 10 to 14", "10 to 14",
  "12–13", "12 (or 13 if ...)" are a hedge, read as the text itself (which is no number), unless both numbers are equal
  ("0.5 or 1/2" is one answer restated) (:func:`hedged_span`);
* **option letters**: after an option list ("A: 7, B: 12", "(A) 7 (B) 12", one option a
  line), "I pick B", "the answer is (B)." or "option B" answers with the letter: a
  :class:`Choice`, a ``str`` equal to the letter that also carries the chosen option's text,
  so that a reward with a letter reference compares the letter and one with a number
  reference compares the option (:func:`chosen_letter`, :func:`options`).
"""

from __future__ import annotations

import bisect
import re

from grpo_rewards.answers.numbers import NUMBER_AT, parse_literal
from grpo_rewards.answers.scanning import words

_REVISION = re.compile(words(  # (?i:\b(?:but|however|...)\b|但是|...), found quickly
    [w + r"\b" for w in (
        "but", "however", "actually", "wait", "instead", "hmm", "oops", "correction", "on second thought",
        "after (?:re-?)?checking", "after review(?:ing)?", "let me (?:re-?check|recheck|recompute|correct)",
        "i made a mistake", "that(?:'s| is| was) wrong", "pero", "en realidad", "mais", "en fait", "aber",
        "eigentlich", "porém", "mas", "però", "invece", "но", "на самом деле")],
    ("但是", "不过", "其实", "实际上", "等等"),
))
_NEGATION_BEFORE = re.compile(
    r"(?:\b(?:not|never|isn't|wasn't|rather than|instead of|except|no longer|nicht|pas|no es|não é)[ \t]*|不是[ \t]*)\Z",
    re.IGNORECASE,
)
_NEGATION_HINT = re.compile(r"(?i:not|never|n't|than|instead|except|longer|nicht|pas|no es|não|不是)")
_NEGATION_AFTER = re.compile(
    r"[ \t]*(?:is|was)?[ \t]*(?:wrong|incorrect|not (?:right|correct|the answer)|a mistake)\b", re.IGNORECASE)
_DISJUNCTION = re.compile(r"\.?[ \t]*(?:[,(][ \t]*)?(?:(?:or|to)[ \t]+|[–—][ \t]*)(?:maybe[ \t]+|perhaps[ \t]+|possibly[ \t]+)?",
                          re.IGNORECASE)
_RANGE_BEFORE = re.compile(r"\b(?:between|from|either)[ \t]+\Z", re.IGNORECASE)
_RANGE_AND = re.compile(r"[ \t]+and[ \t]+", re.IGNORECASE)
_FILLERS = ("maybe", "perhaps", "possibly")
_JOINER_HINT = re.compile(r"\b(?:or|to|and)\b|[–—]")
_BOUND_BEFORE = re.compile(
    r"(?:\b(?:at[ \t]+least|at[ \t]+most|more[ \t]+than|less[ \t]+than|fewer[ \t]+than|greater[ \t]+than|up[ \t]+to|"
    r"no[ \t]+more[ \t]+than|no[ \t]+less[ \t]+than|a[ \t]+minimum[ \t]+of|a[ \t]+maximum[ \t]+of)|[≥≤])[ \t]*\Z",
    re.IGNORECASE)
_BOUND_HINT = re.compile(r"(?i:least|most|than|up to|imum)|[≥≤]")
#: a claim in quotation marks (a sentence, not a lone quoted value): someone's answer, not the completion's
_QUOTED = re.compile(r"\"[^\"\n]{0,400}?[A-Za-z][^\"\n]{0,400}?\"|“[^”\n]{0,400}?[A-Za-z][^”\n]{0,400}?”")
_CONCLUSION = re.compile(words([w + r"\b" for w in (
    "therefore", "thus", "hence", "so", "in conclusion", "in total", "altogether", "the answer", "final answer")]))
_POSTSCRIPT = re.compile(
    r"^[ \t*_>#(]*(?:P\.?[ \t]?S\.?(?=[\s:,])|N\.B\.|(?:Note|Remark|Side note|Fun fact|Aside|Bonus|Also note|Disclaimer)"
    r"(?=[ \t]*[:,.—–-]))", re.MULTILINE | re.IGNORECASE)
_PS = re.compile(r"^[ \t*_>#(]*P\.?[ \t]?S\.?(?=[\s:,])", re.MULTILINE | re.IGNORECASE)
_CHOICE = re.compile(
    r"(?:\bI(?:'d| would| will|'ll)?[ \t]+(?:pick|choose|select|go with)|\b(?i:option|choice))"
    r"[ \t*_]*(?:option[ \t]+|choice[ \t]+)?\(?(?P<letter>[A-J])\)?(?![\w'])",
)
_LETTER = re.compile(r"\A[ \t*_]*\(?(?P<letter>[A-J])\)?[ \t*_]*[.!]?[ \t*_]*\Z")
_OPTION = re.compile(r"(?:(?<=[\s,;])|\A)\(?(?P<letter>[A-J])(?:\)|:|\.(?=[ \t]))[ \t]*(?P<content>[^\n,;()]*)")
MAX_OPTION_CHARS = 80


class Choice(str):
    """An option letter chosen in prose (``"B"``); ``option`` is the chosen option's text (``"12"``), if listed."""

    option: str | None

    def __new__(cls, letter: str, option: str | None = None) -> Choice:
        self = super().__new__(cls, letter)
        self.option = option
        return self

    def __reduce__(self) -> tuple:
        return (Choice, (str(self), self.option))


def after_revision(text: str, start: int) -> int | None:
    """Where the last revision after ``start`` ends (module docs), or ``None`` when nothing revises it."""
    last = None
    for match in _REVISION.finditer(text, start):
        last = match
    return None if last is None else last.end()


def negated(text: str, match: re.Match[str]) -> bool:
    """Whether the number ``match`` of ``text`` is said not to be the answer ("not 12", "12 is wrong")."""
    window = text[max(0, match.start() - 24):match.start()].rstrip("$(\\")  # "not $-0.1$"
    if _NEGATION_HINT.search(window) and _NEGATION_BEFORE.search(window) is not None:
        return True
    return _NEGATION_AFTER.match(text, match.end()) is not None


def bounded(text: str, match: re.Match[str]) -> bool:
    """Whether the number ``match`` of ``text`` is a bound, not a value ("at least 12", "more than 12", "≥ 12")."""
    return bound_start(text, match.start()) is not None


def bound_start(text: str, start: int) -> int | None:
    """Where the bound ("at least", "≥"; a ``$`` between) before what starts at ``start`` (a number, a box) starts,
    or ``None`` when no bound precedes it."""
    offset = max(0, start - 25)
    window = text[offset:start].rstrip("$ \t")
    if _BOUND_HINT.search(window) is None:
        return None
    found = _BOUND_BEFORE.search(window)
    return None if found is None else offset + found.start()


def quoted_spans(text: str) -> list[tuple[int, int]]:
    """The spans of the claims in quotation marks of ``text`` (module docs), in order."""
    if '"' not in text and "“" not in text:
        return []
    return [m.span() for m in _QUOTED.finditer(text)]


def inside(spans: list[tuple[int, int]], position: int) -> bool:
    """Whether ``position`` lies inside one of ``spans`` (sorted, disjoint)."""
    if not spans:
        return False
    k = bisect.bisect_right(spans, (position, 1 << 62)) - 1
    return k >= 0 and spans[k][0] < position < spans[k][1]


def before_postscript(text: str) -> str:
    """``text`` without its postscript: from a ``P.S.`` line, or from a ``Note:``/``Remark:`` line that follows
    a conclusion ("Therefore ...", "So ...", "the answer ..."), to the end. A number there is an aside."""
    if "S" not in text and "s" not in text and "N" not in text and "n" not in text:
        return text
    if _POSTSCRIPT.search(text) is None:  # no line opens an aside (P.S. is one): nothing to cut
        return text
    ps = _PS.search(text)
    conclusion = _CONCLUSION.search(text)
    note = _POSTSCRIPT.search(text, conclusion.end()) if conclusion else None
    cut = min((m.start() for m in (ps, note) if m is not None), default=None)
    if cut is None or not text[:cut].strip():
        return text
    return text[:cut]


def _same(a: str, b: str) -> bool:
    x, y = parse_literal(a), parse_literal(b)
    return x is not None and y is not None and x.value == y.value and x.percent == y.percent


def hedged_span(text: str, match: re.Match[str]) -> str | None:
    """The disjunction or range around the number ``match`` ("12 or 13", "between 10 and 14") as written,
    or ``None`` when the number stands alone or both ends are one value restated."""
    near = text[match.end():match.end() + 16].lower()
    head = text[max(0, match.start() - 60):match.start()]
    if not _JOINER_HINT.search(near) and not _JOINER_HINT.search(head[-16:].lower()):
        return None  # no "or", "to", "and" next to the number: it stands alone
    follow = _DISJUNCTION.match(text, match.end())
    if follow is None and _RANGE_BEFORE.search(head):  # "between 10 and 14"
        follow = _RANGE_AND.match(text, match.end())
    if follow:
        other = NUMBER_AT.match(text, follow.end())
        if other and not _same(match.group(), other.group()):
            return text[match.start():other.end()].strip()
    words = head.split()[-5:]
    if words and head[-1:] in " \t" and words[-1].lower() in _FILLERS:
        words.pop()
    if len(words) >= 2 and words[-1] in ("–", "—") and head[-1:] in " \t":
        words[-1] = "to"  # "12 – 13": a range
    if len(words) < 2 or head[-1:] not in " \t" or words[-1].lower() not in ("or", "to", "and"):
        return None
    joiner = words.pop().lower()
    first = words[-1].rstrip(",")
    ranged = len(words) >= 2 and words[-2].lower() in ("between", "from", "either")
    if parse_literal(first) is None or _same(first, match.group()) or (joiner == "and" and not ranged):
        return None
    return (head[head.rfind(words[-1]):] + match.group()).strip()


def alternative_after(text: str, value: str, end: int) -> int | None:
    """Where an alternative to ``value`` that follows at ``end`` ends ("$12$ or 13", "$12$ (or 13 if ...)"), or
    ``None`` when none follows or it restates ``value`` ("$0.5$, or 1/2")."""
    follow = _DISJUNCTION.match(text, end)
    other = NUMBER_AT.match(text, follow.end()) if follow else None
    if other is None:
        return None
    value = value.strip().strip("$")
    return None if _same(value, other.group()) else other.end()


def range_start(text: str, match: re.Match[str]) -> bool:
    """Whether the number ``match`` opens a range or a disjunction ("between 10", "10 or", "from 10 to")."""
    follow = _DISJUNCTION.match(text, match.end()) or _RANGE_AND.match(text, match.end())
    return bool(follow and NUMBER_AT.match(text, follow.end()))


def options(text: str) -> dict[str, str]:
    """The options listed in ``text`` by letter (``{"A": "7", "B": "12"}``); empty without two of them."""
    found: dict[str, str] = {}
    for match in _OPTION.finditer(text):
        content = match.group("content").strip()
        number = NUMBER_AT.match(content)
        if number:
            content = number.group()
        else:
            content = re.split(r"(?<=[^\d])[.!?](?:\s|\Z)|\s{2,}", content, maxsplit=1)[0].strip()
        if content and len(content) <= MAX_OPTION_CHARS:
            found.setdefault(match.group("letter"), content)
    return found if len(found) >= 2 else {}


def is_option_list(line: str) -> bool:
    """Whether ``line`` (the rest of a line that opened with ``A:``) lists further options (``B: 12``)."""
    return re.search(r"(?:\A|[\s,;])\(?[B-J](?:\)|:)", line) is not None


def letter_answer(value: str) -> str | None:
    """The option letter ``value`` is when it is one alone (``B``, ``(B)``, ``**B**``, ``B.``), else ``None``."""
    match = _LETTER.match(value)
    return match.group("letter") if match else None


def may_choose(text: str) -> bool:
    """Whether ``text`` holds a word that can choose an option (a cheap test before the regex)."""
    return ("pick" in text or "choose" in text or "select" in text or "go with" in text or "ption" in text
            or "hoice" in text)


def chosen_letter(text: str) -> tuple[int, str] | None:
    """The last option letter chosen in words ("I pick B", "the answer is (B)") as ``(position, letter)``."""
    last = None
    for match in _CHOICE.finditer(text):
        last = match
    return None if last is None else (last.start(), last.group("letter"))


def choice(text: str, letter: str) -> Choice:
    """``letter`` as a :class:`Choice` carrying its option's text when ``text`` lists it."""
    return Choice(letter, options(text).get(letter))
