"""Scoring one batch part by part, as its parts arrive: what lets rewards run while generation goes on.

``StreamingScore(composed)`` takes the parts of one batch in order (``add(completions, **columns)``, e.g. a
few finished groups at a time), scores each on worker threads while the caller goes on, and ``result()``
joins and returns the :class:`~grpo_rewards.compose.Scores` of the whole batch, in the batch's order:

- each reward gets the parts in order, on one thread per lane (rewards that wrap the same function object
  share a lane), so a reward never runs twice at once and sees its rows in the batch's order; with
  ``composed.concurrent = False`` all rewards share one lane, one after another as ``score`` calls them;
- each reward's parts are one batch for its contract (:meth:`SafeReward.in_parts`): one ``timeout`` for the
  parts together, one call towards ``max_consecutive_failures``, a failure filling only its own part's rows;
- the total is summed in the entries' order and the "All reward functions returned None" warning names the
  rows by their place in the whole batch: the scores of a reward that scores each row on its own are those
  of ``composed.score`` on the whole batch.

A reward that computes something over the whole batch (a batch-relative length penalty, a normalisation)
sees one part at a time here: a trainer lets such a run score after generation instead.
An exception a reward lets through (``on_error = "raise"``) is raised by ``result()``; leaving the ``with``
block waits for the parts being scored and drops the ones not started.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from grpo_rewards.compose import ComposedReward, RewardEntry, Scores, lanes_of, weighted_scores


class StreamingScore:
    """One batch of ``composed`` scored part by part (see module docs); use it as a context manager."""

    def __init__(self, composed: ComposedReward):
        self.entries = composed.entries
        self.lanes = lanes_of(self.entries) if composed.concurrent else [list(self.entries)]
        self._batches = {e.alias: e.fn.in_parts() if hasattr(e.fn, "in_parts") else None for e in self.entries}
        self._pools = [ThreadPoolExecutor(max_workers=1, thread_name_prefix="score") for _ in self.lanes]
        self._parts: list[list[Future[dict[str, list[Any]]]]] = []
        self.rows = 0

    def __enter__(self) -> StreamingScore:
        return self

    def __exit__(self, *exc: object) -> None:
        for pool in self._pools:
            pool.shutdown(wait=True, cancel_futures=True)

    def _run(self, lane: list[RewardEntry], completions: list[Any], columns: dict[str, Any]) -> dict[str, list[Any]]:
        out = {}
        for e in lane:
            batch = self._batches[e.alias]
            out[e.alias] = (batch or e.fn)(completions, **columns)
        return out

    def add(self, completions: list[Any], **columns: Any) -> None:
        """Queue the next part of the batch (its rows follow the parts added before)."""
        self.rows += len(completions)
        self._parts.append([pool.submit(self._run, lane, list(completions), dict(columns))
                            for lane, pool in zip(self.lanes, self._pools, strict=True)])

    def result(self) -> Scores:
        """Wait for every part and return the whole batch's scores (what a reward raised is raised here)."""
        per_reward: dict[str, list[Any]] = {e.alias: [] for e in self.entries}
        for futures in self._parts:
            for future in futures:
                for alias, values in future.result().items():
                    per_reward[alias].extend(values)
        for e in self.entries:
            if (batch := self._batches[e.alias]) is not None:
                batch.close()
        return weighted_scores(self.entries, per_reward, self.rows)
