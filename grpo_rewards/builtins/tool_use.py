"""``tool_use`` reward: calling tools well in a multi-turn rollout, without a way to farm it.

A completion is a conversation (TRL's format: assistant turns with their ``tool_calls``, ``tool`` messages with
the answers). It scores::

    value          when at least one call succeeded and the conversation ends in an answer of the model's own
                   (a last assistant turn that calls no tool and is not empty)
  - error_penalty  per failed call (an unknown tool, a malformed call, a tool that raised or timed out), and per
                   call over ``max_calls`` (0: no limit)
    the penalty at most max_penalty

so the score lies in ``[-max_penalty, value]``. The pay is one term, not a term per call: a second successful
call never pays more than the first, and calls past ``max_calls`` cost (looping calls to farm the reward only
loses). An erroring call never pays. The reward reads no reference and no tool output: a call whose output holds
the answer earns nothing more than any other successful call, and a conversation that stops at a tool's output,
without the model answering, earns no ``value`` (the correctness rewards read the model's own last turn only,
:func:`grpo_rewards.completions.completion_text`, so such a conversation has no answer to them either).

The counts come from the columns the trainer passes with a multi-turn batch (``num_tool_calls``,
``num_tool_errors``); without them (a conversation given directly) they are read off the conversation: one call
per ``tool`` message, an error where its content starts with ``error`` (this project's tool messages) or is
TRL's ``{'error': ...}``. A plain-text completion made no call: ``no_call_value``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from grpo_rewards.completions import completion_text
from grpo_rewards.specs import RewardSpec


def _is_error(content: Any) -> bool:
    text = content if isinstance(content, str) else str(content)
    return text.lstrip().startswith(("error", "{'error'", '{"error"'))


def conversation_counts(completion: Any) -> tuple[int, int]:
    """``(calls, errors)`` read off a conversation: one call per ``tool`` message (module docs)."""
    if not isinstance(completion, (list, tuple)):
        return 0, 0
    answers = [m for m in completion if isinstance(m, dict) and m.get("role") == "tool"]
    return len(answers), sum(_is_error(m.get("content", "")) for m in answers)


def _column(columns: dict[str, Any], name: str, n: int) -> Sequence[Any] | None:
    values = columns.get(name)
    if values is None:
        return None
    if len(values) != n:
        raise ValueError(f"{n} completions but {len(values)} values in column {name!r}")
    return values


def _count(cell: Any, fallback: int) -> int:
    """A count from a column's cell; ``fallback`` (the conversation's own) where the cell holds none."""
    if isinstance(cell, bool) or not isinstance(cell, (int, float)) or not math.isfinite(cell) or cell < 0:
        return fallback
    return int(cell)


class ToolUse:
    """The batch reward :func:`tool_use` returns (a module-level class: it pickles)."""

    __name__ = "tool_use"

    def __init__(self, value: float, error_penalty: float, max_penalty: float, max_calls: int,
                 no_call_value: float) -> None:
        for name, number in (("value", value), ("error_penalty", error_penalty), ("max_penalty", max_penalty)):
            if not isinstance(number, (int, float)) or isinstance(number, bool) or not number >= 0:
                raise ValueError(f"{name} must be a number >= 0, got {number!r}")
        if not isinstance(max_calls, int) or isinstance(max_calls, bool) or max_calls < 0:
            raise ValueError(f"max_calls must be a whole number >= 0 (0 = no limit), got {max_calls!r}")
        if not isinstance(no_call_value, (int, float)) or isinstance(no_call_value, bool) \
                or not -max_penalty <= no_call_value <= value:
            raise ValueError(f"no_call_value must be a number within [-max_penalty, value] = [{-max_penalty:g}, "
                             f"{value:g}], got {no_call_value!r}")
        self.value, self.error_penalty, self.max_penalty = float(value), float(error_penalty), float(max_penalty)
        self.max_calls, self.no_call_value = max_calls, float(no_call_value)

    def __repr__(self) -> str:
        return (f"ToolUse(value={self.value:g}, error_penalty={self.error_penalty:g}, "
                f"max_penalty={self.max_penalty:g}, max_calls={self.max_calls})")

    def score(self, calls: int, errors: int, answered: bool) -> float:
        """The score of a conversation with ``calls`` tool calls, ``errors`` of them failed (module docs)."""
        if calls <= 0:
            return self.no_call_value
        errors = min(max(errors, 0), calls)
        over = max(0, calls - self.max_calls) if self.max_calls else 0
        paid = self.value if calls > errors and answered else 0.0
        return paid - min(self.max_penalty, self.error_penalty * (errors + over))

    def __call__(self, completions: list[Any], **columns: Any) -> list[float | None]:
        n = len(completions)
        calls_col, errors_col = _column(columns, "num_tool_calls", n), _column(columns, "num_tool_errors", n)
        out: list[float | None] = []
        for i, completion in enumerate(completions):
            calls, errors = conversation_counts(completion)
            calls = _count(calls_col[i], calls) if calls_col is not None else calls
            errors = _count(errors_col[i], errors) if errors_col is not None else errors
            out.append(self.score(calls, errors, bool(completion_text(completion).strip())))
        return out


def tool_use(
    value: float = 1.0,
    error_penalty: float = 0.5,
    max_penalty: float = 1.0,
    max_calls: int = 0,
    no_call_value: float = 0.0,
) -> ToolUse:
    """Calling tools well: ``value`` once for a successful call followed by an answer, minus ``error_penalty``
    per failed call (and per call over ``max_calls``), at most ``max_penalty``; never more for more calls."""
    return ToolUse(value, error_penalty, max_penalty, max_calls, no_call_value)


REWARD_SPECS = [
    RewardSpec(
        name="tool_use",
        factory=tool_use,
        example='''[rewards.tools]
use = "tool_use"
weight = 0.5
value = 1.0            # paid once: a call succeeded and the model then answered (more calls never pay more)
error_penalty = 0.5    # per failed call, and per call over max_calls
max_penalty = 1.0      # the most the penalties take: scores lie in [-max_penalty, value]
max_calls = 0          # calls allowed before each costs error_penalty (0: no limit)
no_call_value = 0.0    # a completion that called no tool

[rewards.correct]      # compose with a correctness reward: it reads the model's own last turn, never a tool's
use = "exact_match"
''',
    ),
]
