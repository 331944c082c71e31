"""A rollout's tools: Python functions the model may call, their schemas, and running its calls safely.

:class:`ToolSet` holds named functions (any Python callable with type hints and a Google-style docstring;
its JSON schema is ``transformers.utils.get_json_schema``'s, what chat templates render, as TRL takes
``tools=[callables]``). :meth:`ToolSet.run` answers a batch of :class:`~grpo_core.generation.tools.formats.ToolCall`
with one :class:`ToolResult` each, never raising for what a model wrote or a tool did:

* a malformed call, an unknown tool or arguments the function does not take: an ``error: ...`` message;
* a tool that raises: ``error: <Type>: <message>``;
* a tool that does not return within ``timeout_s``: ``error: the tool timed out``. Each call runs on a daemon
  thread of its own, all calls of a batch at once; a hung Python function cannot be stopped from outside, so
  its thread is left behind and the rollout goes on (the sandbox's runner is killed by its own wall limit);
* output over ``max_output_chars``: cut, with a note saying how much was cut.

A result's text is what the model reads in its next turn.

:meth:`ToolSet.bind` gives each rollout of a batch tools of its own (an environment's methods bound to the
rollout's instance, :mod:`grpo_core.generation.tools.environments`): ``run(calls, rows)`` then calls each
rollout's own, and a rollout's calls run one after another, in the order written, on one thread (its state
changes as the model meant it to); different rollouts still run at once.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from grpo_core.generation.tools.formats import ToolCall


@dataclass
class ToolResult:
    name: str
    content: str
    error: bool = False


def tool_schema(function: Callable[..., Any]) -> dict[str, Any]:
    """The JSON schema chat templates render for ``function`` (``transformers.utils.get_json_schema``)."""
    from transformers.utils import get_json_schema  # transformers loads with the backends that use tools

    return get_json_schema(function)


class ToolSet:
    """Named tools and how their calls run (module docs)."""

    def __init__(self, functions: Sequence[Callable[..., Any]], *, timeout_s: float = 10.0,
                 max_output_chars: int = 2000):
        self.functions: dict[str, Callable[..., Any]] = {}
        for function in functions:
            name = getattr(function, "__name__", "")
            if not name or name in self.functions:
                raise ValueError(f"tools need distinct names; {name!r} is {'missing' if not name else 'given twice'}")
            self.functions[name] = function
        self.schemas = [tool_schema(f) for f in self.functions.values()]
        self.timeout_s, self.max_output_chars = timeout_s, max_output_chars
        self.bound: list[dict[str, Callable[..., Any]]] | None = None  # per rollout: its own tools (bind)

    def bind(self, per_rollout: list[dict[str, Callable[..., Any]]] | None) -> None:
        """The tools of each rollout of the next batches, by name over the shared ones (None: shared only)."""
        self.bound = per_rollout

    def __bool__(self) -> bool:
        return bool(self.functions)

    def _cut(self, text: str) -> str:
        if len(text) <= self.max_output_chars:
            return text
        return text[: self.max_output_chars] + f"\n[{len(text) - self.max_output_chars} characters cut]"

    def _problem(self, call: ToolCall) -> str | None:
        if call.error:
            return call.error
        if call.name not in self.functions:
            return f"there is no tool named {call.name!r}; the tools are {', '.join(sorted(self.functions))}"
        return None

    def _function(self, call: ToolCall, row: int | None) -> Callable[..., Any]:
        if self.bound is None:
            return self.functions[call.name]
        if row is None or not 0 <= row < len(self.bound):
            raise RuntimeError(f"tools bound to {len(self.bound)} rollouts were called for rollout {row}")
        return self.bound[row].get(call.name, self.functions[call.name])

    def run(self, calls: Sequence[ToolCall], rows: Sequence[int] | None = None) -> list[ToolResult]:
        """One result per call, in order; the calls run at once, each on its own thread, or, with tools bound per
        rollout, each rollout's in order on one thread (``rows[i]``: call ``i``'s rollout) (module docs)."""
        results: list[ToolResult | None] = [None] * len(calls)
        jobs: dict[Any, list[tuple[int, Callable[..., Any], dict[str, Any], list[Any]]]] = {}
        for i, call in enumerate(calls):
            problem = self._problem(call)
            if problem is not None:
                results[i] = ToolResult(call.name or "unknown", f"error: {problem}", error=True)
                continue
            row = rows[i] if rows is not None else None
            key = ("row", row) if self.bound is not None else ("call", i)
            jobs.setdefault(key, []).append((i, self._function(call, row), call.arguments or {}, []))
        threads, expired = [], threading.Event()
        for job in jobs.values():
            thread = threading.Thread(target=_calls_into, args=(job, expired), daemon=True, name="tool-calls")
            thread.start()
            threads.append(thread)
        deadline = time.monotonic() + self.timeout_s  # the calls run together: timeout_s for them all
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        expired.set()  # a rollout whose call hung runs none of its later ones
        for i, _, _, box in (entry for job in jobs.values() for entry in job):
            name = calls[i].name
            if not box:
                results[i] = ToolResult(name, f"error: the tool timed out after {self.timeout_s:g} s", error=True)
            elif box[0] == "error":
                results[i] = ToolResult(name, self._cut(f"error: {box[1]}"), error=True)
            else:
                results[i] = ToolResult(name, self._cut(box[1]))
        return [r for r in results if r is not None]


def _calls_into(job: list[tuple[int, Callable[..., Any], dict[str, Any], list[Any]]], expired: threading.Event
                ) -> None:
    """Run a job's calls in order, each leaving its outcome in its box, none once the batch's time is out."""
    for _, function, arguments, box in job:
        if expired.is_set():
            return
        _call_into(function, arguments, box)


def _call_into(function: Callable[..., Any], arguments: dict[str, Any], box: list[Any]) -> None:
    """Run one call, leaving ``("ok", text)`` or ``("error", message)`` in ``box``."""
    try:
        value = function(**arguments)
    except TypeError as error:  # arguments the function does not take, or a TypeError inside it
        box.extend(("error", f"TypeError: {error}"))
        return
    except BaseException as error:  # noqa: BLE001 - whatever a tool raises costs its call, never the run
        box.extend(("error", f"{type(error).__name__}: {error}"))
        return
    box.extend(("ok", value if isinstance(value, str) else _text(value)))


def _text(value: Any) -> str:
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return str(value)
