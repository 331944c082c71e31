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
from collections.abc import Callable
from typing import Any

from grpo_rewards.builtins.tags import check_tags
from grpo_rewards.completions import completion_text
from grpo_rewards.specs import RewardFunction, RewardSpec


def _batch(name: str, matches: Callable[[str], bool], opener: str, value: float, wrong_value: float) -> RewardFunction:
    def reward(completions: list[Any], **columns: Any) -> list[float | None]:
        return [value if matches(opener + completion_text(c)) else wrong_value for c in completions]

    reward.__name__ = name
    return reward


def strict_format(
    reasoning_tag: str = "reasoning",
    answer_tag: str = "answer",
    value: float = 0.5,
    wrong_value: float = 0.0,
    trailing_newline: bool = True,
    opened_in_prompt: bool = False,
) -> RewardFunction:
    """The whole completion is the reasoning block then the answer block, one tag per line (multi-line allowed)."""
    check_tags(reasoning_tag, answer_tag)
    r, a = re.escape(reasoning_tag), re.escape(answer_tag)
    end = r"\n\n?\Z" if trailing_newline else r"\s*\Z"
    layout = re.compile(rf"<{r}>\n.*?\n</{r}>\n<{a}>\n.*?\n</{a}>{end}", re.DOTALL)
    tags = (f"<{reasoning_tag}>", f"</{reasoning_tag}>", f"<{answer_tag}>", f"</{answer_tag}>")

    def matches(text: str) -> bool:
        return all(text.count(t) == 1 for t in tags) and layout.match(text) is not None

    opener = f"<{reasoning_tag}>\n" if opened_in_prompt else ""
    return _batch("strict_format", matches, opener, value, wrong_value)


def soft_format(
    reasoning_tag: str = "reasoning",
    answer_tag: str = "answer",
    value: float = 0.5,
    wrong_value: float = 0.0,
    opened_in_prompt: bool = False,
) -> RewardFunction:
    """The completion starts with a reasoning block followed by an answer block (newlines anywhere)."""
    check_tags(reasoning_tag, answer_tag)
    r, a = re.escape(reasoning_tag), re.escape(answer_tag)
    # re.match(r"<R>.*?</R>\s*<A>.*?</A>", text, re.DOTALL), in linear time: only the first
    # "</R> <A>" can matter (a later one has less text after it to hold "</A>")
    opening, middle, closing = f"<{reasoning_tag}>", re.compile(rf"</{r}>\s*<{a}>"), f"</{answer_tag}>"

    def matches(text: str) -> bool:
        if not text.startswith(opening):
            return False
        found = middle.search(text, len(opening))
        return found is not None and text.find(closing, found.end()) >= 0

    opener = f"<{reasoning_tag}>" if opened_in_prompt else ""
    return _batch("soft_format", matches, opener, value, wrong_value)


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
