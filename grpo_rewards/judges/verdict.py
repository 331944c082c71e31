"""The judge's verdict, read from its output and only from it: :func:`read_verdict`.

The verdict is the *last* JSON object in the judge's output (a judge reasons first, then answers; whatever it
quotes from the completion on the way is earlier), or, with a ``pattern`` (a regular expression with one group),
the number its last match captures, read as ``{"score": n}``. An output with neither is a parse failure: the row
scores ``None`` and the failure is counted.
"""

from __future__ import annotations

import json
import re
from typing import Any

_DECODER = json.JSONDecoder()
MAX_OUTPUT = 20_000  # characters at the end of a judge's output that are read
_MAX_TRIES = 512


def last_json_object(text: str) -> dict[str, Any] | None:
    """The last JSON object of ``text``: the outermost ``{...}`` that ends at the last ``}`` closing one (bounded
    work: a few hundred tries, whatever the text)."""
    text = text[-MAX_OUTPUT:]
    tries = 0
    close = text.rfind("}")
    while close >= 0 and tries < _MAX_TRIES:
        found: dict[str, Any] | None = None
        start = text.rfind("{", 0, close)
        while start >= 0 and tries < _MAX_TRIES:
            tries += 1
            try:
                value, stop = _DECODER.raw_decode(text, start)
            except ValueError:
                value, stop = None, -1
            if isinstance(value, dict) and stop == close + 1:
                found = value  # an enclosing object, if any, is found further left
            start = text.rfind("{", 0, start)
        if found is not None:
            return found
        close = text.rfind("}", 0, close)
    return None


def read_verdict(output: str, pattern: re.Pattern[str] | None = None) -> dict[str, Any] | None:
    """The verdict in the judge's ``output`` (module docs), or ``None``."""
    if not isinstance(output, str):
        return None
    if pattern is not None:
        found = list(pattern.finditer(output[-MAX_OUTPUT:]))
        if not found:
            return None
        try:
            return {"score": float(found[-1].group(1))}
        except (ValueError, IndexError):
            return None
    return last_json_object(output)
