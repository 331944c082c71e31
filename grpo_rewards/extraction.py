"""Answer extraction shared by every reward: find the final answer inside a completion.

Methods, tried in this order by ``auto``:

``answer_tag``     the content of the last ``<answer>...</answer>`` (an unclosed last tag counts)
``gsm8k``          the text after the last ``####`` (GSM8K's solution format)
``boxed``          the content of the last ``\\boxed{...}`` (nested braces are matched)
``answer_prefix``  the rest of the last line starting ``Answer:``, ``A:`` or ``Final answer:``
``last_number``    the last number in the text (``-1,234.5``, ``3/4``, ``$12``)
``regex``          the first group (or whole match) of the last match of a custom ``pattern``
"""

from __future__ import annotations

import re

METHODS = ("auto", "answer_tag", "gsm8k", "boxed", "answer_prefix", "last_number", "regex")
AUTO_ORDER = ("answer_tag", "gsm8k", "boxed", "answer_prefix", "last_number")

_ANSWER_TAG = re.compile(r"<answer>(.*?)(?:</answer>|\Z)", re.DOTALL | re.IGNORECASE)
_GSM8K = re.compile(r"####[ \t]*([^\n]*)")
_PREFIX = re.compile(r"^[ \t*#]*(?:final answer|answer|a)[ \t*]*[:：][ \t]*(.+?)[ \t]*$", re.IGNORECASE | re.MULTILINE)
NUMBER = r"[-+−]?\$?[ \t]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?(?:[ \t]?/[ \t]?\d+)?|[-+]?\.\d+"
_NUMBER = re.compile(NUMBER)


def _answer_tag(text: str) -> str | None:
    matches = _ANSWER_TAG.findall(text)
    return matches[-1].strip() if matches else None


def _gsm8k(text: str) -> str | None:
    matches = _GSM8K.findall(text)
    return matches[-1].strip() if matches else None


def _boxed(text: str) -> str | None:
    start = max(text.rfind("\\boxed{"), text.rfind("\\fbox{"))
    if start < 0:
        return None
    i = text.index("{", start) + 1
    depth = 1
    for j in range(i, len(text)):
        ch = text[j]
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return text[i:j].strip()
    return None  # unbalanced: no answer rather than a guess


def _answer_prefix(text: str) -> str | None:
    matches = _PREFIX.findall(text)
    return matches[-1].strip() if matches else None


def _last_number(text: str) -> str | None:
    matches = _NUMBER.findall(text)
    return matches[-1].strip() if matches else None


_EXTRACTORS = {
    "answer_tag": _answer_tag,
    "gsm8k": _gsm8k,
    "boxed": _boxed,
    "answer_prefix": _answer_prefix,
    "last_number": _last_number,
}


def extract_answer(text: str, method: str = "auto", *, pattern: str | re.Pattern[str] | None = None) -> str | None:
    """The final answer in ``text`` by ``method``, or ``None`` when there is none.

    ``auto`` tries the methods in :data:`AUTO_ORDER` and returns the first hit, so
    tagged answers and GSM8K-style solutions both work without configuration.
    An empty extraction (``<answer></answer>``) counts as no answer.
    """
    if method == "regex":
        if pattern is None:
            raise ValueError("extract = 'regex' needs a 'pattern'")
        compiled = re.compile(pattern, re.DOTALL) if isinstance(pattern, str) else pattern
        found = None
        for found in compiled.finditer(text):
            pass
        if found is None:
            return None
        value = found.group(1) if compiled.groups else found.group(0)
        return value.strip() or None
    if method == "auto":
        for name in AUTO_ORDER:
            value = _EXTRACTORS[name](text)
            if value:
                return value
        return None
    try:
        extractor = _EXTRACTORS[method]
    except KeyError:
        raise ValueError(f"unknown extraction method {method!r}; choose one of {', '.join(METHODS)}") from None
    return extractor(text) or None
