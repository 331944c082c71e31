"""Integers written in English words: ``twelve``, ``one hundred and five``, ``two thousand twenty-four``.

:func:`words_value` is the one reader; :mod:`grpo_rewards.answers.numbers` calls it for a whole answer
that is not written in digits. The grammar is the one a careful grader reads without doubt:
``zero`` to ``nineteen``, the tens (``twenty`` to ``ninety``, joined to a unit by a hyphen or a
space: ``forty-two``, ``forty two``), ``hundred``, ``thousand``, ``million``, ``billion``,
``trillion`` (each scale once, in falling order), an optional ``and`` after a hundred or a scale,
and a leading ``minus`` / ``negative``. ``a hundred`` and ``a dozen`` count; fractions and
ordinals in words (``three quarters``, ``third``) do not, nor do other languages' words.
"""

from __future__ import annotations

import re

UNITS = {w: i for i, w in enumerate(
    ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"])}
TENS = {w: 10 * i for i, w in enumerate(["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"], start=2)}
SCALES = {"thousand": 10**3, "million": 10**6, "billion": 10**9, "trillion": 10**12}
_WORD = re.compile(r"[a-z]+")
_SHAPE = re.compile(r"[A-Za-z]+(?:[ \t-]+[A-Za-z]+)*")
MAX_WORDS = 24


def _below_thousand(words: list[str]) -> int | None:
    """The value of ``words`` read as a number under 1,000 (``three hundred and five``), else ``None``."""
    value, pos = 0, 0
    if len(words) >= 2 and words[1] == "hundred" and (words[0] in UNITS or words[0] == "a"):
        value = 100 * (1 if words[0] == "a" else UNITS[words[0]])
        if value == 0:
            return None
        pos = 2
        if pos < len(words) and words[pos] == "and":
            pos += 1
            if pos == len(words):
                return None
    rest = words[pos:]
    if not rest:
        return value if pos else None
    if rest[0] in TENS:
        tens = TENS[rest[0]]
        if len(rest) == 1:
            return value + tens
        if len(rest) == 2 and rest[1] in UNITS and 0 < UNITS[rest[1]] < 10:
            return value + tens + UNITS[rest[1]]
        return None
    if len(rest) == 1 and rest[0] in UNITS and (not pos or UNITS[rest[0]] > 0):
        return value + UNITS[rest[0]]
    return None


def words_value(text: str) -> int | None:
    """The integer ``text`` spells in English words (module docs), else ``None``."""
    if len(text) > 300 or not _SHAPE.fullmatch(text.strip()):
        return None
    words = _WORD.findall(text.lower())
    if not words or len(words) > MAX_WORDS:
        return None
    sign = 1
    if words[0] in ("minus", "negative"):
        sign, words = -1, words[1:]
    if words == ["a", "dozen"] or words == ["one", "dozen"]:
        return 12 * sign
    if words == ["zero"]:
        return 0
    total, last_scale, group = 0, None, []
    for word in [*words, "<end>"]:
        if word in SCALES or word == "<end>":
            if word == "<end>" and not group:
                if last_scale is None:
                    return None
                break
            if group and group[-1] == "and" and word != "<end>":
                return None
            if group and group[0] == "and":
                if last_scale is None:
                    return None
                group = group[1:]
            value = _below_thousand(group)
            if value is None or value == 0:
                return None
            scale = 1 if word == "<end>" else SCALES[word]
            if last_scale is not None and scale >= last_scale:
                return None
            total += value * scale
            last_scale, group = scale, []
            continue
        group.append(word)
    return sign * total
