"""Tool-call formats: how a chat template writes a model's tool calls, and how tool results go back in.

A format is a row of :data:`FORMATS`: a regular expression finding each call in a model turn's text and a
parser turning one match into ``{"name": str, "arguments": dict}``. ``hermes`` is Qwen2.5's (and Hermes',
Qwen3's): ``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>``. :func:`detect_format` picks the
format a chat template writes (``[tools] format = "auto"``).

:func:`parse_tool_calls` never raises on what a model wrote: a call that is not JSON, has no name or has
arguments that are not an object comes back as a :class:`ToolCall` with ``error`` set, which the rollout
answers with a tool message the model sees.

:func:`tool_suffix_ids` is the token ids that follow a model turn ending in tool calls: the template's
rendering of the tool messages and the next assistant header, found as TRL 1.16 does
(``GRPOTrainer._get_tool_suffix_ids``): a one-call dummy conversation rendered with and without the tool
messages, the suffix being what follows the turns the shorter one closes. Where the template preserves
prefixes that is TRL's suffix (the shorter rendering cut after its last EOS is a prefix of the longer); where it
does not (Qwen3 renders the last assistant turn with an empty ``<think>`` block and earlier ones without), the
cut is after the same number of closed turns, which a template rendering earlier turns differently keeps.
Those ids are appended to the model's own tokens; the conversation is never rendered again, so such a
template changes nothing the model saw.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from grpo_core.config.sections import TOOL_FORMATS
from grpo_rewards.errors import UserError


@dataclass
class ToolCall:
    """One call a model wrote: a name and arguments, or ``error`` saying why it could not be read."""

    name: str = ""
    arguments: dict[str, Any] | None = None
    error: str = ""
    text: str = ""  # what the model wrote for it


def _json_call(body: str) -> ToolCall:
    """A call written as ``{"name": ..., "arguments": {...}}`` (``parameters`` also accepted, as Llama writes)."""
    try:
        value = json.loads(body, strict=False)  # a raw newline inside a string (code) is read as one
    except json.JSONDecodeError as error:
        return ToolCall(error=f"the tool call is not valid JSON ({error.msg} at character {error.pos})", text=body)
    if not isinstance(value, dict):
        return ToolCall(error="the tool call must be a JSON object with \"name\" and \"arguments\"", text=body)
    name = value.get("name")
    arguments = value.get("arguments", value.get("parameters", {}))
    if isinstance(arguments, str):  # some models write the arguments as a JSON string
        with contextlib.suppress(json.JSONDecodeError):
            arguments = json.loads(arguments)
    if not isinstance(name, str) or not name:
        return ToolCall(error="the tool call has no \"name\" string", text=body)
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return ToolCall(name=name, error="the tool call's \"arguments\" must be a JSON object", text=body)
    return ToolCall(name=name, arguments=arguments, text=body)


@dataclass(frozen=True)
class ToolFormat:
    name: str
    pattern: re.Pattern[str]  # group 1: one call's body
    parse: Callable[[str], ToolCall]
    marker: str  # a string the chat template holds when it writes this format


FORMATS: dict[str, ToolFormat] = {
    "hermes": ToolFormat("hermes", re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL), _json_call,
                         "<tool_call>"),
}
assert set(FORMATS) == set(TOOL_FORMATS) - {"auto"}  # [tools] format's choices are grpo_core.config's
UNCLOSED = {"hermes": "<tool_call>"}  # an opening tag without its closing one is a malformed call


def detect_format(chat_template: str | None) -> str | None:
    """The format a chat template writes tool calls in, or None when it writes none of :data:`FORMATS`."""
    for name, fmt in FORMATS.items():
        if chat_template and fmt.marker in chat_template:
            return name
    return None


def resolve_format(setting: str, chat_template: str | None) -> str:
    """``[tools] format`` for a tokenizer's chat template: ``auto`` is the format the template writes; a
    template that writes none is refused (a UserError naming the key)."""
    if setting != "auto":
        return setting
    found = detect_format(chat_template)
    if found is None:
        raise UserError("tools.format = \"auto\": the chat template writes tool calls in none of the known formats "
                        f"({', '.join(FORMATS)}); set tools.format, or use a model whose template has tool calls")
    return found


def parse_tool_calls(text: str, format_name: str = "hermes") -> list[ToolCall]:
    """Every call in one model turn's ``text``, in order; malformed ones carry ``error``."""
    fmt = FORMATS[format_name]
    calls = [fmt.parse(match.group(1)) for match in fmt.pattern.finditer(text)]
    opener = UNCLOSED.get(format_name)
    rest = fmt.pattern.sub("", text)
    if opener and opener in rest:
        calls.append(ToolCall(error=f"a tool call was opened with {opener} and never closed",
                              text=rest[rest.index(opener):]))
    return calls


def tool_suffix_ids(tokenizer: Any, tool_messages: list[dict[str, Any]], end_ids: list[int] | None = None,
                    chat_template: str | None = None) -> list[int]:
    """The ids the chat template writes after a model turn ending in tool calls: the tool messages and the
    next assistant header (module docs): what follows, in the longer rendering, the turns the shorter one closes
    with a token of ``end_ids`` (the ids that end a model turn; default the tokenizer's EOS), where the model's
    own turn ends. Raises ValueError when the template closes no turn that way."""
    name = tool_messages[0].get("name", "tool")
    dummy = [{"role": "user", "content": "dummy"},
             {"role": "assistant", "content": "",
              "tool_calls": [{"type": "function", "function": {"name": name, "arguments": {}}}]}]
    kwargs: dict[str, Any] = {"tokenize": True, "return_dict": False}
    if chat_template is not None:
        kwargs["chat_template"] = chat_template
    prefix = list(tokenizer.apply_chat_template(dummy, add_generation_prompt=False, **kwargs))
    full = list(tokenizer.apply_chat_template(dummy + tool_messages, add_generation_prompt=True, **kwargs))
    ends = set(end_ids) if end_ids else {tokenizer.eos_token_id}
    turns = sum(t in ends for t in prefix)  # the turns the dummy conversation closes before the tool messages
    closed = [i for i, t in enumerate(full) if t in ends]
    if turns == 0 or len(closed) < turns:
        raise ValueError("the chat template closes no turn with an end-of-turn token before the tool messages: the "
                         "ids after a tool call cannot be found")
    return full[closed[turns - 1] + 1:]


def strip_calls(text: str, format_name: str = "hermes") -> str:
    """``text`` without its tool calls: the content of the assistant message that made them."""
    return FORMATS[format_name].pattern.sub("", text).strip()
