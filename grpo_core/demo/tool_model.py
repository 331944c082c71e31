"""The tool example's tiny model: the demo's tiny Llama with a chat template that writes tool calls, and the
conversations its warm-up shows it.

SmolLM2's chat template has no tool format, and no model small enough to train on a CPU in minutes calls
tools out of the box; this one is built with a chat template of its own that writes calls in the ``hermes``
format (Qwen2.5's), so ``[tools] format = "auto"`` finds it and the rollout reads calls with the project's own
parser::

    <tools>calculator</tools><|user|>437*58<eos><|assistant|>                                   the prompt
    <tool_call>{"name": "calculator", "arguments": {"expression": "437*58"}}</tool_call><eos>   model turn 1
    <|tool|>25346<eos><|assistant|>                                                             the tool's answer
    <answer>25346</answer><eos>                                                                 model turn 2

Without tools the prompt has no ``<tools>`` block and the model answers at once. The tokenizer is the demo's
(character level, digits one token each, printable ASCII in its vocabulary so that a tool's error message
reads as written), with the markers and the fixed text of a call (:data:`CALL_HEAD`, :data:`CALL_TAIL`) as
whole tokens, as a tokenizer trained on this text would merge them: the model chooses to call, and writes the
expression, a character at a time.

:func:`tool_demonstration` is one warm-up conversation with the tool (the model's turns trained on, the tool's
answer context only, its ids the ones a rollout appends: :func:`~grpo_core.generation.tools.formats.tool_suffix_ids`);
:func:`answer_demonstration` the no-tool control's.
"""

from __future__ import annotations

import json
import string
from pathlib import Path
from typing import Any

from grpo_core.demo.tiny import TinySpec, build_tiny_model
from grpo_core.generation.tools.builtin import calculator
from grpo_core.generation.tools.formats import tool_suffix_ids

EOS = "<eos>"
CALL_HEAD = '{"name": "calculator", "arguments": {"expression": "'
CALL_TAIL = '"}}'
TAGS = ["<|user|>", "<|assistant|>", "<|tool|>", "<tools>", "</tools>", "<tool_call>", "</tool_call>",
        "<answer>", "</answer>", CALL_HEAD, CALL_TAIL]
CHAT_TEMPLATE = (
    "{%- if tools %}<tools>{% for tool in tools %}{{ (tool.function or tool).name }}{% if not loop.last %} "
    "{% endif %}{% endfor %}</tools>{% endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'user' or message.role == 'system' %}<|user|>{{ message.content }}<eos>"
    "{%- elif message.role == 'assistant' %}<|assistant|>{{ message.content or '' }}"
    "{%- for call in message.tool_calls or [] %}<tool_call>"
    "{{ {'name': call.function.name, 'arguments': call.function.arguments} | tojson }}</tool_call>{%- endfor %}<eos>"
    "{%- elif message.role == 'tool' %}<|tool|>{{ message.content }}<eos>"
    "{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}<|assistant|>{% endif %}"
)


def call_text(expression: str) -> str:
    """A calculator call as the template writes it (``hermes``)."""
    return "<tool_call>" + json.dumps({"name": "calculator", "arguments": {"expression": expression}}) + "</tool_call>"


def build_tool_model(out_dir: str | Path, corpus: list[str], spec: TinySpec) -> Path:
    """The demo's tiny Llama with :data:`CHAT_TEMPLATE`, its tokenizer trained on ``corpus`` and printable ASCII."""
    return build_tiny_model(out_dir, [*corpus, string.printable], spec, tags=TAGS, chat_template=CHAT_TEMPLATE)


def tool_demonstration(tokenizer: Any, expression: str) -> list[tuple[str, bool]]:
    """The model's turns after a prompt, calling the calculator with ``expression`` and writing its answer back:
    ``(text, trained)`` segments, the tool's answer as the rollout appends it (not trained on)."""
    reply = calculator(expression)
    suffix = tool_suffix_ids(tokenizer, [{"role": "tool", "name": "calculator", "content": reply}])
    return [(call_text(expression) + EOS, True),
            (tokenizer.decode(suffix, skip_special_tokens=False), False),
            (f"<answer>{reply}</answer>{EOS}", True)]


def answer_demonstration(answer: str) -> list[tuple[str, bool]]:
    """The no-tool control's turn: the answer at once."""
    return [(f"<answer>{answer}</answer>{EOS}", True)]
