"""``strict_format`` and ``soft_format`` rewards: the reasoning-then-answer layout.

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

Both score ``value`` (0.5) on a match and ``wrong_value`` (0.0) otherwise.
"""

from __future__ import annotations

import re
from typing import Any

from grpo_rewards.builtins.tags import check_tags
from grpo_rewards.completions import completion_text
from grpo_rewards.specs import RewardSpec


class _FormatReward:
    """Scores ``value`` when ``matches(opener + text)``, else ``wrong_value`` (a module-level class: it pickles)."""

    __name__ = ""

    def __init__(self, reasoning_tag: str, answer_tag: str, value: float, wrong_value: float, opener: str):
        check_tags(reasoning_tag, answer_tag)
        self.reasoning_tag, self.answer_tag = reasoning_tag, answer_tag
        self.value, self.wrong_value, self.opener = value, wrong_value, opener

    def matches(self, text: str) -> bool:
        raise NotImplementedError

    def __call__(self, completions: list[Any], **columns: Any) -> list[float | None]:
        return [self.value if self.matches(self.opener + completion_text(c)) else self.wrong_value for c in completions]

    def __repr__(self) -> str:
        return f"{self.__name__}(reasoning_tag={self.reasoning_tag!r}, answer_tag={self.answer_tag!r})"


class StrictFormat(_FormatReward):
    __name__ = "strict_format"

    def __init__(self, reasoning_tag: str, answer_tag: str, value: float, wrong_value: float,
                 trailing_newline: bool, opened_in_prompt: bool):
        super().__init__(reasoning_tag, answer_tag, value, wrong_value,
                         f"<{reasoning_tag}>\n" if opened_in_prompt else "")
        r, a = re.escape(reasoning_tag), re.escape(answer_tag)
        end = r"\n\n?\Z" if trailing_newline else r"\s*\Z"
        self.layout = re.compile(rf"<{r}>\n.*?\n</{r}>\n<{a}>\n.*?\n</{a}>{end}", re.DOTALL)
        self.tags = (f"<{reasoning_tag}>", f"</{reasoning_tag}>", f"<{answer_tag}>", f"</{answer_tag}>")

    def matches(self, text: str) -> bool:
        return all(text.count(t) == 1 for t in self.tags) and self.layout.match(text) is not None


class SoftFormat(_FormatReward):
    __name__ = "soft_format"

    def __init__(self, reasoning_tag: str, answer_tag: str, value: float, wrong_value: float, opened_in_prompt: bool):
        super().__init__(reasoning_tag, answer_tag, value, wrong_value, f"<{reasoning_tag}>" if opened_in_prompt else "")
        r, a = re.escape(reasoning_tag), re.escape(answer_tag)
        # re.match(r"<R>.*?</R>\s*<A>.*?</A>", text, re.DOTALL), in linear time: only the first
        # "</R> <A>" can matter (a later one has less text after it to hold "</A>")
        self.opening, self.closing = f"<{reasoning_tag}>", f"</{answer_tag}>"
        self.middle = re.compile(rf"</{r}>\s*<{a}>")

    def matches(self, text: str) -> bool:
        if not text.startswith(self.opening):
            return False
        found = self.middle.search(text, len(self.opening))
        return found is not None and text.find(self.closing, found.end()) >= 0


def strict_format(
    reasoning_tag: str = "reasoning",
    answer_tag: str = "answer",
    value: float = 0.5,
    wrong_value: float = 0.0,
    trailing_newline: bool = True,
    opened_in_prompt: bool = False,
) -> StrictFormat:
    """The whole completion is the reasoning block then the answer block, one tag per line (multi-line allowed)."""
    return StrictFormat(reasoning_tag, answer_tag, value, wrong_value, trailing_newline, opened_in_prompt)


def soft_format(
    reasoning_tag: str = "reasoning",
    answer_tag: str = "answer",
    value: float = 0.5,
    wrong_value: float = 0.0,
    opened_in_prompt: bool = False,
) -> SoftFormat:
    """The completion starts with a reasoning block followed by an answer block (newlines anywhere)."""
    return SoftFormat(reasoning_tag, answer_tag, value, wrong_value, opened_in_prompt)


REWARD_SPECS = [
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
