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

``mode = "count"`` is the Unsloth Qwen3 notebook's ``match_format_approximately``: each of the
four markers earns ``per_tag`` (0.5 there) when it occurs exactly once and ``per_bad_tag`` (-1.0
there) otherwise; ``opened_in_prompt = true`` leaves the reasoning start out (the notebook's chat
template writes it). No trailing-text term.

Any tag set: the markers are ``<R>``, ``</R>``, ``<A>``, ``</A>`` unless given as
``reasoning_start``, ``reasoning_end``, ``answer_start``, ``answer_end``
(``<start_working_out>``, ``<end_working_out>``, ``<SOLUTION>``, ``</SOLUTION>`` in the Qwen3
notebook).

In every mode a tag counts only where it is in order (``check_order = true``, the default):
with the four tags in the order reasoning-open, reasoning-close, answer-open, answer-close, a
tag (as the mode spells it, occurring exactly once) earns its term only when the first occurrence
of every other of the four tags stands on its side of the tag's own first occurrence. So a closing tag before its opening tag,
tags written backwards or an answer block before the reasoning block earn nothing for the tags
out of place, where the notebook pays for each tag wherever it is. A missing tag costs only its
own term (open-r1's tag_count_reward gives 0.75 when ``<think>`` is missing: chat templates
often write it in the prompt).
``check_order = false`` is the notebook's count_xml on every input.
"""

from __future__ import annotations

from typing import Any

from grpo_rewards.builtins.tags import markers
from grpo_rewards.completions import completion_text
from grpo_rewards.specs import RewardSpec

MODES = ("unsloth", "lenient", "count")


def in_order(positions: list[int | None]) -> list[bool]:
    """Which tags are in order, given each tag's position (``None``: absent) in the canonical order:
    a present tag is when every other present tag stands on its side of it."""
    present = [(i, p) for i, p in enumerate(positions) if p is not None]
    return [p is not None and all((j < i) == (q < p) for j, q in present if j != i) for i, p in enumerate(positions)]


class XmlCount:
    """The batch reward :func:`xml_count` returns (a module-level class: it pickles)."""

    __name__ = "xml_count"

    def __init__(self, marks: tuple[str, str, str, str], per_tag: float, per_trailing_char: float, mode: str,
                 check_order: bool = True, per_bad_tag: float = 0.0, opened_in_prompt: bool = False):
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}")
        self.per_tag, self.per_trailing_char, self.mode = per_tag, per_trailing_char, mode
        self.check_order, self.per_bad_tag, self.opened_in_prompt = check_order, per_bad_tag, opened_in_prompt
        self.r_open, self.r_close, self.a_open, self.a_close = marks
        self.bare = marks
        self.unsloth_forms = (f"{self.r_open}\n", f"\n{self.r_close}\n", f"\n{self.a_open}\n", f"\n{self.a_close}")
        self.a_close_line = f"\n{self.a_close}\n"

    def counted(self, text: str, tags: tuple[str, str, str, str]) -> list[bool]:
        """Per tag: its form ``tags[i]`` occurs exactly once and (with ``check_order``) the bare tag is in order."""
        once = [text.count(tag) == 1 for tag in tags]
        if not self.check_order or not self.out_of_order(text):
            return once
        first = [text.find(tag) for tag in self.bare]
        ordered = in_order([p if p >= 0 else None for p in first])
        return [x and y for x, y in zip(once, ordered)]

    def out_of_order(self, text: str) -> bool:
        """Whether a tag's first occurrence comes before that of a tag meant to precede it."""
        find = text.find
        r_open, r_close, a_open, a_close = self.bare
        d = find(a_close)
        c = find(a_open, 0, d) if d >= 0 else find(a_open)  # an answer opening after its closing: out of order
        if d >= 0 and c < 0 and find(a_open) >= 0:
            return True
        end = c if c >= 0 else d  # where the answer block starts (-1: no answer tags)
        b = find(r_close, 0, end) if end >= 0 else find(r_close)
        if end >= 0 and b < 0 and find(r_close) >= 0:
            return True
        start = b if b >= 0 else end  # the reasoning block must open before it closes and before the answer
        a = find(r_open, 0, start) if start >= 0 else 0
        return start >= 0 and a < 0 and find(r_open) >= 0

    def unsloth(self, text: str) -> float:
        per_tag, per_char = self.per_tag, self.per_trailing_char
        f_r_open, f_r_close, f_a_open, f_a_close = forms = self.unsloth_forms
        r_open, r_close = text.count(f_r_open) == 1, text.count(f_r_close) == 1
        a_open, a_close = text.count(f_a_open) == 1, text.count(f_a_close) == 1
        if (r_open or r_close or a_open or a_close) and self.check_order and self.out_of_order(text):
            r_open, r_close, a_open, a_close = self.counted(text, forms)
        count = 0.0
        if r_open:
            count += per_tag
        if r_close:
            count += per_tag
        if a_open:  # the text after the last "\n</A>\n" (all of it when there is none)
            end = text.rfind(self.a_close_line)
            count -= (len(text) if end < 0 else len(text) - end - len(self.a_close_line)) * per_char
            count += per_tag
        if a_close:
            end = text.rfind(f_a_close)  # occurs once: the text after it
            count += per_tag
            count -= (len(text) - end - len(f_a_close) - 1) * per_char
        return count

    def lenient(self, text: str) -> float:
        r_open, r_close, a_open, a_close = self.bare
        first = (text.count(r_open) == 1) + (text.count(r_close) == 1) + (text.count(a_open) == 1)
        last = text.count(a_close) == 1
        if (first or last) and self.check_order and self.out_of_order(text):
            *ok, last = self.counted(text, self.bare)
            first = sum(ok)
        count = self.per_tag * first
        if last:
            count += self.per_tag - len(text[text.rfind(a_close) + len(a_close):].strip()) * self.per_trailing_char
        return count

    def count(self, text: str) -> float:
        ok = self.counted(text, self.bare)
        first = 1 if self.opened_in_prompt else 0  # the prompt wrote the opening marker: it is not scored
        return sum(self.per_tag if good else self.per_bad_tag for good in ok[first:])

    def __call__(self, completions: list[Any], **columns: Any) -> list[float | None]:
        score = self.unsloth if self.mode == "unsloth" else self.lenient if self.mode == "lenient" else self.count
        return [score(completion_text(c)) for c in completions]


# The marker parameters (reasoning_tag ... answer_end) are spelled out in each factory on purpose: a factory's
# signature is its TOML table (RewardSpec reads the parameters, their defaults and types from it).
def xml_count(
    reasoning_tag: str = "reasoning",
    answer_tag: str = "answer",
    per_tag: float = 0.125,
    per_trailing_char: float = 0.001,
    mode: str = "unsloth",
    check_order: bool = True,
    per_bad_tag: float = 0.0,
    opened_in_prompt: bool = False,
    reasoning_start: str = "",
    reasoning_end: str = "",
    answer_start: str = "",
    answer_end: str = "",
) -> XmlCount:
    """Unsloth's xmlcount: 0.125 per correctly placed tag, minus 0.001 per character after the answer.

    ``check_order`` (default true): a tag out of order earns nothing (module docs). ``mode = "count"``:
    ``per_tag`` per marker seen exactly once (in order), ``per_bad_tag`` per other marker. The markers
    are the tags named by ``reasoning_tag``/``answer_tag`` unless given."""
    marks = markers(reasoning_tag, answer_tag, reasoning_start, reasoning_end, answer_start, answer_end)
    return XmlCount(marks, per_tag, per_trailing_char, mode, check_order, per_bad_tag, opened_in_prompt)


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
mode = "unsloth"           # unsloth (the notebook's count_xml) | lenient | count
check_order = true         # false: tags out of order count too, as in the notebook
''',
    ),
]
