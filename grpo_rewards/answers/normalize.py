"""Answer normalisation for text comparison; number parsing re-exported from :mod:`grpo_rewards.answers.numbers`.

:func:`normalize_text` is how a non-numeric answer is compared (wrappers peeled,
whitespace collapsed, case folded). Numbers are the job of :mod:`grpo_rewards.answers.numbers`
(the one number grammar); its names are re-exported here for older imports.
"""

from __future__ import annotations

import re

from grpo_rewards.answers.numbers import (  # noqa: F401 - re-exported
    MAX_EXPONENT,
    MAX_LENGTH,
    MAX_WRAPPERS,
    Number,
    format_number,
    is_integer_literal,
    numbers_equal,
    parse_literal,
    parse_number,
    unwrap,
)

_SPACES = re.compile(r"\s+")
_NUMBER_SPACE = re.compile(r"(?<=\d) (?=[^\W\d_])")  # "12 kg" is "12kg": a unit glued to its number or not


def normalize_text(text: str, *, case_sensitive: bool = False) -> str:
    """A non-numeric answer for comparison: wrappers peeled, whitespace collapsed (none between a number and the
    word after it: ``12 kg`` is ``12kg``), case folded."""
    s = _NUMBER_SPACE.sub("", _SPACES.sub(" ", unwrap(text)).strip())
    return s if case_sensitive else s.casefold()
