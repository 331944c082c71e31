"""How the grammar's word patterns are written so that a search skips the positions no word starts at.

``re`` finds a pattern's candidates quickly only when the pattern opens with a literal or a character
set and is not case-insensitive: ``\\b(?:but|however)`` under ``re.IGNORECASE`` is tried, and fails, at
every position of the text. :func:`words` writes the same alternatives as one character set of their
first characters (each in every case that ``re.IGNORECASE`` accepts), the word boundary as a
look-behind, and the rest case-insensitively, so that ``re`` jumps from one possible first character
to the next. ``tests/rewards/test_answer_scanning.py`` checks that it finds what the plain pattern finds.
"""

from __future__ import annotations

import re

#: the characters outside a letter's two cases that ``re.IGNORECASE`` also takes for it (``İ``, ``ı``, ``ſ``, ``K``)
_FOLDS = "\u0130\u0131\u017f\u212a"


def _cases(first: str) -> str:
    """Every character ``re.IGNORECASE`` matches to ``first``."""
    found = dict.fromkeys([first, first.lower(), first.upper()])
    found.update(dict.fromkeys(c for c in _FOLDS if re.fullmatch(f"(?i:{re.escape(first)})", c)))
    return "".join(found)


def _set(chars: str) -> str:
    return "".join("\\" + c if c in "\\]^-[" else c for c in chars)


def words(bounded: list[str | tuple[str, str]], unbounded: tuple[str, ...] = ()) -> str:
    """The pattern of ``(?i:\\b(?:a|b|...)|u|...)``: each of ``bounded`` (a regular expression opening with a
    letter; a ``(name, expression)`` pair puts the expression after its first letter in a named group, which
    says which word matched) at a
    word boundary, each of ``unbounded`` (opening with a literal character) anywhere, all case-insensitive;
    the match is the same, written to be found quickly (module docs)."""
    firsts: dict[str, None] = {}
    bounded_parts, unbounded_parts = [], []
    for item in bounded:
        name, expression = item if isinstance(item, tuple) else (None, item)
        head, tail = expression[0], expression[1:]
        if not head.isalpha():
            raise ValueError(f"a bounded word opens with a letter: {expression!r}")
        firsts.update(dict.fromkeys(_cases(head)))
        body = f"(?P<{name}>{tail})" if name else tail
        bounded_parts.append(f"(?<={re.escape(head)}){body}")
    for expression in unbounded:
        head, tail = expression[0], expression[1:]
        firsts.update(dict.fromkeys(_cases(head)))
        unbounded_parts.append(f"(?<={re.escape(head)}){tail}")
    branches = []
    if bounded_parts:
        branches.append(r"(?<!\w.)(?i:" + "|".join(bounded_parts) + ")")
    if unbounded_parts:
        branches.append("(?i:" + "|".join(unbounded_parts) + ")")
    return f"[{_set(''.join(firsts))}](?:{'|'.join(branches)})"
