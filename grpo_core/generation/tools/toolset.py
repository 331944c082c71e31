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

    def run(self, calls: Sequence[ToolCall]) -> list[ToolResult]:
        """One result per call, in order; the calls run at once, each on its own thread (module docs)."""
        results: list[ToolResult | None] = [None] * len(calls)
        threads: list[tuple[int, threading.Thread, list[Any]]] = []
        for i, call in enumerate(calls):
            problem = self._problem(call)
            if problem is not None:
                results[i] = ToolResult(call.name or "unknown", f"error: {problem}", error=True)
                continue
            box: list[Any] = []
            thread = threading.Thread(target=_call_into, args=(self.functions[call.name], call.arguments or {}, box),
                                      daemon=True, name=f"tool-{call.name}")
            thread.start()
            threads.append((i, thread, box))
        deadline = time.monotonic() + self.timeout_s  # the calls run together: timeout_s for them all
        for i, thread, box in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
            name = calls[i].name
            if not box:
                results[i] = ToolResult(name, f"error: the tool timed out after {self.timeout_s:g} s", error=True)
            elif box[0] == "error":
                results[i] = ToolResult(name, self._cut(f"error: {box[1]}"), error=True)
            else:
                results[i] = ToolResult(name, self._cut(box[1]))
        return [r for r in results if r is not None]


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
