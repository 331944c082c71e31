"""Finding and parsing the JSON in a completion, safely: sizes and nesting are capped before parsing.

The reasoning block is never the JSON (:func:`grpo_rewards.answers.strip_reasoning`): a draft inside
``<think>`` followed by a refusal has no JSON. Fences are read by :mod:`grpo_rewards.answers.fences`.

:func:`extract_json_text` takes the JSON text out of a completion (``extract``):

* ``"fence"``: the last fenced block marked ```` ```json ````, else the last unmarked one, nothing without one;
* ``"whole"``: the whole completion, stripped;
* ``"auto"``: the last fence when there is one, else the whole completion.

:func:`parse_json` parses it with RFC 8259's rules (``NaN`` and ``Infinity`` are not JSON) and
returns ``(ok, value, reason)``. Text longer than ``max_chars`` or nested deeper than
``max_depth`` is refused before the parser sees it, so a huge or deeply nested completion can
neither hang nor crash a run (Python's parser and the schema validator recurse per level).
"""

from __future__ import annotations

import json
from typing import Any

from grpo_rewards.answers import last_block, strip_reasoning

EXTRACT_METHODS = ("auto", "fence", "whole")
JSON_FENCE_LANGUAGES = ("json",)


def last_json_fence(text: str) -> str | None:
    """The body of the last fenced block marked ``json``, else of the last unmarked one
    (:func:`grpo_rewards.answers.last_block`: a trailing unlabelled snippet after a ``json`` block is not the JSON)."""
    block = last_block(text, JSON_FENCE_LANGUAGES)
    return None if block is None else block.body


def extract_json_text(text: str, extract: str = "auto") -> str | None:
    """The JSON text in ``text`` by ``extract`` (module docs), or ``None`` when there is none."""
    if extract not in EXTRACT_METHODS:
        raise ValueError(f"extract must be one of {', '.join(EXTRACT_METHODS)}, got {extract!r}")
    text = strip_reasoning(text)
    if extract != "whole":
        fenced = last_json_fence(text)
        if fenced is not None:
            return fenced.strip()
        if extract == "fence":
            return None
    return text.strip()


def nesting_depth(text: str, stop_at: int) -> int:
    """How deep ``[``/``{`` nest in ``text`` outside JSON strings (scanning stops once past ``stop_at``)."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > stop_at:
                    return deepest
        elif ch in "]}":
            depth -= 1
    return deepest


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_json(text: str, *, max_chars: int, max_depth: int) -> tuple[bool, Any, str]:
    """``(True, value, "")`` when ``text`` is JSON within the caps, else ``(False, None, why)``."""
    if len(text) > max_chars:
        return False, None, f"{len(text)} characters, over max_chars = {max_chars}"
    if nesting_depth(text, max_depth) > max_depth:
        return False, None, f"nested deeper than max_depth = {max_depth}"
    try:
        return True, json.loads(text, parse_constant=_refuse_constant), ""
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, digits over int's limit, NaN
        return False, None, str(exc).splitlines()[0][:200]
