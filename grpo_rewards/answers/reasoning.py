"""The reasoning block, which is never an answer: :func:`strip_reasoning` removes it for every reward.

A reasoning block is the text inside ``<think>...</think>`` or any other tag of :data:`REASONING_TAGS`
(``<thinking>``, ``<reasoning>``; a reward configured with its own ``reasoning_tag`` passes it in
``tags``). Everything before a lone closing tag is reasoning too (the chat template opened the block),
and an unclosed opening tag runs to the end: a completion cut off while thinking has no answer, whatever
its reasoning drafted. One left-to-right pass over the tags, linear in the text.
"""

from __future__ import annotations

import re
from functools import lru_cache

#: the tags whose content is reasoning for every reward that reads an answer
REASONING_TAGS: tuple[str, ...] = ("think", "thinking", "reasoning")


def _caseless(tag: str) -> str:
    """``tag`` as a pattern matching it in any case, without ``re.IGNORECASE`` (which slows the search for ``<``)."""
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else re.escape(c) for c in tag)


@lru_cache(maxsize=32)
def _tag_pattern(tags: tuple[str, ...]) -> re.Pattern[str]:
    names = "|".join(_caseless(t) for t in sorted(set(tags), key=len, reverse=True))
    return re.compile(rf"<(/?)(?:{names})>")


def reasoning_tags(extra: str | tuple[str, ...] | None = None) -> tuple[str, ...]:
    """:data:`REASONING_TAGS` with a reward's own reasoning tag (or tags) added."""
    if not extra:
        return REASONING_TAGS
    more = (extra,) if isinstance(extra, str) else tuple(extra)
    return REASONING_TAGS + tuple(t for t in more if t not in REASONING_TAGS)


_DEFAULT_PATTERN = _tag_pattern(REASONING_TAGS)


def strip_reasoning(text: str, tags: tuple[str, ...] = REASONING_TAGS) -> str:
    """``text`` without its reasoning blocks (module docs)."""
    if "<" not in text:  # fast path: no tag at all
        return text
    if tags is REASONING_TAGS:
        if not ("hink" in text or "easoning" in text or "HINK" in text or "EASONING" in text):
            return text  # fast path: no default reasoning tag can be there
        pattern = _DEFAULT_PATTERN
    else:
        pattern = _tag_pattern(tags)
    pieces = pattern.split(text)  # text, "/" or "" (closing or opening tag), text, ...
    if len(pieces) == 1:
        return text
    if len(pieces) == 5 and not pieces[1] and pieces[3]:  # the usual case: one block, opened and closed
        return pieces[0] + pieces[4]
    out: list[str] = []
    inside = False
    for k in range(1, len(pieces), 2):  # pieces[k] is a tag's slash, pieces[k - 1] the text before the tag
        if not pieces[k]:
            if not inside:
                out.append(pieces[k - 1])
                inside = True
        else:
            if not inside:  # a lone closing tag: everything before it was reasoning
                out.clear()
            inside = False
    if not inside:
        out.append(pieces[-1])
    return "".join(out)
