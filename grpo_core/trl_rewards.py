"""A TRL reward function as TRL calls it: :class:`TrlReward`.

TRL (1.16, ``GRPOTrainer._calculate_rewards``) calls a reward with every argument by keyword: ``prompts``,
``completions``, ``completion_ids``, every dataset column, ``trainer_state``, and two loggers, ``log_metric(name,
value)`` (a scalar averaged over the logging step) and ``log_extra(column, values)`` (a column of the completions
table); an ``async def`` reward is awaited. Here the loggers collect into the wrapper, whose ``metrics()``
reports each metric's mean since the last report (``rewards/<alias>/<name>`` in ``metrics.jsonl``; from a
worker process too, as :class:`grpo_rewards.SafeReward` ships ``metrics()`` back) and the last batch's extra
columns (``extra/<column>``, the mean of its numbers). ``__wrapped__`` is the user's function, so a failure
names the user's file and line rather than this module's.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

TRL_LOGGERS = ("log_metric", "log_extra")


class TrlReward:
    """A TRL-style reward callable called the way TRL calls it: every argument by keyword (so
    ``fn(prompts, completions, **kw)`` works), or the completions first when it has no ``completions``
    parameter; keyword arguments it cannot take are left out; a coroutine it returns is run to its end.
    Pickles when the function does (then it runs in a worker process under :class:`SafeReward`)."""

    def __init__(self, fn: Callable[..., Any]):
        self.fn = fn
        self.__wrapped__ = fn
        self.__name__ = getattr(fn, "__name__", type(fn).__name__)
        try:
            params = inspect.signature(fn).parameters
        except (TypeError, ValueError):  # a builtin without a signature: pass everything
            params = {}
        self._by_keyword = "completions" in params
        self._accepts = None if not params or any(p.kind is p.VAR_KEYWORD for p in params.values()) else set(params)
        self._metrics: dict[str, list[float]] = {}
        self._extra: dict[str, list[Any]] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_metrics": {}, "_extra": {}}

    def _log_metric(self, name: str, value: float) -> None:
        self._metrics.setdefault(str(name), []).append(float(value))

    def _log_extra(self, column: str, values: list[Any]) -> None:
        self._extra[str(column)] = list(values)

    def __call__(self, completions: list[Any], **columns: Any) -> Any:
        columns = {**columns, "log_metric": self._log_metric, "log_extra": self._log_extra}
        if self._accepts is not None:
            columns = {k: v for k, v in columns.items() if k in self._accepts}
        out = self.fn(completions=completions, **columns) if self._by_keyword else self.fn(completions, **columns)
        if inspect.isawaitable(out):  # an async reward (TRL gathers them on its event loop): run it here
            out = asyncio.run(_awaited(out))
        return out

    def metrics(self) -> dict[str, Any]:
        report = getattr(self.fn, "metrics", None)
        out = dict(report()) if callable(report) else {}
        out.update({name: sum(v) / len(v) for name, v in self._metrics.items() if v})
        for column, values in self._extra.items():
            numbers = [float(x) for x in values if isinstance(x, (int, float)) and not isinstance(x, bool)]
            if numbers:
                out[f"extra/{column}"] = sum(numbers) / len(numbers)
        self._metrics = {}
        return out


async def _awaited(awaitable: Any) -> Any:
    return await awaitable
