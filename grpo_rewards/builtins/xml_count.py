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
from grpo_rewards.specs import RewardSpec

MODES = ("unsloth", "lenient")


class XmlCount:
    """The batch reward :func:`xml_count` returns (a module-level class: it pickles)."""

    __name__ = "xml_count"

    def __init__(self, reasoning_tag: str, answer_tag: str, per_tag: float, per_trailing_char: float, mode: str):
        check_tags(reasoning_tag, answer_tag)
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}")
        self.per_tag, self.per_trailing_char, self.mode = per_tag, per_trailing_char, mode
        self.r_open, self.r_close = f"<{reasoning_tag}>", f"</{reasoning_tag}>"
        self.a_open, self.a_close = f"<{answer_tag}>", f"</{answer_tag}>"

    def unsloth(self, text: str) -> float:
        per_tag, per_char = self.per_tag, self.per_trailing_char
        count = 0.0
        if text.count(f"{self.r_open}\n") == 1:
            count += per_tag
        if text.count(f"\n{self.r_close}\n") == 1:
            count += per_tag
        if text.count(f"\n{self.a_open}\n") == 1:
            count += per_tag
            count -= len(text.split(f"\n{self.a_close}\n")[-1]) * per_char
        if text.count(f"\n{self.a_close}") == 1:
            count += per_tag
            count -= (len(text.split(f"\n{self.a_close}")[-1]) - 1) * per_char
        return count

    def lenient(self, text: str) -> float:
        count = self.per_tag * sum(text.count(tag) == 1 for tag in (self.r_open, self.r_close, self.a_open))
        if text.count(self.a_close) == 1:
            count += self.per_tag - len(text.split(self.a_close)[-1].strip()) * self.per_trailing_char
        return count

    def __call__(self, completions: list[Any], **columns: Any) -> list[float | None]:
        score = self.unsloth if self.mode == "unsloth" else self.lenient
        return [score(completion_text(c)) for c in completions]


def xml_count(
    reasoning_tag: str = "reasoning",
    answer_tag: str = "answer",
    per_tag: float = 0.125,
    per_trailing_char: float = 0.001,
    mode: str = "unsloth",
) -> XmlCount:
    """Unsloth's xmlcount: 0.125 per correctly placed tag, minus 0.001 per character after the answer."""
    return XmlCount(reasoning_tag, answer_tag, per_tag, per_trailing_char, mode)


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
