"""Completions arrive as plain strings or as chat message lists (TRL's conversational format).

Everything that reads a completion's text goes through :func:`completion_text`.
"""

from __future__ import annotations

from typing import Any


def completion_text(completion: Any) -> str:
    """The text of one completion.

    A string is returned as is. A list of chat messages (``{"role", "content"}``)
    gives the content of its last assistant message (TRL passes
    ``[{"role": "assistant", "content": ...}]``). Anything else is an error.

    A conversation with tools (a multi-turn rollout) is answered by the model's own final turn only: when it
    ends with a ``tool`` message, or with an assistant turn that calls tools (``tool_calls``, or
    ``invalid_tool_calls`` for calls that could not be read), the model has not answered and the text is
    empty. A tool's output is never read as the model's answer.
    """
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict) and "content" in completion:
        return _content_text(completion["content"])
    if isinstance(completion, (list, tuple)):
        for message in reversed(completion):
            if isinstance(message, dict) and message.get("role") == "tool":
                return ""  # the conversation ends with a tool's output: no answer of the model's
            if isinstance(message, dict) and message.get("role", "assistant") == "assistant":
                if message.get("tool_calls") or message.get("invalid_tool_calls"):
                    return ""  # a turn calling tools, left unanswered: not a final answer
                return _content_text(message.get("content", ""))
        if not completion:
            return ""
    raise TypeError(f"a completion must be a string or a list of chat messages, got {type(completion).__name__}")


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # multimodal content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    if content is None:
        return ""
    raise TypeError(f"message content must be text, got {type(content).__name__}")
