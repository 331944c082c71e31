"""Answer extraction shared by every reward: find the final answer inside a completion.

Methods, tried in this order by ``auto``:

``answer_tag``     the content of the last non-empty ``<answer>...</answer>``; an unclosed
                   last tag counts (the answer runs to the next ``<answer>`` or the end)
``gsm8k``          the rest of the line after the last ``####`` (GSM8K's solution format), or
                   the next line when that is empty; ``auto``
                   skips it when a ``\\boxed{}`` comes after it (a markdown ``####`` heading)
``boxed``          the content of the last ``\\boxed{...}`` / ``\\fbox{...}`` (nested braces
                   matched; an unbalanced last box gives no answer); ``\\boxed 5`` too
``answer_prefix``  the rest of the last line starting ``Answer:``, ``A:`` or ``Final answer:``
                   (markdown bold and heading marks around it are ignored; the answer may
                   be on the next line)
``last_number``    the last number in the text (``-1,234.5``, ``3/4``, ``$12``, ``1e-3``);
                   a hyphen between digits (``2023-05-01``, ``10-3``) is not a minus sign
``regex``          the first group (or whole match) of the last match of a custom ``pattern``

Every method strips the answer; an empty extraction (``<answer></answer>``) is no answer.
When the text has an ``<answer>`` tag, ``auto`` uses the tag alone: a completion cut
off right after ``<answer>`` has no answer, rather than the last number of its reasoning.
"""

from __future__ import annotations

import re
from collections import deque

METHODS = ("auto", "answer_tag", "gsm8k", "boxed", "answer_prefix", "last_number", "regex")
AUTO_ORDER = ("answer_tag", "gsm8k", "boxed", "answer_prefix", "last_number")

_ANSWER_OPEN = re.compile(r"<answer>", re.IGNORECASE)
_ANSWER_CLOSE = re.compile(r"</answer>", re.IGNORECASE)
_GSM8K = re.compile(r"####[ \t]*(?:\n[ \t]*)?([^\n]*)")
_BOXED = re.compile(r"\\(?:boxed|fbox)(?:\s*\{|\s+([^\s{}\\$]+))")
_BRACES = re.compile(r"[{}]")
_PREFIX = re.compile(
    r"^[ \t*#>_-]*(?:final answer|answer|a)[ \t*_]*[:：][ \t*_]*(?:\n[ \t]*)?(\S[^\n]*)",
    re.IGNORECASE | re.MULTILINE,
)
NUMBER = (
    r"(?<![\w.])(?:[-+−][ \t]?)?(?:\\?\$)?[ \t]?(?:\d{1,3}(?:,\d{3})+(?![\d])|\d+)(?:\.\d+)?"
    r"(?:[eE][-+]?\d+)?(?:/\d+(?:\.\d+)?)?"
    r"|(?<![\w.])[-+−]?\.\d+"
)
_NUMBER = re.compile(NUMBER, re.ASCII)


def _last(pattern: re.Pattern[str], text: str) -> re.Match[str] | None:
    tail = deque(pattern.finditer(text), maxlen=1)
    return tail[0] if tail else None


def _answer_tag(text: str) -> str | None:
    if "<a" not in text and "<A" not in text:  # fast path: no tag can start here
        return None
    opens = [m.end() for m in _ANSWER_OPEN.finditer(text)]
    for k in range(len(opens) - 1, -1, -1):
        start = opens[k]
        stop = opens[k + 1] - len("<answer>") if k + 1 < len(opens) else len(text)
        close = _ANSWER_CLOSE.search(text, start, stop)
        value = text[start:close.start() if close else stop].strip()
        if value:
            return value
    return None


def _last_gsm8k(text: str) -> re.Match[str] | None:
    at = text.rfind("####")
    return None if at < 0 else _GSM8K.match(text, at)


def _gsm8k(text: str) -> str | None:
    found = _last_gsm8k(text)
    return found.group(1).strip() if found else None


def _boxed(text: str) -> str | None:
    found = _last(_BOXED, text)
    if found is None:
        return None
    if found.group(1) is not None:  # \boxed 5
        return found.group(1)
    depth = 1
    for brace in _BRACES.finditer(text, found.end()):
        depth += 1 if brace.group() == "{" else -1
        if depth == 0:
            return text[found.end():brace.start()].strip()
    return None  # unbalanced: no answer rather than a guess


def _answer_prefix(text: str) -> str | None:
    found = _last(_PREFIX, text)
    return found.group(1).rstrip(" \t*_") or None if found else None


def _last_number(text: str) -> str | None:
    found = _last(_NUMBER, text)
    return found.group().strip() if found else None


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


def check_extraction(method: str, pattern: str | None) -> re.Pattern[str] | None:
    """Validate an ``extract``/``pattern`` pair as a reward factory receives it; the compiled pattern."""
    if method not in METHODS:
        raise ValueError(f"unknown extract method {method!r}; choose one of {', '.join(METHODS)}")
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
        return _auto(text)
    try:
        extractor = _EXTRACTORS[method]
    except KeyError:
        raise ValueError(f"unknown extract method {method!r}; choose one of {', '.join(METHODS)}") from None
    return extractor(text) or None


def _auto(text: str) -> str | None:
    if _ANSWER_OPEN.search(text):  # a tagged answer decides, even an empty one: no fallback to stray numbers
        return _answer_tag(text)
    found = _last_gsm8k(text)
    if found and found.group(1).strip() and "\\boxed" not in text[found.end():] and "\\fbox" not in text[found.end():]:
        return found.group(1).strip()
    for extractor in (_boxed, _answer_prefix, _last_number):
        value = extractor(text)
        if value:
            return value
    return None
