"""Code extraction: the last fenced block of the configured language in a completion.

A block tagged with the language (or one of its fence tags, :mod:`~grpo_rewards.sandbox.languages`:
``py``, ``python3``...) wins;
when the completion has no tagged block at all, its last untagged block is used. An
unclosed fence (a truncated generation) is not code. No block gives ``None`` and a reason.
"""

from __future__ import annotations

import re

from grpo_rewards.sandbox import languages

_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*([\w+#.-]*)[^\n]*\n(.*?)^[ \t]*\1[ \t]*$", re.DOTALL | re.MULTILINE)


def extract_code(text: str, language: str = "python") -> tuple[str | None, str]:
    """``(code, reason)``: the code, or ``None`` and why there is none."""
    names = languages.fence_tags(language)
    tagged: list[str] = []
    untagged: list[str] = []
    for match in _FENCE.finditer(text):
        tag = match.group(2).lower()
        body = match.group(3)
        if tag in names:
            tagged.append(body)
        elif not tag:
            untagged.append(body)
    blocks = tagged or untagged
    if not blocks:
        return None, f"no fenced ```{language} block in the completion"
    code = blocks[-1]
    if not code.strip():
        return None, "the last code block is empty"
    return code, ""
