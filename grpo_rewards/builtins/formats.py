"""``strict_format``, ``soft_format`` and ``final_answer_format`` rewards: the reasoning-then-answer layout.

With ``R``/``A`` the tag names (``reasoning``/``answer`` by default, ``think``/``answer``
for R1-style prompts), the Unsloth GSM8K notebook checks::

    strict: re.match(r"^<R>\\n.*?\\n</R>\\n<A>\\n.*?\\n</A>\\n$", text)    -> 0.5
    soft:   re.match(r"<R>.*?</R>\\s*<A>.*?</A>", text)                  -> 0.5

without ``re.DOTALL``, so ``.`` never crosses a newline and any multi-line reasoning
fails both checks (the known bug: the soft format practically never matches).
Deliberate differences here:

* ``.`` matches newlines, so multi-line reasoning and answers count;
* strict also requires each of the four tags exactly once (with ``.`` crossing
  newlines, the pattern alone would accept two reasoning/answer rounds);
* ``strict_format`` has ``trailing_newline`` (default true, as in the notebook: the text
  ends with ``</A>`` and one newline, optionally two); false also accepts a text ending
  right at ``</A>`` or with any trailing whitespace (generation stopped at EOS);
* ``opened_in_prompt = true`` treats the opening reasoning tag as already written
  (chat templates that end the prompt with ``<think>``\\n).

``final_answer_format`` is the Unsloth Qwen3 notebook's ``match_format_exactly``::

    re.compile(rf"{R_end}.*?{A_start}(.+?){A_end}[\\s]{{0,}}(?:{eos})?[\\s]{{0,}}$", re.MULTILINE | re.DOTALL).search

the reasoning's end marker, later the answer's start, a non-empty answer, its end, then
only whitespace and the tokenizer's ``eos`` text (the opening reasoning marker is in the
prompt). With ``end = "text"`` (default) nothing else may follow; ``end = "line"`` is the
notebook's pattern term for term: with ``re.MULTILINE``, ``$`` also matches before any line
break, so text on a later line is allowed. It scores ``value`` (1.0; 3.0 in the notebook) or
``wrong_value``, in linear time.

Both score ``value`` (0.5) on a match and ``wrong_value`` (0.0) otherwise. Any tag set: the
markers ``<R>``, ``</R>``, ``<A>``, ``</A>`` are built from the tag names unless given as
``reasoning_start``, ``reasoning_end``, ``answer_start``, ``answer_end`` (the Unsloth Qwen3
notebook's ``<start_working_out>``, ``<end_working_out>``, ``<SOLUTION>``, ``</SOLUTION>``).
"""

from __future__ import annotations

import re
from typing import Any

from grpo_rewards.builtins.tags import markers
from grpo_rewards.completions import completion_text
from grpo_rewards.specs import RewardSpec


class _FormatReward:
    """Scores ``value`` when ``matches(opener + text)``, else ``wrong_value`` (a module-level class: it pickles)."""

    __name__ = ""

    def __init__(self, marks: tuple[str, str, str, str], value: float, wrong_value: float, opener: str):
        self.marks = marks
        self.value, self.wrong_value, self.opener = value, wrong_value, opener

    def matches(self, text: str) -> bool:
        raise NotImplementedError

    def __call__(self, completions: list[Any], **columns: Any) -> list[float | None]:
        return [self.value if self.matches(self.opener + completion_text(c)) else self.wrong_value for c in completions]

    def __repr__(self) -> str:
        return f"{self.__name__}(markers={self.marks!r})"


class StrictFormat(_FormatReward):
    __name__ = "strict_format"

    def __init__(self, marks: tuple[str, str, str, str], value: float, wrong_value: float,
                 trailing_newline: bool, opened_in_prompt: bool):
        super().__init__(marks, value, wrong_value, f"{marks[0]}\n" if opened_in_prompt else "")
        r0, r1, a0, a1 = map(re.escape, marks)
        end = r"\n\n?\Z" if trailing_newline else r"\s*\Z"
        self.layout = re.compile(rf"{r0}\n.*?\n{r1}\n{a0}\n.*?\n{a1}{end}", re.DOTALL)

    def matches(self, text: str) -> bool:
        return all(text.count(t) == 1 for t in self.marks) and self.layout.match(text) is not None


class SoftFormat(_FormatReward):
    __name__ = "soft_format"

    def __init__(self, marks: tuple[str, str, str, str], value: float, wrong_value: float, opened_in_prompt: bool):
        super().__init__(marks, value, wrong_value, marks[0] if opened_in_prompt else "")
        # re.match(r"<R>.*?</R>\s*<A>.*?</A>", text, re.DOTALL), in linear time: only the first
        # "</R> <A>" can matter (a later one has less text after it to hold "</A>")
        self.opening, self.closing = marks[0], marks[3]
        self.middle = re.compile(rf"{re.escape(marks[1])}\s*{re.escape(marks[2])}")

    def matches(self, text: str) -> bool:
        if not text.startswith(self.opening):
            return False
        found = self.middle.search(text, len(self.opening))
        return found is not None and text.find(self.closing, found.end()) >= 0


class FinalAnswerFormat(_FormatReward):
    """``final_answer_format`` (module docs), in linear time."""

    __name__ = "final_answer_format"

    def __init__(self, marks: tuple[str, str, str, str], value: float, wrong_value: float, eos: str, end: str):
        super().__init__(marks, value, wrong_value, "")
        self.eos, self.end = eos, end
        tail = rf"\s*(?:{re.escape(eos)})?\s*" if eos else r"\s*"
        self.tail = re.compile(tail + (r"$" if end == "line" else r"\Z"), re.MULTILINE if end == "line" else 0)

    def matches(self, text: str) -> bool:
        r_end, a_start, a_end = self.marks[1:]
        i = text.find(r_end)
        j = text.find(a_start, i + len(r_end)) if i >= 0 else -1
        if j < 0:
            return False
        earliest = j + len(a_start) + 1  # the answer holds at least one character
        if self.end == "text":  # only whitespace (and eos) after it: the last answer_end is the only candidate
            k = text.rfind(a_end)
            return k >= earliest and self.tail.match(text, k + len(a_end)) is not None
        k = text.find(a_end, earliest)
        while k >= 0:
            if self.tail.match(text, k + len(a_end)):
                return True
            k = text.find(a_end, k + 1)
        return False


# The marker parameters (reasoning_tag ... answer_end) are spelled out in each factory on purpose: a factory's
# signature is its TOML table (RewardSpec reads the parameters, their defaults and types from it).
def strict_format(
    reasoning_tag: str = "reasoning",
    answer_tag: str = "answer",
    value: float = 0.5,
    wrong_value: float = 0.0,
    trailing_newline: bool = True,
    opened_in_prompt: bool = False,
    reasoning_start: str = "",
    reasoning_end: str = "",
    answer_start: str = "",
    answer_end: str = "",
) -> StrictFormat:
    """The whole completion is the reasoning block then the answer block, one tag per line (multi-line allowed).

    The four markers are the tags named by ``reasoning_tag``/``answer_tag`` unless given (module docs)."""
    marks = markers(reasoning_tag, answer_tag, reasoning_start, reasoning_end, answer_start, answer_end)
    return StrictFormat(marks, value, wrong_value, trailing_newline, opened_in_prompt)


def soft_format(
    reasoning_tag: str = "reasoning",
    answer_tag: str = "answer",
    value: float = 0.5,
    wrong_value: float = 0.0,
    opened_in_prompt: bool = False,
    reasoning_start: str = "",
    reasoning_end: str = "",
    answer_start: str = "",
    answer_end: str = "",
) -> SoftFormat:
    """The completion starts with a reasoning block followed by an answer block (newlines anywhere).

    The four markers are the tags named by ``reasoning_tag``/``answer_tag`` unless given (module docs)."""
    marks = markers(reasoning_tag, answer_tag, reasoning_start, reasoning_end, answer_start, answer_end)
    return SoftFormat(marks, value, wrong_value, opened_in_prompt)


def final_answer_format(
    reasoning_tag: str = "reasoning",
    answer_tag: str = "answer",
    value: float = 1.0,
    wrong_value: float = 0.0,
    eos: str = "",
    end: str = "text",
    reasoning_start: str = "",
    reasoning_end: str = "",
    answer_start: str = "",
    answer_end: str = "",
) -> FinalAnswerFormat:
    """The reasoning is closed, then the completion ends with a non-empty answer block (module docs)."""
    if end not in ENDS:
        raise ValueError(f"end must be one of {', '.join(ENDS)}, got {end!r}")
    if not isinstance(eos, str):
        raise ValueError(f"eos must be a string (the tokenizer's end-of-sequence text, or empty), got {eos!r}")
    marks = markers(reasoning_tag, answer_tag, reasoning_start, reasoning_end, answer_start, answer_end)
    return FinalAnswerFormat(marks, value, wrong_value, eos, end)


ENDS = ("text", "line")

REWARD_SPECS = [
    RewardSpec(
        name="final_answer_format",
        factory=final_answer_format,
        example='''[rewards.layout]
use = "final_answer_format"      # the Unsloth Qwen3 notebook's match_format_exactly
weight = 1.0
value = 3.0
reasoning_end = "<end_working_out>"
answer_start = "<SOLUTION>"
answer_end = "</SOLUTION>"
eos = "<|endoftext|>"            # the tokenizer's eos text, allowed after the answer
end = "text"                     # "line": as the notebook, text may follow on a later line
''',
    ),
    RewardSpec(
        name="strict_format",
        factory=strict_format,
        example='''[rewards.strict]
use = "strict_format"
weight = 1.0
reasoning_tag = "reasoning"   # or "think"
answer_tag = "answer"
value = 0.5
trailing_newline = true       # false: the text may end right at </answer>
''',
    ),
    RewardSpec(
        name="soft_format",
        factory=soft_format,
        example='''[rewards.soft]
use = "soft_format"
weight = 1.0
reasoning_tag = "think"
answer_tag = "answer"
value = 0.5
''',
    ),
]
