"""The ``c`` and ``cpp`` built-in tools (grpo_core/generation/tools/builtin.py): each call compiles and runs a whole
program in the sandbox, a new process under its own limits; a compile error and a flood of output are the call's
error, which the model reads."""

from __future__ import annotations

from grpo_core.generation.tools.builtin import COMPILED_LIMITS, c, cpp
from grpo_core.generation.tools.formats import ToolCall
from grpo_core.generation.tools.toolset import ToolSet

CPP = "#include <iostream>\nint main() { int x = 6 * 7; std::cout << x << std::endl; }\n"
C = '#include <stdio.h>\nint main(void) { static int n; n += 1; printf("%d\\n", n); return 0; }\n'
FLOOD = '#include <stdio.h>\nint main(void) { for (;;) printf("yyyyyyyyyyyyyyy\\n"); }\n'


def test_a_program_prints_and_each_call_is_a_new_process() -> None:
    tools = ToolSet([c, cpp], timeout_s=120)
    first, second, third = tools.run([ToolCall("cpp", {"code": CPP}), ToolCall("c", {"code": C}),
                                      ToolCall("c", {"code": C})])
    assert (first.content, first.error) == ("42\n", False)
    assert second.content == third.content == "1\n"  # a static counter starts again: no state between calls


def test_a_compile_error_is_answered_as_an_error_message() -> None:
    tools = ToolSet([cpp], timeout_s=120)
    result = tools.run([ToolCall("cpp", {"code": "int main() { return undeclared; }\n"})])[0]
    assert result.error and result.content.startswith("error: RuntimeError: compile_error")
    assert "undeclared" in result.content and "not declared" in result.content  # the compiler's own message


def test_a_program_flooding_output_is_stopped_and_its_output_cut() -> None:
    tools = ToolSet([c], timeout_s=120, max_output_chars=400)
    result = tools.run([ToolCall("c", {"code": FLOOD})])[0]
    assert result.error and "output_limit" in result.content
    assert f"over {COMPILED_LIMITS.output_bytes} bytes" in result.content and "yyyyyyyy" in result.content
    assert len(result.content) < 500 and result.content.endswith("characters cut]")

