"""``integer_format`` reward: the extracted answer is written as a bare integer.

Unsloth's GSM8K notebook (``int_reward_func``) scores 0.5 when the text inside
``<answer>`` satisfies ``str.isdigit()``. Defaults match that (0.5, no sign), with
these deliberate differences: the answer is found with ``extract`` (``auto`` by
default, so ``#### 72`` counts too); only ASCII digits count (``isdigit`` also
accepts ``²`` and ``٣``); ``allow_negative = true`` also accepts ``-7`` / ``−7``;
and ``strict = false`` judges the value instead of the writing, so ``1,000``,
``$72`` and ``4.0`` count as integers. Several answers are hedging, not an answer:
with several ``<answer>`` tags that differ, every tag is read and the list is no
integer (the notebook reads the last tag only).
"""

from __future__ import annotations

from typing import Any

from grpo_rewards.answers.extraction import check_extraction, extract_answer
from grpo_rewards.answers.numbers import is_integer_literal, parse_number
from grpo_rewards.completions import completion_text
from grpo_rewards.specs import RewardSpec


class IntegerFormat:
    """The ``integer_format`` reward (module docs; a module-level class: it pickles)."""

    __name__ = "integer_format"

    def __init__(self, value: float = 0.5, wrong_value: float = 0.0, allow_negative: bool = False,
                 strict: bool = True, extract: str = "auto", pattern: str | None = None) -> None:
        check_extraction(extract, pattern)
        self.value, self.wrong_value = value, wrong_value
        self.allow_negative, self.strict = allow_negative, strict
        self.extract, self.pattern = extract, pattern

    def __repr__(self) -> str:
        return (f"IntegerFormat(value={self.value!r}, allow_negative={self.allow_negative}, strict={self.strict}, "
                f"extract={self.extract!r})")

    def is_integer(self, answer: str | None) -> bool:
        """Whether ``answer`` counts as an integer (written as one, or with ``strict = false`` worth one)."""
        if answer is None:
            return False
        if self.strict:
            return is_integer_literal(answer, allow_negative=self.allow_negative)
        number = parse_number(answer)
        return number is not None and number.denominator == 1 and (self.allow_negative or number >= 0)

    def __call__(self, completions: list[Any], **columns: Any) -> list[float | None]:
        extract, pattern, is_integer = self.extract, self.pattern, self.is_integer
        answers = (extract_answer(completion_text(c), extract, pattern=pattern) for c in completions)
        return [self.value if is_integer(a) else self.wrong_value for a in answers]


def integer_format(
    value: float = 0.5,
    wrong_value: float = 0.0,
    allow_negative: bool = False,
    strict: bool = True,
    extract: str = "auto",
    pattern: str | None = None,
) -> IntegerFormat:
    """Reward an answer written as an integer (Unsloth's int_reward_func: 0.5 when it is digits)."""
    return IntegerFormat(value, wrong_value, allow_negative, strict, extract, pattern)


REWARD_SPECS = [
    RewardSpec(
        name="integer_format",
        factory=integer_format,
        example='''[rewards.integer]
use = "integer_format"
weight = 1.0
value = 0.5            # Unsloth's int_reward_func
allow_negative = false # true also rewards -7
strict = true          # false: judge the value, so "1,000" and "4.0" count
''',
    ),
]
