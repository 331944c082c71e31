"""``xml_count`` reward: partial credit per correctly placed tag, minus trailing text.

``mode = "unsloth"`` (default) is the Unsloth GSM8K notebook's ``count_xml``,
term for term, with the tag names configurable (``reasoning``/``answer`` by default,
``think``/``answer`` for R1-style prompts). With ``R`` and ``A`` the tags::

    +per_tag  if "<R>\\n" occurs exactly once
    +per_tag  if "\\n</R>\\n" occurs exactly once
    +per_tag  if "\\n<A>\\n" occurs exactly once,
              and -per_trailing_char * len(text after the last "\\n</A>\\n")
    +per_tag  if "\\n</A>" occurs exactly once,
              and -per_trailing_char * (len(text after the last "\\n</A>") - 1)

That keeps the notebook's quirks: a text ending in ``</A>`` with no newline earns
``+per_trailing_char`` on the last term, and, when ``"\\n</A>\\n"`` does not occur
at all, the third term's split finds no separator and charges the *whole text*
(Unsloth's completions always ended in a newline). Bounds: at most
``4 * per_tag + per_trailing_char``; at least ``-2 * per_trailing_char * len(text)``.

``mode = "lenient"`` counts each of the four tags when it occurs exactly once,
wherever the newlines are, and charges ``per_trailing_char`` per character after the
closing answer tag, not counting whitespace at either end of that text. Bounds: ``[-per_trailing_char *
len(text), 4 * per_tag]``.
"""

from __future__ import annotations

from typing import Any

from grpo_rewards.builtins.tags import check_tags
from grpo_rewards.completions import completion_text
from grpo_rewards.specs import RewardFunction, RewardSpec

MODES = ("unsloth", "lenient")


def xml_count(
    reasoning_tag: str = "reasoning",
    answer_tag: str = "answer",
    per_tag: float = 0.125,
    per_trailing_char: float = 0.001,
    mode: str = "unsloth",
) -> RewardFunction:
    """Unsloth's xmlcount: 0.125 per correctly placed tag, minus 0.001 per character after the answer."""
    check_tags(reasoning_tag, answer_tag)
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}")
    r_open, r_close, a_open, a_close = (f"<{reasoning_tag}>", f"</{reasoning_tag}>", f"<{answer_tag}>", f"</{answer_tag}>")

    def unsloth(text: str) -> float:
        count = 0.0
        if text.count(f"{r_open}\n") == 1:
            count += per_tag
        if text.count(f"\n{r_close}\n") == 1:
            count += per_tag
        if text.count(f"\n{a_open}\n") == 1:
            count += per_tag
            count -= len(text.split(f"\n{a_close}\n")[-1]) * per_trailing_char
        if text.count(f"\n{a_close}") == 1:
            count += per_tag
            count -= (len(text.split(f"\n{a_close}")[-1]) - 1) * per_trailing_char
        return count

    def lenient(text: str) -> float:
        count = per_tag * sum(text.count(tag) == 1 for tag in (r_open, r_close, a_open))
        if text.count(a_close) == 1:
            count += per_tag - len(text.split(a_close)[-1].strip()) * per_trailing_char
        return count

    score = unsloth if mode == "unsloth" else lenient

    def xml_count(completions: list[Any], **columns: Any) -> list[float | None]:
        return [score(completion_text(c)) for c in completions]

    return xml_count


REWARD_SPECS = [
    RewardSpec(
        name="xml_count",
        factory=xml_count,
        example='''[rewards.tags]
use = "xml_count"
weight = 1.0
reasoning_tag = "think"    # "reasoning" (Unsloth's default) or "think"
answer_tag = "answer"
per_tag = 0.125
per_trailing_char = 0.001
mode = "unsloth"           # unsloth (the notebook's count_xml) | lenient
''',
    ),
]
