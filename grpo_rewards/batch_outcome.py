"""One call of a reward on a batch and what it produced: :class:`BatchOutcome`, :func:`score_batch`.

The reward contract (:mod:`grpo_rewards.contract`) decides what a failure costs; this module only
calls the reward and describes the result. :func:`score_batch` runs the same way in a reward's
worker process (:mod:`grpo_rewards.reward_worker`) as in a thread, so both give the same scores.
"""

from __future__ import annotations

import decimal
import inspect
import math
import numbers
import os
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from grpo_rewards.group_reward import columns_of


@dataclass
class BatchOutcome:
    """What one call produced: ``values`` (one per row), or a whole-call failure (``kind``, ``message``).

    ``row_failures`` maps a row to why it has no score (it raised on its own, or its value
    was not a finite number); ``where`` is ``file:line`` of the first exception raised.
    """

    values: list[float | None] | None
    kind: str = ""
    message: str = ""
    where: str = ""
    row_failures: dict[int, tuple[str, str]] = field(default_factory=dict)  # row -> (kind, why)


def to_score(value: Any) -> float | None:
    """A reward's value for one row as a float (or None); ``ValueError`` for anything else or non-finite."""
    if value is None:
        return None
    if isinstance(value, (numbers.Real, decimal.Decimal)):
        out = float(value)
    elif _is_scalar_like(value):  # a 0-d or one-element tensor/array
        item = value.item()
        if not isinstance(item, (numbers.Real, decimal.Decimal)):
            raise ValueError(repr(value))
        out = float(item)
    else:
        raise ValueError(repr(value))
    if not math.isfinite(out):
        raise ValueError(repr(value))
    return out


def _is_scalar_like(value: Any) -> bool:
    """A one-element tensor or array (``torch.tensor(1.0)``, ``np.array([1.0])``)."""
    if isinstance(value, (str, bytes)) or not callable(getattr(value, "item", None)):
        return False
    size = getattr(value, "numel", None) or getattr(value, "size", None)
    try:
        return (size() if callable(size) else size) == 1
    except Exception:  # noqa: BLE001
        return False


def _as_list(result: Any) -> list[Any]:
    if isinstance(result, (str, bytes, dict)) or not hasattr(result, "__iter__"):
        raise TypeError(type(result).__name__)
    if getattr(result, "ndim", 1) == 0:  # a 0-d tensor/array is one number, not a list
        raise TypeError(type(result).__name__)
    return list(result)


def _where(exc: BaseException, fn: Any) -> str:
    """``file:line`` where ``exc`` was raised: the deepest frame in the reward's own file if any."""
    frames = traceback.extract_tb(exc.__traceback__)
    frames = [f for f in frames if f.filename != __file__]
    if not frames:
        return ""
    fn = inspect.unwrap(fn) if hasattr(fn, "__wrapped__") else fn  # a wrapper's user function: the user's file
    try:
        source = inspect.getsourcefile(fn if inspect.isfunction(fn) else type(fn)) or ""
    except (TypeError, OSError):
        source = ""
    source = os.path.realpath(source) if source else ""
    own = [f for f in frames if source and os.path.realpath(f.filename) == source]
    frame = (own or frames)[-1]
    return f"{frame.filename}:{frame.lineno}"


def describe_exception(exc: BaseException) -> str:
    """``raised KeyError: 'x'``: an exception as a failure message says it."""
    return f"raised {type(exc).__name__}: {exc}"


def score_batch(fn: Callable[..., Any], completions: list[Any], columns: dict[str, Any]) -> BatchOutcome:
    """Call ``fn`` on the batch, retrying row by row if it raises; values converted by :func:`to_score`."""
    n = len(completions)
    try:
        result = fn(completions, **columns)
    except Exception as exc:  # noqa: BLE001 - retried row by row below
        if n <= 1:
            return BatchOutcome(None, "exception", describe_exception(exc), _where(exc, fn))
        return _row_by_row(fn, completions, columns, exc)
    try:
        raw = _as_list(result)
    except TypeError:
        return BatchOutcome(None, "type", f"returned {type(result).__name__}, expected a list of {n} numbers or None")
    if len(raw) != n:
        return BatchOutcome(None, "length", f"returned {len(raw)} scores for {n} completions")
    outcome = BatchOutcome([None] * n)
    assert outcome.values is not None
    for i, value in enumerate(raw):
        try:
            outcome.values[i] = to_score(value)
        except ValueError as exc:
            outcome.row_failures[i] = ("value", str(exc))
    return outcome


def _parts(fn: Callable[..., Any], completions: list[Any], columns: dict[str, Any]) -> list[list[int]]:
    """The units a failed call is retried in: each group of a group reward (its ``row_groups``), else each row."""
    groups = getattr(fn, "row_groups", None)
    if callable(groups):
        try:
            return [list(g) for g in groups(completions, **columns)]
        except Exception:  # noqa: BLE001 - the batch cannot be grouped: the whole call failed
            return []
    return [[i] for i in range(len(completions))]


def _row_by_row(fn: Callable[..., Any], completions: list[Any], columns: dict[str, Any], first: Exception) -> BatchOutcome:
    """Retry a call that raised row by row (group by group for a group reward): only the failing rows lose their
    scores."""
    n = len(completions)
    outcome = BatchOutcome([None] * n, where=_where(first, fn))
    assert outcome.values is not None
    parts = _parts(fn, completions, columns)
    if len(parts) <= 1:  # one group (or none to be found): retrying it is the same call
        return BatchOutcome(None, "exception", describe_exception(first), outcome.where)
    for index in parts:
        try:
            raw = _as_list(fn([completions[i] for i in index], **columns_of(columns, index, n)))
            if len(raw) != len(index):
                raise ValueError(f"returned {len(raw)} scores for {len(index)} completion(s)")
        except Exception as exc:  # noqa: BLE001 - this row (group) alone fails
            for i in index:
                outcome.row_failures[i] = ("exception", describe_exception(exc))
            continue
        for i, value in zip(index, raw, strict=True):
            try:
                outcome.values[i] = to_score(value)
            except ValueError as exc:
                outcome.row_failures[i] = ("value", str(exc))
    if len(outcome.row_failures) == n and all(k == "exception" for k, _ in outcome.row_failures.values()):
        return BatchOutcome(None, "exception", describe_exception(first), outcome.where)
    return outcome
