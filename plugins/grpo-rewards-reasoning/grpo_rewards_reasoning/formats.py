"""Format rewards: TRL's ``think_format_reward``, open-r1's ``reasoning_steps_reward`` and ``code_format_reward``.

Each scores the layout of a completion, never its correctness, with the peers' rules:

* ``think_format``: 1.0 when the completion opens with ``<think>``, closes it, and opens no
  second ``<think>`` (TRL's ``^<think>(?!.*<think>)(.*?)</think>.*$``), else 0.0.
* ``reasoning_steps``: ``min(1, markers / target_steps)``, counting open-r1's step markers
  (``Step N:``, a leading ``N.``, ``\\n-``, ``\\n*``, ``First,``, ``Second,``, ``Next,``, ``Finally,``).
* ``code_format``: 1.0 for open-r1's ``^<think>\\n.*?\\n</think>\\n<answer>\\n.*?```LANG.*?```.*?\\n</answer>$``
  (DOTALL, MULTILINE), else 0.0. The row's ``language`` column, when given, overrides ``language``.
  The rule is decided by a left-to-right scan instead of the regex, which backtracks for
  minutes on a long completion with many candidate tags; the tests check both agree.
"""

from __future__ import annotations

import re
from typing import Any

from grpo_rewards import completion_text

_STEP = re.compile(r"(Step \d+:|^\d+\.|\n-|\n\*|First,|Second,|Next,|Finally,)")
_TAG_NAME = re.compile(r"[A-Za-z_][\w.-]*")


class ThinkFormat:
    """The ``think_format`` reward (module docs); a module-level class, so it pickles."""

    __name__ = "think_format"

    def __init__(self, tag: str, value: float) -> None:
        self.tag, self.value = tag, value
        t = re.escape(tag)
        self._pattern = re.compile(rf"^<{t}>(?!.*<{t}>)(.*?)</{t}>.*$", re.DOTALL | re.MULTILINE)

    def __call__(self, completions: list[Any], **columns: Any) -> list[float | None]:
        return [self.value if self._pattern.match(completion_text(c)) else 0.0 for c in completions]


def think_format(*, tag: str = "think", value: float = 1.0) -> ThinkFormat:
    """TRL's think_format_reward: ``value`` when the reasoning is enclosed in one leading <think>...</think>."""
    if not _TAG_NAME.fullmatch(tag):
        raise ValueError(f"tag must be a tag name such as 'think', got {tag!r}")
    return ThinkFormat(tag, value)


class ReasoningSteps:
    """The ``reasoning_steps`` reward (module docs)."""

    __name__ = "reasoning_steps"

    def __init__(self, target_steps: int) -> None:
        self.target_steps = target_steps

    def __call__(self, completions: list[Any], **columns: Any) -> list[float | None]:
        return [min(1.0, len(_STEP.findall(completion_text(c))) / self.target_steps) for c in completions]


def reasoning_steps(*, target_steps: int = 3) -> ReasoningSteps:
    """open-r1's reasoning_steps_reward: min(1, step markers / target_steps) ("Step 1:", "First,", bullets...)."""
    if isinstance(target_steps, bool) or not isinstance(target_steps, int) or target_steps < 1:
        raise ValueError(f"target_steps must be an integer >= 1, got {target_steps!r}")
    return ReasoningSteps(target_steps)


def code_format_matches(text: str, language: str) -> bool:
    """open-r1's code-format regex, decided by scanning: earliest think end, fence, closing fence, then any
    ``\\n</answer>`` at the end of a line (taking each earliest leaves the most room for what follows)."""
    if not text.startswith("<think>\n"):
        return False
    middle = text.find("\n</think>\n<answer>\n", len("<think>\n"))
    if middle < 0:
        return False
    fence = text.find("```" + language, middle + len("\n</think>\n<answer>\n"))
    if fence < 0:
        return False
    close = text.find("```", fence + 3 + len(language))
    if close < 0:
        return False
    end = text.find("\n</answer>", close + 3)
    while end >= 0:
        after = end + len("\n</answer>")
        if after == len(text) or text[after] == "\n":
            return True
        end = text.find("\n</answer>", end + 1)
    return False


class CodeFormat:
    """The ``code_format`` reward (module docs)."""

    __name__ = "code_format"

    def __init__(self, language: str, value: float) -> None:
        self.language, self.value = language, value

    def __call__(self, completions: list[Any], **columns: Any) -> list[float | None]:
        languages = columns.get("language")
        if languages is None:
            languages = [self.language] * len(completions)
        return [
            self.value if code_format_matches(completion_text(c), str(lang or self.language)) else 0.0
            for c, lang in zip(completions, languages, strict=True)
        ]


def code_format(*, language: str = "python", value: float = 1.0) -> CodeFormat:
    """open-r1's code_format_reward: ``value`` for <think>...</think> then an <answer> holding a ```LANG block."""
    if not language or any(ch.isspace() or ch == "`" for ch in language):
        raise ValueError(f"language must be a fence language name such as 'python', got {language!r}")
    return CodeFormat(language, value)
