"""One reward in its own killable process (:class:`RewardWorker`): the reward's side of the protocol.

The process, its deadline and its kill are :class:`grpo_rewards.isolation.process.ProcessWorker`'s;
this module adds what a reward call needs on top: the batch is scored with
:func:`grpo_rewards.batch_outcome.score_batch` in the child (as in the thread fallback, so both
paths give the same scores), the reward's ``metrics()`` come back after every call, and a callable
keyword argument (TRL's ``log_metric``, ``log_extra``: bound methods of a trainer, which must not be
pickled with it) is replaced in the child by a recorder whose calls are made here afterwards.
"""

from __future__ import annotations

import contextlib
import logging
import pickle
from typing import Any

from grpo_rewards.batch_outcome import BatchOutcome, score_batch
from grpo_rewards.isolation.failed import WorkerFailed
from grpo_rewards.isolation.process import DEFAULT_START_TIMEOUT, ProcessWorker, pickled_or_none

__all__ = ["DEFAULT_START_TIMEOUT", "RewardWorker", "WorkerFailed", "pickled_or_none", "split_callbacks"]

Call = tuple[str, tuple[Any, ...], dict[str, Any]]


class _Recorder:
    """Stands in the child for a callable keyword argument: the calls are recorded and made in the parent
    after the batch, with the same arguments."""

    def __init__(self, name: str, calls: list[Call]):
        self.name, self.calls = name, calls

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        self.calls.append((self.name, args, kwargs))


def _picklable(calls: list[Call]) -> list[Call]:
    out = []
    for call in calls:
        try:
            pickle.dumps(call)
        except Exception:  # noqa: BLE001 - a call whose arguments cannot travel is dropped
            continue
        out.append(call)
    return out


def split_callbacks(columns: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(data, callbacks)``: callable keyword arguments are replaced by recorders in the child and called
    here afterwards."""
    callbacks = {k: v for k, v in columns.items() if callable(v) and not isinstance(v, type)}
    return {k: v for k, v in columns.items() if k not in callbacks}, callbacks


def serve_batch(fn: Any, request: tuple[list[Any], dict[str, Any], list[str]]
                ) -> tuple[BatchOutcome, dict[str, Any], list[Call]]:
    """In the child: score one batch; the reward's ``metrics()`` and the recorded callback calls with it."""
    completions, columns, callbacks = request
    calls: list[Call] = []
    columns.update({name: _Recorder(name, calls) for name in callbacks})
    outcome = score_batch(fn, completions, columns)
    report = getattr(fn, "metrics", None)
    metrics: dict[str, Any] = {}
    if callable(report):
        with contextlib.suppress(Exception):
            metrics = {k: v for k, v in dict(report()).items() if isinstance(v, (int, float, str, bool))}
    return outcome, metrics, _picklable(calls)


class RewardWorker(ProcessWorker):
    """A child process holding one reward. Thread-safe; one call at a time."""

    def __init__(self, payload: bytes, name: str, *, start_timeout: float = DEFAULT_START_TIMEOUT):
        super().__init__(payload, name, serve_batch, start_timeout=start_timeout)

    def call(self, completions: list[Any], columns: dict[str, Any], timeout: float) -> tuple[BatchOutcome, dict[str, Any]]:
        """``score_batch(reward, completions, columns)`` in the child, and the reward's ``metrics()``.

        A column that cannot be pickled raises ``WorkerFailed("unsendable")`` before anything is sent."""
        data, callbacks = split_callbacks(columns)
        outcome, metrics, calls = self.request((completions, data, sorted(callbacks)), timeout)
        for name, args, kwargs in calls:
            try:
                callbacks[name](*args, **kwargs)
            except Exception as exc:  # noqa: BLE001 - the reward's logging call, not its score
                logging.getLogger("grpo.rewards").debug("reward %r: %s(...) raised %s", self.name, name, exc)
        return outcome, metrics
