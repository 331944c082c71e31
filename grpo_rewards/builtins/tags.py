"""Validation of the reasoning/answer tag names shared by the format rewards."""

from __future__ import annotations

import re

_TAG_NAME = re.compile(r"[A-Za-z_][\w.-]*", re.ASCII)


def check_tags(reasoning_tag: str, answer_tag: str) -> None:
    """A clear ``ValueError`` unless both are distinct XML-style tag names (``think``, ``answer``)."""
    for key, tag in (("reasoning_tag", reasoning_tag), ("answer_tag", answer_tag)):
        if not isinstance(tag, str) or not _TAG_NAME.fullmatch(tag):
            raise ValueError(f"{key} must be a tag name like 'think' or 'answer' (no angle brackets), got {tag!r}")
    if reasoning_tag == answer_tag:
        raise ValueError(f"reasoning_tag and answer_tag must differ, both are {answer_tag!r}")
