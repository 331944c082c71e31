"""Group-level rewards: a reward that sees all completions of one prompt at once (:func:`group_reward`).

A group reward's author writes a function of *one group*: ``fn(completions, **columns) -> list[score]``,
with the group's completions and each per-row column sliced to the group's rows, returning one score per
completion (``None`` where the reward does not apply). :func:`group_reward` turns it into a batch reward with
TRL's signature that groups the rows itself, so it works wherever any reward does: composed in a TOML config,
in ``grpo_core``'s trainer and in ``trl.GRPOTrainer(reward_funcs=[...])``::

    from grpo_rewards import group_reward

    @group_reward
    def agreement(completions, **columns):          # one prompt's completions
        answers = [extract_answer(completion_text(c)) for c in completions]
        return [answers.count(a) / len(answers) if a else 0.0 for a in answers]

Rows belong to one group when their ``by`` column (default ``prompts``, which the trainer and TRL always
pass) holds equal values, wherever they sit in the batch: a permutation of the batch permutes the scores, and
a group's scores do not depend on the other groups of the batch (the conformance kit checks both:
:class:`grpo_rewards.testing.GroupRewardConformance`). Two rows of the data with the same prompt in one batch
are one group. Each process of a run scores whole groups (the trainer never splits one); under TRL with several
processes a group can be split across them, and each part is then scored as a group of its own.

When a call raises, :mod:`grpo_rewards.batch_outcome` retries group by group (:meth:`GroupReward.row_groups`),
never row by row, so a failing group loses its scores and the other groups keep theirs; a group is never
scored as groups of one.

A decorated module-level function pickles by its module and name (so it runs in its own worker process, where
a timeout can stop it); ``GroupReward(fn)`` with a module-level ``fn`` pickles too.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from typing import Any, overload

DEFAULT_BY = "prompts"


def _key(value: Any) -> Any:
    """A hashable key for a grouping value: text as it is, chat messages and other structures as canonical JSON."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=repr)


def _len(value: Any) -> int | None:
    try:
        return len(value)
    except TypeError:
        return None


def columns_of(columns: dict[str, Any], index: Sequence[int], n: int) -> dict[str, Any]:
    """Rows ``index`` of every per-row column (a sequence of length ``n``); other keyword values as they are."""
    out = {}
    for key, value in columns.items():
        if not isinstance(value, (str, bytes, dict)) and hasattr(value, "__getitem__") and _len(value) == n:
            out[key] = value[index[0]:index[0] + 1] if len(index) == 1 else [value[i] for i in index]
        else:
            out[key] = value
    return out


def group_rows(values: Sequence[Any]) -> list[list[int]]:
    """The row positions of each group of equal ``values``, groups in the order of their first row."""
    groups: dict[Any, list[int]] = {}
    for i, value in enumerate(values):
        groups.setdefault(_key(value), []).append(i)
    return list(groups.values())


class GroupReward:
    """A batch reward built from a function of one group (module docs); ``by`` names the grouping column."""

    def __init__(self, fn: Callable[..., Any], by: str = DEFAULT_BY, name: str | None = None) -> None:
        if not callable(fn):
            raise TypeError(f"a group reward wraps a function, got {type(fn).__name__}")
        if not isinstance(by, str) or not by:
            raise ValueError(f"by must name a column, got {by!r}")
        self.fn, self.by = fn, by
        self.__name__ = name or getattr(fn, "__name__", type(fn).__name__)
        self.__doc__ = getattr(fn, "__doc__", None)
        self.__wrapped__ = fn  # failures are reported at the author's file:line
        self._qualname = getattr(fn, "__qualname__", "")
        self._module = getattr(fn, "__module__", None)

    def __repr__(self) -> str:
        return f"GroupReward({self.__name__!r}, by={self.by!r})"

    def __reduce__(self) -> Any:
        module = sys.modules.get(self._module or "")
        if module is not None and getattr(module, self._qualname, None) is self:
            return _by_name, (self._module, self._qualname)
        return GroupReward, (self.fn, self.by, self.__name__)

    def metrics(self) -> dict[str, Any]:
        report = getattr(self.fn, "metrics", None)
        return dict(report()) if callable(report) else {}

    def worst_case(self) -> float:
        """The wrapped reward's ``worst_case()`` (a judge's requests with their retries), else 0."""
        worst = getattr(self.fn, "worst_case", None)
        return float(worst()) if callable(worst) else 0.0

    def row_groups(self, completions: Sequence[Any], **columns: Any) -> list[list[int]]:
        """The row positions of each group of the batch (by the ``by`` column)."""
        n = len(completions)
        if self.by not in columns or columns[self.by] is None:
            raise KeyError(f"column {self.by!r} is missing: the group reward {self.__name__!r} groups rows by it")
        values = columns[self.by]
        if _len(values) != n:
            raise ValueError(f"column {self.by!r} has {_len(values)} values for {n} completions")
        return group_rows(values)

    def __call__(self, completions: Sequence[Any], **columns: Any) -> list[Any]:
        n = len(completions)
        out: list[Any] = [None] * n
        for index in self.row_groups(completions, **columns):
            scores = list(self.fn([completions[i] for i in index], **columns_of(columns, index, n)))
            if len(scores) != len(index):
                raise ValueError(f"returned {len(scores)} scores for a group of {len(index)} completions")
            for i, score in zip(index, scores, strict=True):
                out[i] = score
        return out


def _by_name(module: str, qualname: str) -> Any:
    """The object at ``module.qualname`` (how a decorated module-level group reward unpickles)."""
    obj: Any = __import__(module, fromlist=["_"])
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


@overload
def group_reward(fn: Callable[..., Any], *, by: str = DEFAULT_BY) -> GroupReward: ...
@overload
def group_reward(fn: None = None, *, by: str = DEFAULT_BY) -> Callable[[Callable[..., Any]], GroupReward]: ...


def group_reward(fn: Callable[..., Any] | None = None, *, by: str = DEFAULT_BY) -> Any:
    """Turn ``fn(completions_of_one_group, **columns_of_that_group) -> scores`` into a batch reward with TRL's
    signature that groups the batch's rows by the ``by`` column (module docs). ``@group_reward`` or
    ``@group_reward(by="question_id")``."""
    if fn is None:
        return lambda f: GroupReward(f, by)
    return GroupReward(fn, by)
