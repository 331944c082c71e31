"""Validation of the tag names and markers shared by the format rewards.

A format reward reads four markers: the reasoning block's start and end and the answer
block's start and end. By default they are XML-style tags built from two names
(``reasoning_tag = "think"`` gives ``<think>`` and ``</think>``); any of the four may be
given as a string of its own (``reasoning_start = "<start_working_out>"``,
``reasoning_end = "<end_working_out>"``, ``answer_start = "<SOLUTION>"``,
``answer_end = "</SOLUTION>"``, the Unsloth Qwen3 notebook's layout).
"""

from __future__ import annotations

import re
from typing import Any

_TAG_NAME = re.compile(r"[A-Za-z_][\w.-]*", re.ASCII)
MARKER_KEYS = ("reasoning_start", "reasoning_end", "answer_start", "answer_end")


def check_tag_name(key: str, tag: Any) -> None:
    """A clear ``ValueError`` unless ``tag`` is an XML-style tag name (``think``, ``answer``)."""
    if not isinstance(tag, str) or not _TAG_NAME.fullmatch(tag):
        raise ValueError(f"{key} must be a tag name like 'think' or 'answer' (no angle brackets), got {tag!r}")


def check_tags(reasoning_tag: str, answer_tag: str) -> None:
    """A clear ``ValueError`` unless both are distinct XML-style tag names (``think``, ``answer``)."""
    for key, tag in (("reasoning_tag", reasoning_tag), ("answer_tag", answer_tag)):
        check_tag_name(key, tag)
    if reasoning_tag == answer_tag:
        raise ValueError(f"reasoning_tag and answer_tag must differ, both are {answer_tag!r}")


def markers(reasoning_tag: str, answer_tag: str, reasoning_start: str = "", reasoning_end: str = "",
            answer_start: str = "", answer_end: str = "") -> tuple[str, str, str, str]:
    """The four markers (reasoning start, reasoning end, answer start, answer end): each given one, else the
    tag built from its name. A clear ``ValueError`` for an empty marker, one with whitespace at an end, or
    one that occurs inside another (counting it would count the other too)."""
    check_tags(reasoning_tag, answer_tag)
    given = (reasoning_start, reasoning_end, answer_start, answer_end)
    default = (f"<{reasoning_tag}>", f"</{reasoning_tag}>", f"<{answer_tag}>", f"</{answer_tag}>")
    out = tuple(g if g else d for g, d in zip(given, default))
    for key, marker in zip(MARKER_KEYS, out):
        if not isinstance(marker, str) or marker != marker.strip() or not marker:
            raise ValueError(f"{key} must be a marker such as '<SOLUTION>' (no whitespace at either end), "
                             f"got {marker!r}")
    for i, inner in enumerate(out):
        for j, outer in enumerate(out):
            if i != j and inner in outer:
                raise ValueError(f"{MARKER_KEYS[i]} {inner!r} occurs inside {MARKER_KEYS[j]} {outer!r}: "
                                 "the four markers must be distinct and none part of another")
    return out  # type: ignore[return-value]
