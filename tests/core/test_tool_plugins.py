"""Tools as plugins (``grpo_register_tools``), the built-in calculator's refusals, the sandbox's Python tool, and
the ``[tools]`` config checks."""

from __future__ import annotations

from typing import Any

import pytest

from grpo_core.generation.tools.builtin import calculator, python
from grpo_core.generation.tools.formats import ToolCall, resolve_format
from grpo_core.generation.tools.toolset import ToolSet
from grpo_rewards import hookimpl
from grpo_rewards.errors import UserError


def shout(text: str) -> str:
    """Repeat a text loudly.

    Args:
        text: what to repeat
    """
    return text.upper() + "!"


class _ToolPlugin:
    @hookimpl
    def grpo_register_tools(self, register: Any) -> None:
        register("shout", shout)


class _Length:
    @hookimpl
    def grpo_register_rewards(self, register: Any) -> None:
        from grpo_rewards.specs import RewardSpec

        register(RewardSpec("tool_test_len", lambda: lambda completions, **_: [0.0] * len(completions)))


@pytest.fixture(scope="module")
def tool_registry() -> Any:
    from grpo_rewards.plugins import load_registry

    return load_registry(extra_plugins=[("tool_test_rewards", _Length()), ("tool_plugin", _ToolPlugin())])


BASE = {"model": {"name_or_path": "m"}, "data": {"source": "hub/name", "chat_template": True},
        "rewards": {"len": {"use": "tool_test_len"}}}


def test_a_plugin_tool_is_picked_by_name(tool_registry: Any) -> None:
    from grpo_core.config import config_from_dict

    assert {"calculator", "python", "shout"} <= set(tool_registry.tools)
    cfg = config_from_dict({**BASE, "tools": {"names": ["shout", "calculator"]}}, registry=tool_registry)
    tools = ToolSet([tool_registry.get("tools", n) for n in cfg.tools.names])
    assert tools.run([ToolCall("shout", {"text": "hi"})])[0].content == "HI!"
    assert tools.schemas[0]["function"]["parameters"]["properties"]["text"]["type"] == "string"


def test_tools_config_problems_name_the_key(tool_registry: Any) -> None:
    from grpo_core.config import ConfigError, config_from_dict

    with pytest.raises(ConfigError) as info:
        config_from_dict({**BASE, "data": {"source": "hub/name", "chat_template": False},
                          "generation": {"backend": "nope", "stop": ["</a>"]}, "trainer": {"backend": "trl"},
                          "tools": {"names": ["shuot", "calculator", "calculator"], "format": "xml",
                                    "timeout_s": 0, "max_tool_calling_iterations": -1}},
                         registry=tool_registry)
    text = str(info.value)
    for line in ["tools.names: must be one of calculator, python, c, cpp, shout, got 'shuot'; did you mean 'shout'?",
                 "tools.names: names a tool twice", "tools.format: must be one of auto, hermes, got 'xml'",
                 "tools run with generation.backend = 'transformers' or 'vllm', got 'nope'",
                 "tools need the chat template", "not the 'trl' backend", "tools.timeout_s: must be >= 0.001",
                 "generation.stop: tool rollouts end each model turn at its end-of-turn token",
                 "tools.max_tool_calling_iterations: must be >= 0"]:
        assert line in text, (line, text)
    # the transformers backend's log-probs are the policy's: it samples at the temperature alone; vLLM's sampler
    # is corrected for, as without tools
    tools = {"names": ["calculator"]}
    with pytest.raises(ConfigError, match="leave top_p, top_k"):
        config_from_dict({**BASE, "generation": {"top_p": 0.9}, "tools": tools}, registry=tool_registry)
    assert config_from_dict({**BASE, "generation": {"backend": "vllm", "vllm_mode": "server", "top_p": 0.9},
                             "tools": tools}, registry=tool_registry).generation.top_p == 0.9


def test_the_format_comes_from_the_chat_template() -> None:
    from tool_models import QWEN25_TEMPLATE

    assert resolve_format("auto", QWEN25_TEMPLATE) == "hermes"
    assert resolve_format("hermes", None) == "hermes"
    with pytest.raises(UserError, match="tools.format"):
        resolve_format("auto", "{% for m in messages %}{{ m.content }}{% endfor %}")


@pytest.mark.parametrize("expression, want", [("(3 + 4) * 12", "84"), ("7 / 2", "3.5"), ("2 ** 10", "1024"),
                                              ("-5 // 2", "-3"), ("10 % 4", "2"), ("1e3 + 1", "1001")])
def test_the_calculator_computes(expression: str, want: str) -> None:
    assert calculator(expression) == want


@pytest.mark.parametrize("expression, why", [
    ("__import__('os').system('true')", "not Call"), ("x + 1", "not Name"), ("(1).real", "not Attribute"),
    ("9 ** 9 ** 9", "exponent"), ("1 / 0", "division by zero"), ("[1] * 3", "not List"),
    ("2 ** 999 * 2 ** 999 * 2 ** 999 * 2 ** 999 * 2 ** 999", "too large"), ("1 +", "not an expression"),
    ("'a' * 3", "not Constant"), ("(-1) ** 0.5", "not a real number")])
def test_the_calculator_refuses_what_is_not_arithmetic(expression: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        calculator(expression)


def test_the_python_tool_runs_in_the_sandbox_and_keeps_no_state() -> None:
    """Each call is a fresh sandboxed process: a name set in one call is gone in the next; a failing program
    is the call's error."""
    tools = ToolSet([python], timeout_s=60)
    first, second = tools.run([ToolCall("python", {"code": "x = 6 * 7\nprint(x)"}),
                               ToolCall("python", {"code": "print(x)"})])
    assert first.content == "42\n" and not first.error
    assert second.error and "NameError" in second.content
