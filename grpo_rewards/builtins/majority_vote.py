"""``majority_vote``: correctness against the group's own majority answer (test-time RL's pseudo-label).

Without a reference, the most common final answer among one prompt's completions stands in for it (TTRL,
Zuo et al. 2025): a completion whose answer equals the majority scores ``value``, any other (a different
answer, or none) ``wrong_value``. A group reward (:mod:`grpo_rewards.group_reward`): the rows of one prompt
are one group.

Answers are read with the answer grammar (:func:`grpo_rewards.answers.extraction.extract_answer`, ``extract``)
and counted as equal the way ``exact_match`` compares them with no reference: a number literal by its value as
written (``1,000``, ``1000`` and ``$1000.00`` are one answer; ``50%`` counts as ``50``), any other answer as
normalised text (whitespace collapsed, case folded). A hedge (``41 or 42``; two tags that differ, read as
``41, 42``) is not a number, so it never counts as a vote for ``41`` or ``42``.

No pseudo-label is made, and the whole group scores ``None`` (it does not count), when the group has fewer
than ``min_group`` completions, when no completion has an answer, when two answers tie for the most votes, or
when the majority holds less than ``min_share`` of the group's completions.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from grpo_rewards.answers.extraction import check_extraction, extract_answer
from grpo_rewards.answers.normalize import normalize_text
from grpo_rewards.answers.numbers import format_number, parse_literal
from grpo_rewards.completions import completion_text
from grpo_rewards.group_reward import GroupReward
from grpo_rewards.specs import RewardSpec


def answer_key(completion: Any, extract: str = "auto", pattern: str | None = None) -> str | None:
    """What a completion's answer counts as in a vote: ``number:<value>`` or ``text:<normalised>``; ``None``
    when it has no answer (module docs)."""
    try:
        text = completion_text(completion)
    except TypeError:
        return None
    found = extract_answer(text, extract, pattern=pattern)
    if not found or not found.strip():
        return None
    number = parse_literal(found)
    if number is not None:
        return "number:" + format_number(number.value)
    normalised = normalize_text(found)
    return "text:" + normalised if normalised else None


class MajorityVote:
    """One group's scores against its majority answer (module docs; a module-level class: it pickles)."""

    __name__ = "majority_vote"

    def __init__(self, value: float, wrong_value: float, extract: str, pattern: str | None, min_share: float,
                 min_group: int) -> None:
        self.value, self.wrong_value = value, wrong_value
        self.extract, self.pattern = extract, pattern
        self.min_share, self.min_group = min_share, min_group

    def __repr__(self) -> str:
        return f"MajorityVote(extract={self.extract!r}, min_share={self.min_share}, min_group={self.min_group})"

    def majority(self, keys: list[str | None]) -> str | None:
        """The majority answer of a group's answer keys, or ``None`` when there is no pseudo-label."""
        if len(keys) < self.min_group:
            return None
        counts = Counter(k for k in keys if k is not None).most_common(2)
        if not counts or (len(counts) == 2 and counts[0][1] == counts[1][1]):
            return None
        key, votes = counts[0]
        return key if votes / len(keys) >= self.min_share else None

    def __call__(self, completions: list[Any], **columns: Any) -> list[float | None]:
        keys = [answer_key(c, self.extract, self.pattern) for c in completions]
        top = self.majority(keys)
        if top is None:
            return [None] * len(completions)
        return [self.value if k == top else self.wrong_value for k in keys]


def majority_vote(value: float = 1.0, wrong_value: float = 0.0, extract: str = "auto", pattern: str | None = None,
                  min_share: float = 0.0, min_group: int = 2, by: str = "prompts") -> GroupReward:
    """``value`` when a completion's answer equals the most common answer of its group (test-time RL), else
    ``wrong_value``; no reference needed."""
    check_extraction(extract, pattern)
    if not 0.0 <= min_share <= 1.0:
        raise ValueError(f"min_share must be within [0, 1], got {min_share}")
    if min_group < 1:
        raise ValueError(f"min_group must be >= 1, got {min_group}")
    return GroupReward(MajorityVote(value, wrong_value, extract, pattern, min_share, min_group), by=by,
                       name="majority_vote")


REWARD_SPECS = [
    RewardSpec(
        name="majority_vote",
        factory=majority_vote,
        example='''[rewards.consensus]
use = "majority_vote"  # a group reward: all completions of one prompt are scored together
weight = 1.0
value = 1.0            # an answer equal to the group's most common answer
wrong_value = 0.0      # another answer, or none
min_share = 0.5        # no pseudo-label (the group scores None) unless the majority holds half the group
''',
    ),
]
