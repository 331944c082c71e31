"""Boxed answers: the one scanner of ``\\boxed{...}`` and ``\\fbox{...}`` (nested braces matched, linear).

:func:`iter_boxes` finds every top-level box; :func:`box_contents` reads their contents for extraction
(``$...$`` inside a box read as text, each content once); :func:`last_box` finds the last box command;
``math_equivalence``'s guards use :func:`iter_boxes` too.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

BOXED = re.compile(r"\\(?:boxed|fbox)(?:\s*\{|\s+([^\s{}\\$]+))")
_BRACES = re.compile(r"[{}]")
_SIMPLE_BOX = re.compile(r"\\(?:boxed|fbox)\s*\{([^{}]*)\}")
_TEXT_MODE = re.compile(r"\$([^$]*)\$")


def box_text(value: str) -> str:
    """A box's content with ``$...$`` inside it read as what it is there, text: ``\\boxed{12 $ and $13}``
    (a box in math mode, its ``$`` leaving it) is ``12 \\text{ and } 13``. A content wholly in ``$...$``
    (``\\boxed{$42$}``, a box written in text mode) stays as it is."""
    bare = value.replace("\\$", "\0")  # an escaped \\$ is a dollar sign, not a delimiter
    if "$" not in bare or bare.startswith("$"):
        return value
    return _TEXT_MODE.sub(lambda m: f"\\text{{{m.group(1)}}}", bare).replace("$", "").replace("\0", "\\$")


def last_box(text: str) -> re.Match[str] | None:
    """The last match of :data:`BOXED` in ``text``, read at the last ``\\boxed``/``\\fbox`` (scanning back only
    when that one is no box command)."""
    at = max(text.rfind("\\boxed"), text.rfind("\\fbox"))
    found = BOXED.match(text, at) if at >= 0 else None
    if found is None and at >= 0:
        matches = list(BOXED.finditer(text))
        found = matches[-1] if matches else None
    return found


def iter_boxes(text: str) -> Iterator[tuple[int, int | None, str | None]]:
    """Every top-level ``\\boxed{...}`` / ``\\fbox{...}`` of ``text``, in order, as ``(start, end, bare)``:
    the content runs from ``start`` to ``end`` (nested braces matched; ``end`` is ``None`` for an
    unbalanced box, which ends the scan); ``bare`` is the argument of ``\\boxed 5`` (no braces), else
    ``None``. The one scanner of boxes: extraction and ``math_equivalence``'s guards both use it."""
    pos = 0
    while (found := BOXED.search(text, pos)) is not None:
        if found.group(1) is not None:  # \boxed 5
            yield found.start(1), found.end(1), found.group(1)
            pos = found.end()
            continue
        close = text.find("}", found.end())
        if close >= 0 and text.find("{", found.end(), close) < 0:  # the usual box: no braces inside
            yield found.end(), close, None
            pos = close + 1
            continue
        depth = 1
        for brace in _BRACES.finditer(text, found.end()):
            depth += 1 if brace.group() == "{" else -1
            if depth == 0:
                yield found.end(), brace.start(), None
                pos = brace.end()  # a box inside this one is part of its answer
                break
        else:
            yield found.end(), None, None
            return


def box_contents(text: str) -> list[str] | None:
    """The contents of the boxes of ``text`` in order, each once (:func:`box_text` applied); ``None`` when the
    last box is unbalanced (no answer rather than a guess); ``[]`` without a box."""
    if "\\boxed" not in text and "\\fbox" not in text:  # fast path
        return []
    simple = _SIMPLE_BOX.findall(text)
    if len(simple) == text.count("\\boxed") + text.count("\\fbox"):  # no box holds braces: read in one pass
        return [box_text(v.strip()) for v in dict.fromkeys(simple)]
    values: dict[str, None] = {}  # each content once: a box repeated is one answer
    for start, end, bare in iter_boxes(text):
        if end is None:
            return None
        values[bare if bare is not None else text[start:end].strip()] = None
    return [box_text(v) for v in values]
