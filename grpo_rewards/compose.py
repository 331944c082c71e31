"""Weighted composition of rewards: the total a trainer optimises plus one column per reward.

``ComposedReward`` is itself a TRL-style batch reward (its ``__call__`` returns the
weighted total), and ``trl_reward_funcs()`` gives the separate functions and weights
for ``trl.GRPOTrainer(reward_funcs=..., args=GRPOConfig(reward_weights=...))``.

``None`` means the reward does not apply to that row: the row is left out of that reward's
mean and its term is left out of the weighted total (as in TRL); a row where every reward
returned ``None`` has no total, gets advantage 0, and is named in a warning.
:meth:`ComposedReward.score` logs that warning (TRL's "All reward functions returned None ...").
Weights must be finite; the alias ``total`` is reserved for the sum.

The rewards of one batch are scored concurrently, one thread each (``ComposedReward.concurrent``, on by
default): a reward isolated in a worker process (any reward that pickles), or one that waits on the sandbox
or releases the GIL, runs while the others do; rewards that wrap the same function object share one thread,
in their order. Each reward still gets the same inputs and keeps its own timeout and ``on_error``, and the
total is summed in the entries' order: the scores are those of scoring one reward after another.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from grpo_rewards.contract import SafeReward

log = logging.getLogger("grpo.rewards")

RESERVED_ALIASES = ("total",)


def check_weight(weight: object) -> str | None:
    """Why ``weight`` cannot weight a reward (not a number, or not finite), or None."""
    if isinstance(weight, bool) or not isinstance(weight, (int, float)):
        return f"must be a number, got {weight!r}"
    if not math.isfinite(weight):
        return f"must be a finite number, got {weight!r}"
    return None


@dataclass
class RewardEntry:
    alias: str
    fn: SafeReward
    weight: float = 1.0
    use: str = ""
    reference_column: str | None = None  # the column of text references it compares with (see columns.py)


@dataclass
class Scores:
    """Scores of one batch: ``total[i]`` and ``columns[alias][i]``."""

    total: list[float | None]
    columns: dict[str, list[float | None]]

    def rows(self) -> list[dict[str, float | None]]:
        """One dict per completion: each alias and ``total``."""
        return [
            {**{alias: col[i] for alias, col in self.columns.items()}, "total": self.total[i]}
            for i in range(len(self.total))
        ]


def lanes_of(entries: list[RewardEntry]) -> list[list[RewardEntry]]:
    """The entries grouped by their underlying function object, in order: one lane each, so that a shared object
    is never called twice at once."""
    lanes: dict[int, list[RewardEntry]] = {}
    for e in entries:
        lanes.setdefault(id(getattr(e.fn, "fn", e.fn)), []).append(e)
    return list(lanes.values())


def weighted_scores(entries: list[RewardEntry], per_reward: dict[str, list[Any]], n: int) -> Scores:
    """The weighted total of ``n`` rows from each reward's column (None where every reward gave None, named in a
    warning), summed in the entries' order."""
    total: list[float | None] = []
    for i in range(n):
        parts = [e.weight * per_reward[e.alias][i] for e in entries if per_reward[e.alias][i] is not None]
        total.append(math.fsum(parts) if parts else None)
    unscored = [i for i, t in enumerate(total) if t is None]
    if unscored:
        shown = ", ".join(map(str, unscored[:10])) + (f" (+{len(unscored) - 10} more)" if len(unscored) > 10 else "")
        log.warning("All reward functions returned None for row(s) %s of %d (%s): they get no total and "
                    "advantage 0; check that the rewards apply to these rows", shown, len(total),
                    ", ".join(e.alias for e in entries))
    return Scores(total, {e.alias: per_reward[e.alias] for e in entries})


class ComposedReward:
    """A weighted sum of rewards (see module docs)."""

    __name__ = "total"

    def __init__(self, entries: list[RewardEntry]):
        aliases = [e.alias for e in entries]
        dupes = sorted({a for a in aliases if aliases.count(a) > 1})
        if dupes:
            raise ValueError(f"reward aliases must be unique: {', '.join(dupes)}")
        if not entries:
            raise ValueError("a composed reward needs at least one reward")
        for e in entries:
            if e.alias in RESERVED_ALIASES:
                raise ValueError(f"reward alias {e.alias!r} is reserved (it names the weighted sum); pick another")
            if (why := check_weight(e.weight)) is not None:
                raise ValueError(f"weight of reward {e.alias!r} {why}")
        self.entries = entries
        self.concurrent = True

    def _score_each(self, completions: list[Any], columns: dict[str, Any]) -> dict[str, list[Any]]:
        lanes = lanes_of(self.entries)
        if not self.concurrent or len(lanes) < 2:
            return {e.alias: e.fn(completions, **columns) for e in self.entries}

        def run(lane: list[RewardEntry]) -> dict[str, list[Any]]:
            return {e.alias: e.fn(completions, **columns) for e in lane}

        with ThreadPoolExecutor(max_workers=len(lanes), thread_name_prefix="score") as pool:
            done: dict[str, list[Any]] = {}
            for part in pool.map(run, lanes):
                done.update(part)
        return {e.alias: done[e.alias] for e in self.entries}

    @property
    def aliases(self) -> list[str]:
        return [e.alias for e in self.entries]

    @property
    def weights(self) -> list[float]:
        return [e.weight for e in self.entries]

    def score(self, completions: list[Any], **columns: Any) -> Scores:
        return weighted_scores(self.entries, self._score_each(completions, columns), len(completions))

    def __call__(self, completions: list[Any], **columns: Any) -> list[float | None]:
        return self.score(completions, **columns).total

    def close(self) -> None:
        """Stop what the rewards hold (worker processes, model processes); a later call starts them again. A
        trainer calls it when its run ends."""
        for e in self.entries:
            close = getattr(e.fn, "close", None)
            if callable(close):
                close()

    def trl_reward_funcs(self) -> tuple[list[Callable[..., list[float | None]]], list[float]]:
        """``(reward_funcs, reward_weights)`` for ``trl.GRPOTrainer``; each function is named by its alias."""
        return [e.fn for e in self.entries], self.weights


def compose(
    rewards: Mapping[str, Callable[..., Any] | tuple[Callable[..., Any], float]],
    *,
    on_error: str | None = None,
    timeout: float | None = None,
) -> ComposedReward:
    """Compose rewards in Python: ``compose({"fmt": (xml_count(), 0.5), "correct": exact_match()})``.

    A value is a reward function (weight 1) or a ``(function, weight)`` pair. A plain
    function is wrapped in :class:`SafeReward` with ``on_error`` and ``timeout`` (the
    :class:`SafeReward` defaults when not given); a function that already is a
    :class:`SafeReward` keeps its own ``on_error``, ``timeout``, ``max_consecutive_failures``
    and plugin name, and is renamed to its alias.
    """
    entries = []
    for alias, value in rewards.items():
        fn, weight = value if isinstance(value, tuple) else (value, 1.0)
        if (why := check_weight(weight)) is not None:
            raise ValueError(f"weight of reward {alias!r} {why}")
        if isinstance(fn, SafeReward):
            safe = SafeReward(fn.fn, alias, on_error=fn.on_error, timeout=fn.timeout, plugin=fn.plugin,
                              max_consecutive_failures=fn.max_consecutive_failures)
        else:
            safe = SafeReward(fn, alias, on_error=on_error or "none", timeout=timeout)
        entries.append(RewardEntry(alias, safe, float(weight)))
    return ComposedReward(entries)
