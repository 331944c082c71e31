"""Answer extraction shared by every reward: find the final answer inside a completion.

Reasoning is not the answer: every method (``regex`` too) first drops the reasoning block
(:mod:`grpo_rewards.answers.reasoning`: ``<think>...</think>`` and the other reasoning tags,
everything before a lone ``</think>``, an unclosed ``<think>`` to the end), so an ``<answer>``
drafted inside ``<think>`` never wins.

Methods, tried in this order by ``auto``:

``answer_tag``     the content of the non-empty ``<answer>...</answer>`` tag (attributes allowed:
                   ``<answer class="final">``; Markdown emphasis ``**12**`` peeled); an unclosed
                   tag counts (the answer runs to the next ``<answer>`` or the end); a tag named
                   in a sentence ("in <answer> tags", a quoted ``"<answer>"``) is no answer; a
                   sentence inside the tag is read for the answer it announces
``gsm8k``          the rest of the line after the last ``####`` (GSM8K's solution format), or
                   the next line when that is empty. ``auto`` takes it only when it is a
                   number literal, a list of them, an option letter, math (``(0, 1]``, ``$x$``)
                   or the last line of the text: a Markdown heading ``#### Step 1: ...`` is not
                   an answer
``boxed``          the content of the ``\\boxed{...}`` / ``\\fbox{...}`` (nested braces matched;
                   an unbalanced last box gives no answer); ``\\boxed 5`` too; ``$...$``
                   inside a box is text (``\\boxed{12 $ and $13}`` is ``12 \\text{ and }13``)
``answer_prefix``  the answer announced in words, strongest first: ``Final answer: X`` (or a
                   ``Final Answer`` heading with X on the next line, or "the final answer is X"),
                   then ``Answer: X`` / "the answer is X", then a line starting ``A: X``
                   (capital A, Q/A style; ``a: 3`` is a variable, not an answer). The last of
                   the strongest kind wins. Markdown bold/heading marks are ignored. After
                   "is", X must be a math span (``$...$``, ``\\(...\\)``, ``\\boxed{}``) or a
                   number literal ("the answer is correct" announces nothing)
``last_number``    the last number literal in the text that is not negated ("13, not 12"), as the
                   disjunction or range it belongs to ("12 or 13": no number; see
                   :mod:`grpo_rewards.answers.prose`) (:data:`grpo_rewards.answers.numbers.NUMBER_IN_TEXT`:
                   ``-1,234.5``, ``1 000 000``, ``3/4``, ``\\frac{1}{3}``, ``$12``, ``1e-3``, ``50%``);
                   list markers, dates, times, ranges and powers are not numbers
``regex``          the first group (or whole match) of the last match of a custom ``pattern``
                   (on the text without its reasoning: the pattern decides the rest)

``auto`` prefers a ``\\boxed{}`` to an answer announced in words, except a "Final answer"
announced after the last box (``\\boxed{255} ... Final Answer: The final answer is $10,455$``):
the box was an intermediate result. Explicit answers of different kinds that differ are a hedge
(their list): a tag and a box or ``####`` outside it, a ``####`` line and a box, a "Final answer"
before the last box and the box (unless a revision came between them), a box and the answer
committed to after a revision that follows it; a box inside a disjunction or after a bound ("12 or
\\boxed{13}", "at least \\boxed{12}") is the hedge as written. Before the answer in words and the last
number are read, a postscript (:func:`grpo_rewards.answers.prose.before_postscript`) is cut off;
claims in quotation marks are skipped; ``answer = 9 * 2`` (program of thought) is the value of its
arithmetic (:mod:`grpo_rewards.answers.arithmetic`).

Several final answers are hedging, not an answer. One rule for every explicit marker: when a
completion (outside its reasoning) holds several non-empty ``<answer>`` tags, several boxes,
several ``####`` lines, or several ``Final answer:`` (or ``Answer:``) lines whose contents differ
(whitespace aside; one number restated, ``12`` and ``12.0`` or ``twelve``, is one answer), the
method returns them all as one list, ``"a, b, c"`` (duplicates dropped, first form and order kept),
never the last one alone. In prose the last committed answer counts: an answer announced in a
sentence ("the answer is 12") gives way to the one committed to after a revision ("but after
checking, the total is 13"); negated numbers are skipped; a disjunction or range is no number.
An option letter chosen in words ("I pick B", "the answer is (B)") is a
:class:`grpo_rewards.answers.prose.Choice` carrying its option's text
(:func:`compared_answer`). Every form and its outcome: ``docs/answers.md``.
A list is no number, so ``<answer>40</answer><answer>41</answer><answer>42</answer>``
is wrong against ``42`` for every reward that wants a number; ``math_equivalence``
compares the list as a set, so ``\\boxed{2} ... \\boxed{3}`` answers "find all
solutions" with gold ``2, 3``. The same answer tagged or boxed twice is one answer.

Every method but ``regex`` reads unambiguous decimal commas as points (``numbers.decimal_points``); an
ambiguous one (``3,5`` without a decimal-comma context) is read as written: no number, never ``3`` or ``5``.

Every method strips the answer; an empty extraction (``<answer></answer>``) is no answer.
When the text has an ``<answer>`` tag, ``auto`` uses the tag alone: a completion cut
off right after ``<answer>`` has no answer, rather than the last number of its reasoning.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable

from grpo_rewards.answers import prose
from grpo_rewards.answers.arithmetic import evaluate
from grpo_rewards.answers.boxes import box_contents, iter_boxes, last_box
from grpo_rewards.answers.numbers import (
    NUMBER_AT,
    NUMBER_IN_TEXT,
    ambiguous_comma_around,
    decimal_points,
    format_number,
    is_list_marker,
    parse_literal,
    widen,
)
from grpo_rewards.answers.reasoning import strip_reasoning
from grpo_rewards.answers.scanning import words

METHODS = ("auto", "answer_tag", "gsm8k", "boxed", "answer_prefix", "last_number", "regex")
AUTO_ORDER = ("answer_tag", "gsm8k", "boxed", "answer_prefix", "last_number")

_ANSWER_OPEN = re.compile(r"<answer(?:\s[^<>]{0,200})?>", re.IGNORECASE)
_ANSWER_CLOSE = re.compile(r"</answer>", re.IGNORECASE)
_QUOTES = ("`", '"', "'", "“", "‘")
#: what follows a tag that is named in a sentence, not used: "tags", "and </answer> tags"; a quoted tag ("`<answer>`")
#: is named too
_QUOTES_AFTER = ("`", '"', "'", "”", "’")
_MENTION = re.compile(r"[ \t]*(?:and|or|&)?[ \t]*(?:</answer>[`'\"”’]?[ \t]*)?tags?\b", re.IGNORECASE)
_GSM8K = re.compile(r"####[ \t]*(?:\n[ \t]*)?([^\n]*)")
_MARKS = "[ \t*#>_-]*"
_FOREIGN_FINAL = (r"respuesta[ \t]+final|r[ée]ponse[ \t]+finale|endg[üu]ltige[ \t]+antwort|resposta[ \t]+final|"
                  r"risposta[ \t]+finale|окончательный[ \t]+ответ|итоговый[ \t]+ответ|最终答案|最終答案")
_FOREIGN_ANSWER = r"respuesta|r[ée]ponse|antwort|resposta|risposta|ответ|答案"
#: lower-case words whose presence makes the (slower) patterns of other languages worth running
FOREIGN_WORDS = ("respuesta", "réponse", "reponse", "antwort", "resposta", "risposta", "ответ", "答案")


def _foreign(text: str) -> bool:
    """Whether ``text`` may announce an answer in another language (cheap substring tests before the patterns)."""
    if not text.isascii():
        low = text.lower()
        return any(word in low for word in FOREIGN_WORDS)
    return "espuesta" in text or "eponse" in text or "ntwort" in text or "esposta" in text or "isposta" in text


def _prefix_pattern(final: str, answer: str) -> re.Pattern[str]:
    # kind 0: "final answer", kind 1: "answer", kind 2: "A" (Q/A style, capital only)
    return re.compile(
        rf"^{_MARKS}(?:(?P<final>{final})|(?P<answer>{answer})|(?P<qa>(?-i:A)))"
        r"[ \t*_]*(?:[:：][ \t*_]*(?:\n[ \t]*)?(?P<rest>\S[^\n]*)"
        r"|(?(qa)(?!)|[ \t*_]*\n(?:[ \t]*\n)*[ \t]*(?P<next>\S[^\n]*)))",
        re.IGNORECASE | re.MULTILINE,
    )


_PREFIX = _prefix_pattern(r"final[ \t]+answer", "answer")
_PREFIX_FOREIGN = _prefix_pattern(_FOREIGN_FINAL, _FOREIGN_ANSWER)
_PHRASE = re.compile(  # \b(?:(?P<final>final[ \t]+answer)|(?P<answer>answer))..., case-insensitive
    words([("final", r"final[ \t]+answer"), ("answer", "answer")])
    + r"(?i:[ \t*_]+(?:is|was|would be|will be)|[ \t*_]*(?:(?P<eq>=)|is:))[ \t*_:]*(?P<rest>\S[^\n]*)",
)
_PHRASE_FOREIGN = re.compile(
    rf"(?:\b|(?=[最答]))(?:(?P<final>{_FOREIGN_FINAL})|(?P<answer>{_FOREIGN_ANSWER}))"
    r"(?:[ \t*_]+(?:est|es|ist|é|è|будет|—)(?!\w)|[ \t*_]*(?:=|是|为|為))[ \t*_:]*(?P<rest>\S[^\n]*)",
    re.IGNORECASE,
)
_COMMITMENT = re.compile(  # \b(?:answer|total|...)(?:'s| is| ...)..., case-insensitive
    words(["answer", "total", "result", "sum", "value", "number", "count", "it", "that", "this"])
    + r"(?i:'s|[ \t]+(?:is|was|would be|will be|comes to|equals|should be|must be))[ \t*_:]*(?P<rest>\S[^\n]*)",
)
_MATH_SPAN = re.compile(r"\$\$(.+?)\$\$|\$((?:\\\$|[^$\n])+?)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]")


def _last(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    tail = deque(pattern.finditer(text), maxlen=1)
    return tail[0] if tail else None


_SPACE = re.compile(r"\s+")
LIST_SEPARATOR = ", "


def _key(value: str) -> object:
    """What makes two final answers the same answer: their number (``12`` and ``12.0``, ``twelve``), else their
    text without whitespace."""
    number = parse_literal(value) if len(value) < 200 else None
    return ("number", number.value, number.percent) if number is not None else _SPACE.sub("", value)


def _one_answer(values: list[str]) -> str | None:
    """The answer given by ``values`` (each a final answer, stripped): the one answer, or, when they
    differ (whitespace aside; one number restated in another form is the same answer), all of them as a
    list ``"a, b, c"`` in order, duplicates dropped."""
    if len(values) == 1:  # the usual case: one answer, nothing to compare
        return values[0] or None
    distinct: dict[object, str] = {}
    for value in dict.fromkeys(values):  # one answer repeated is compared once
        if value:
            distinct.setdefault(_key(value), value)
    return LIST_SEPARATOR.join(distinct.values()) or None


_EMPHASIS = re.compile(r"^(\*\*|__|\*)(?=\S)(.*?)(?<=\S)\1$", re.DOTALL)


def _peel_emphasis(value: str) -> str:
    """``value`` without Markdown emphasis around it (``**12**``, ``__12__``, ``*12*``)."""
    if value[:1] not in ("*", "_"):  # the usual answer: no emphasis to peel
        return value
    for _ in range(3):
        m = _EMPHASIS.match(value)
        if not m or not m.group(2).strip("*_ \t\n"):  # "____" is a blank to fill, not emphasis
            break
        value = m.group(2).strip()
    return value


def _answer_tag(text: str) -> str | None:
    if "<a" not in text and "<A" not in text:  # fast path: no tag can start here
        return None
    return _tag_answer(_ANSWER_OPEN.split(text))


def _tag_answer(pieces: list[str]) -> str | None:
    """The answer of the ``<answer>`` tags of a text split at its opening tags (:func:`_answer_tag`)."""
    if len(pieces) == 1:
        return None
    last = len(pieces) - 1
    values: list[str] = []
    if last == 1:  # the usual case: one tag
        runs: Iterable[tuple[str, str, bool]] = ((pieces[0][-1:], pieces[1], True),)
    else:  # each (character before, part, last) once: a tag repeated is read once
        runs = dict.fromkeys((pieces[k - 1][-1:], pieces[k], k == last) for k in range(1, last + 1))
    for before, part, final in runs:
        split = _ANSWER_CLOSE.split(part, 1)
        content = split[0].strip()
        if (before in _QUOTES and part[:1] in _QUOTES_AFTER) or _MENTION.match(content if len(split) == 1 else split[1]):
            continue  # "put it in `<answer>` tags", "<answer> and </answer> tags": the tag named, not used
        if len(split) == 1 and not final and not content:
            continue
        values.append(_tag_content(_peel_emphasis(content)))
    return _one_answer(values)


def _outside_tags(text: str) -> str:
    """``text`` without its ``<answer>`` tags and their contents (an unclosed tag runs to the end)."""
    pieces = _ANSWER_OPEN.split(text)
    return " ".join([pieces[0], *(split[1] for part in pieces[1:] if len(split := _ANSWER_CLOSE.split(part, 1)) == 2)])


def _tag_content(content: str) -> str:
    """An answer tag's content as its answer: a sentence inside the tag (``<answer>The answer is 12.</answer>``)
    is read for the answer it announces; anything else is the answer as written."""
    if len(content) > 2000 or parse_literal(content) is not None or ("nswer" not in content and "NSWER" not in content):
        return content
    announced = _announced(content)
    return announced[2] if announced else content


def _last_gsm8k(text: str) -> re.Match[str] | None:
    at = text.rfind("####")
    return None if at < 0 else _GSM8K.match(text, at)


def _gsm8k(text: str) -> str | None:
    """Every ``####`` line's answer: one answer, or the list of those that differ (a hedge)."""
    if "####" not in text:
        return None
    return _one_answer([m.group(1).strip() for m in _GSM8K.finditer(text)])


def _boxed(text: str) -> str | None:
    contents = box_contents(text)
    return _one_answer(contents) if contents else None


def _clean(value: str) -> str:
    """An announced answer without Markdown emphasis around it."""
    value = value.strip().strip("*_").strip()
    if value[:1] in "\"“" and value[-1:] in "\"”" and len(value) > 2:  # the answer is "12"
        value = value[1:-1].strip()
    return value


_SENTENCE = re.compile(r"[^.,;:!?\n]*")
_DIGITS = re.compile(r"[-+−]?\d+")
_CODE_COMMENT = re.compile(r"[ \t]*#.*\Z")


def _after_is(rest: str, assigned: bool = False) -> str | None:
    """The answer that follows "the answer is": a math span, a ``\\boxed{}``, a number literal (in digits or in
    words), an option letter; a disjunction or range of numbers ("12 or 13", "between 10 and 14") as written."""
    rest = _clean(rest)
    if rest.startswith("\\boxed") or rest.startswith("\\fbox"):
        return _boxed(rest)
    if assigned:  # "answer = 9 * 2" (program of thought): the value of the arithmetic, never its first number
        expression = _CODE_COMMENT.sub("", rest).rstrip(" \t;")
        value = evaluate(expression)
        if value is not None:
            return format_number(value)
    span = _MATH_SPAN.match(rest)
    if span:
        other = prose.alternative_after(rest, span.group(), span.end())
        return rest[:other if other is not None else span.end()]  # "$12$ or 13": a hedge, as written
    ranged = _DASH_RANGE.match(rest)
    if ranged:
        return ranged.group()  # "12–13": a range, a hedge
    number = NUMBER_AT.match(rest)
    if number and parse_literal(number.group()) is not None:
        return prose.hedged_span(rest, number) or number.group()
    if (digits := _DIGITS.match(rest)) and (ambiguous := ambiguous_comma_around(rest, 0, digits.end())):
        return ambiguous.group()  # "3,5" outside a decimal-comma context: a decimal or a list, as written
    sentence = _SENTENCE.match(rest).group().strip()
    letter = prose.letter_answer(sentence)
    if letter:
        return letter
    if sentence and parse_literal(sentence) is not None:  # "twelve", "USD 40"
        return sentence
    words = sentence.split(" ", 1)
    if words[0].lower() in ("between", "either", "from") and len(words) > 1:
        inner = NUMBER_IN_TEXT.search(words[1])
        if inner and prose.range_start(words[1], inner):
            return sentence  # "between 10 and 14": a hedge, no number
    return None  # "the answer is correct": words after "is" are not taken for an answer


def _assigned(match: re.Match[str]) -> bool:
    """Whether an answer phrase assigns its value (``answer = ...``, as code does)."""
    return bool(match.groupdict().get("eq"))


def _prefix_value(match: re.Match[str]) -> str | None:
    rest = match.group("rest")
    if rest is None:
        return _clean(match.group("next")) or None
    if match.group("qa") and prose.is_option_list(rest):
        return None  # "A: 7, B: 12": an option list, not an answer
    value = _clean(rest.rstrip(" \t*_"))
    inner = _PHRASE.match(value) or _PHRASE_FOREIGN.match(value)  # "Final answer: The final answer is $7$."
    if inner:
        return _after_is(inner.group("rest"))
    return value or None


def _kind(match: re.Match[str]) -> int:
    return 0 if match.group("final") else 1 if match.group("answer") else 2


def _committed_after(text: str, start: int) -> str | None:
    """The answer committed to in ``text[start:]``: an answer phrase or "the total is N", not negated."""
    found = None
    quoted = prose.quoted_spans(text)
    for pattern in (_PHRASE, _PHRASE_FOREIGN, _COMMITMENT):
        for match in pattern.finditer(text, start):
            if prose.inside(quoted, match.start()):
                continue
            value = _after_is(match.group("rest"), _assigned(match))
            if value and (found is None or match.start() > found[0]):
                found = (match.start(), value)
    return found[1] if found else None


def _announced(text: str) -> tuple[int, int, str] | None:
    """The answer announced in words as ``(kind, -position, value)``: the strongest kind, then the last.

    Answer lines (``Final answer: X``, ``Answer: X``) are explicit markers: several of the strongest kind
    that differ are a hedge (their list). An answer announced in a sentence ("the answer is X") is prose:
    a later revision ("but after checking, the total is Y") replaces it with the answer committed to after
    the revision. A text with the word "answer" is read in English; the other languages' answer words and
    an option chosen in words ("I pick B") are read in a text without it.
    """
    english = "nswer" in text or "NSWER" in text
    foreign = choosing = False
    if not english:  # the word "answer" decides; other languages and choices in words are read without it
        foreign, choosing = _foreign(text), prose.may_choose(text)
        if not foreign and not choosing and "A" not in text:
            return None  # fast path: nothing announces an answer
    best: tuple[int, int, str] | None = None  # (kind, -position, value): lowest kind, then last
    lines: dict[int, list[str]] = {}
    read: dict[str, str | None] = {}  # an answer line repeated is read once
    for pattern in (_PREFIX, _PREFIX_FOREIGN) if foreign else (_PREFIX,):
        for match in pattern.finditer(text):
            line = match.group()
            value = read[line] if line in read else read.setdefault(line, _prefix_value(match))
            if value:
                kind = _kind(match)
                lines.setdefault(kind, []).append(value)
                if best is None or (kind, -match.start()) <= best[:2]:
                    best = (kind, -match.start(), value)
    prose_best: tuple[int, int, str] | None = None
    quoted = prose.quoted_spans(text)
    for pattern in ((_PHRASE,) if english else ()) + ((_PHRASE_FOREIGN,) if foreign else ()):
        for match in pattern.finditer(text):
            if prose.inside(quoted, match.start()):
                continue  # 'he said "the answer is 12"': someone's claim
            value = _after_is(match.group("rest"), _assigned(match))
            if value and (prose_best is None or (_kind(match), -match.start()) <= prose_best[:2]):
                prose_best = (_kind(match), -match.start(), value)
    chosen = prose.chosen_letter(text) if choosing else None
    if chosen and (prose_best is None or (1, -chosen[0]) <= prose_best[:2]):
        prose_best = (1, -chosen[0], chosen[1])
    if prose_best is not None and (best is None or prose_best[:2] <= best[:2]):
        revised = prose.after_revision(text, -prose_best[1] + 1)
        if revised is not None:
            later = _committed_after(text, revised)
            if later:
                return (prose_best[0], -revised, later)
        return prose_best
    if best is not None and len(lines.get(best[0], ())) > 1:
        return (best[0], best[1], _one_answer(lines[best[0]]) or best[2])
    return best


def _answer_prefix(text: str) -> str | None:
    best = _announced(text)
    return best[2] if best else None


_DIGIT = re.compile(r"\d")
_ALNUM = re.compile(r"[^\W_]")
_ONE_BOX = re.compile(r"\\(?:boxed|fbox)\s*\{[^{}]*\}")
_HEADING = re.compile(r"(?:[^\W\d_]{2}|\d+[.)][ \t]+[^\W\d_]{2})")  # "#### Step 1", "#### 1. Add": a heading
_BOX_HEDGE_BEFORE = re.compile(r"[\d$}][ \t]*[,(]?[ \t]*(?:or|to|–|—)(?:[ \t]+(?:maybe|perhaps|possibly))?[ \t]*\$?\Z",
                               re.IGNORECASE)
_DASH_RANGE = re.compile(r"(?<![\w.])\d[\d.,]{0,30}[ \t]?[–—][ \t]?\d[\d.,]{0,30}")
_EDGE = 128  # a match this close to a window's start may be the tail of a longer number: the next window reads it
_OVERLAP = 4096  # how far past its own end a window reads, so that a number running over its end is whole


def _tail_numbers(text: str, want: int = 8) -> list[re.Match[str]]:
    """The last ``want`` number literals of ``text``, read window by window from its end (each window four times
    the last, reading only its new part) until they are found: linear in the text, and a long completion's
    numbers before its end are never parsed. A part with no digit is skipped without the number pattern."""
    if len(text) <= 4096:  # the usual completion: one pass
        return list(deque(NUMBER_IN_TEXT.finditer(text), maxlen=want))
    found: list[re.Match[str]] = []
    end, size, n = len(text), 4096, len(text)
    while end > 0 and len(found) < want:
        start = max(0, end - size)
        if _DIGIT.search(text, start, end) is not None:
            stop = n if end + _OVERLAP >= n else end + _OVERLAP
            part = [m for m in NUMBER_IN_TEXT.finditer(text, start, stop)
                    if (not start or m.start() >= start + _EDGE) and m.start() < end and (stop == n or m.end() < stop)]
            found = part + found
        end = start + _EDGE if start else 0
        size *= 4
    return found[-want:]


def _last_number(text: str) -> str | None:
    if "–" in text or "—" in text:  # "12–13": a range of numbers, which the number pattern reads as none
        ranged = _last(_DASH_RANGE, text)
        if ranged and not any(ch.isdigit() for ch in text[ranged.end():]):
            return ranged.group()
    matches = deque(_tail_numbers(text))
    shift = max(0, len(text) - 65536)
    quoted = prose.quoted_spans(text[shift:] if shift else text) if matches else []
    while matches:
        found = matches.pop()
        if is_list_marker(text, found) or prose.negated(text, found) or prose.inside(quoted, found.start() - shift):
            continue
        ambiguous = ambiguous_comma_around(text, found.start(), found.end())
        if ambiguous:  # "3,5" outside a decimal-comma context: a decimal or a list, never its 3 or its 5
            return ambiguous.group()
        bound = prose.bound_start(text, found.start())
        if bound is not None:  # "at least 12": a bound, not the answer
            return text[bound:found.end()]
        start, end = widen(text, found)
        if (start, end) != found.span():
            found = NUMBER_AT.match(text, start) or found
        return prose.hedged_span(text, found) or text[start:end].strip()
    return None


_EXTRACTORS = {
    "answer_tag": _answer_tag,
    "gsm8k": _gsm8k,
    "boxed": _boxed,
    "answer_prefix": _answer_prefix,
    "last_number": _last_number,
}


def compile_pattern(pattern: str | re.Pattern[str]) -> re.Pattern[str]:
    """``pattern`` compiled with DOTALL; a clear ``ValueError`` when it is not a valid regex."""
    if isinstance(pattern, re.Pattern):
        return pattern
    try:
        return re.compile(pattern, re.DOTALL)
    except re.error as exc:
        raise ValueError(f"pattern {pattern!r} is not a valid regular expression: {exc}") from None


def check_extraction(method: str, pattern: str | None, *, extra: tuple[str, ...] = ()) -> re.Pattern[str] | None:
    """Validate an ``extract``/``pattern`` pair as a reward factory receives it; the compiled pattern.

    ``extra``: methods of the reward's own accepted beside :data:`METHODS` (``math_equivalence``'s ``none``).
    """
    if method not in METHODS and method not in extra:
        raise ValueError(f"unknown extract method {method!r}; choose one of {', '.join((*METHODS, *extra))}")
    if method == "regex":
        if not pattern:
            raise ValueError("extract = 'regex' needs a 'pattern'")
        return compile_pattern(pattern)
    if pattern is not None:
        raise ValueError(f"'pattern' is only used with extract = 'regex' (extract is {method!r})")
    return None


def extract_answer(text: str, method: str = "auto", *, pattern: str | re.Pattern[str] | None = None) -> str | None:
    """The final answer in ``text`` by ``method``, or ``None`` when there is none.

    ``auto`` tries the methods in :data:`AUTO_ORDER` and returns the first hit, so
    tagged answers and GSM8K-style solutions both work without configuration.
    """
    text = strip_reasoning(text)
    if method != "regex":  # a custom pattern reads the text as written
        text = decimal_points(text)  # "1.234,5"; "3,5" in a decimal-comma context
    if method == "regex":
        if pattern is None:
            raise ValueError("extract = 'regex' needs a 'pattern'")
        compiled = compile_pattern(pattern)
        found = _last(compiled, text)
        if found is None:
            return None
        value = found.group(1) if compiled.groups else found.group(0)
        return (value or "").strip() or None
    if method == "auto":
        value = _auto(text)
    else:
        try:
            extractor = _EXTRACTORS[method]
        except KeyError:
            raise ValueError(f"unknown extract method {method!r}; choose one of {', '.join(METHODS)}") from None
        value = extractor(text) or None
    if value and len(value) <= 8 and len(core := value.strip(" \t*_().!")) == 1 and "A" <= core <= "J":
        # "(B)", "**B**": the option letter, carrying its option's text when the completion lists it
        return prose.choice(text, core)
    return value


def compared_answer(answer: str, reference: str) -> str:
    """The text of ``answer`` to compare with ``reference``: a chosen option letter (:class:`Choice`) is compared
    as its option's text ("12") against a reference that is no option letter, as the letter otherwise."""
    if type(answer) is prose.Choice and answer.option and prose.letter_answer(reference) is None:
        return answer.option
    return answer


def _gsm8k_value(text: str, found: re.Match[str]) -> str | None:
    """The answer of one ``####`` line when it reads as one: a number literal, or the last line; not a heading."""
    value = _clean(found.group(1))
    if not value:
        return None
    announced = _PREFIX.match(value)
    if announced:  # "#### Final answer: 7"
        value = _prefix_value(announced) or ""
    if (parse_literal(value) is not None or prose.letter_answer(value) or not text[found.end():].strip()
            or not _HEADING.match(value)  # math ("#### 2x + 1", "#### (0, 1]"), not "#### Step 1: add"
            or ("," in value and all(parse_literal(part) is not None for part in value.split(",")))):  # a list
        return value or None
    return None


def _gsm8k_answer(text: str) -> str | None:
    """The ``####`` answer for ``auto``: every ``####`` line that reads as an answer (several that differ are a
    hedge, their list); a ``\\boxed{}`` that differs makes the pair a hedge (:func:`_auto`)."""
    found = _last_gsm8k(text)
    if not found:
        return None
    value = _gsm8k_value(text, found)
    if value is None or text.count("####") == 1:
        return value
    return _one_answer([v for m in _GSM8K.finditer(text) if (v := _gsm8k_value(text, m))])


def _auto(text: str) -> str | None:
    pieces = _ANSWER_OPEN.split(text) if "<a" in text or "<A" in text else None
    if pieces is not None and len(pieces) > 1:  # a tagged answer decides, even an empty one: no fallback to stray numbers
        value = _tag_answer(pieces)
        if value and ("\\boxed" in text or "\\fbox" in text or "####" in text):
            outside = _outside_tags(text)  # a box or #### outside the tags is a second explicit answer
            others = [v for v in (_gsm8k_answer(outside), _boxed(outside)) if v]
            return _one_answer([value, *others]) if others else value
        return value
    value = _gsm8k_answer(text)
    if value:
        boxed = _boxed(text) if "\\boxed" in text or "\\fbox" in text else None
        return _one_answer([value, boxed]) if boxed else value  # "#### 12" and "\\boxed{13}": a hedge
    value = _boxed(text)
    if value:
        if "inal" in text or "INAL" in text:  # cheap test first: no "final", nothing to do
            announced = _announced(text)
            if announced and announced[0] == 0 and _ALNUM.search(announced[2]):  # not "**Final Answer**\n\\["
                box_start = last_box(text).start()
                if -announced[1] > box_start:
                    return announced[2]  # "Final answer: X" after the last box: the box was an intermediate result
                revised = prose.after_revision(text, -announced[1] + 1)
                # "The final answer is: $\\boxed{A}$": the line is the box, one answer
                boxed_there = not _ALNUM.search(_ONE_BOX.sub("", announced[2])) and announced[2] != value
                if not boxed_there and (revised is None or revised > box_start):  # a final answer before the box, not withdrawn, that
                    return _one_answer([value, announced[2]])  # differs: a hedge
        box = last_box(text)
        hedge = _BOX_HEDGE_BEFORE.search(text, max(0, box.start() - 40), box.start())
        if hedge:  # "12 or \\boxed{13}": a disjunction, as written
            return text[hedge.start():box.start()] + value
        bound = prose.bound_start(text, box.start())
        if bound is not None:  # "at least \\boxed{12}": a bound, not the answer
            return text[bound:box.start()].rstrip("$ \t") + " " + value
        _, end, bare = deque(iter_boxes(text), maxlen=1)[0]
        closing = end + (bare is None)
        other = prose.alternative_after(text, value, closing)
        if other is not None:  # "\\boxed{12} or 13"
            return value + text[closing:other]
        revised = prose.after_revision(text, box.end())
        later = _committed_after(text, revised) if revised is not None else None
        return _one_answer([value, later]) if later else value  # "\\boxed{12}. Wait, the answer is 13.": a hedge
    text = prose.before_postscript(text)  # a postscript's numbers are an aside, not the answer
    for extractor in (_answer_prefix, _last_number):
        value = extractor(text)
        if value:
            return value
    return prose.letter_answer(text) if len(text) <= 16 else None  # a completion that is only "(B)"
