"""Fenced code blocks: the one reader of Markdown fences for every reward (code, JSON, extraction).

A fence opens on a line of three or more backticks or tildes (indent allowed), its info string's first
word the block's tag (lower-cased; ``python``, ``json``, empty when unlabelled); it closes on a line
of the same character, at least as long, with nothing else. An unclosed fence (a truncated generation)
gives no block. :func:`last_block` picks the last block whose tag a reward names, an unlabelled block
only when no labelled one is there: a demo or shell snippet after the answer's ``json`` block is not
the answer. The reasoning block is removed first (:func:`grpo_rewards.answers.reasoning.strip_reasoning`)
by the callers. One pass over the fence lines found by one regex: linear in the text, whatever is
unclosed.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator
from typing import NamedTuple

_FENCE_LINE = re.compile(r"^[ \t]*(`{3,}|~{3,})([^\n]*)$", re.MULTILINE)
_TAG = re.compile(r"[\w+#.-]*")


class Block(NamedTuple):
    """One closed fenced block: its tag (``""`` when unlabelled) and its body (the lines between the fences)."""

    tag: str
    body: str


def blocks(text: str) -> Iterator[Block]:
    """Every closed fenced block of ``text``, in order (module docs)."""
    if "```" not in text and "~~~" not in text:
        return
    opener: re.Match[str] | None = None
    for line in _FENCE_LINE.finditer(text):
        info = line.group(2)
        if opener is None:
            if line.group(1)[0] == "`" and "`" in info:
                continue  # inline code such as ```x```, not a fence
            opener = line
        elif (line.group(1)[0] == opener.group(1)[0] and len(line.group(1)) >= len(opener.group(1))
              and not info.strip()):
            start = min(opener.end() + 1, line.start())
            yield Block(_TAG.match(opener.group(2).strip()).group().lower(), text[start:line.start()])
            opener = None


def last_block(text: str, tags: Collection[str]) -> Block | None:
    """The last block tagged with one of ``tags`` (lower-case), else the last unlabelled block, else ``None``."""
    tagged = untagged = None
    for block in blocks(text):
        if block.tag in tags:
            tagged = block
        elif not block.tag:
            untagged = block
    return tagged or untagged
