"""Parsing the dataset test formats, extracting code, and judging outside the sandbox (no sandbox needed)."""

from __future__ import annotations

import json

import pytest

from grpo_rewards.sandbox.extract import extract_code
from grpo_rewards.sandbox.judge import judge, output_lines, program_for, strict_equal
from grpo_rewards.sandbox.program import RunResult
from grpo_rewards.sandbox.tests_formats import (
    AssertCase,
    CallCase,
    StdioCase,
    TestFormatError,
    parse_tests,
)

# ------------------------------------------------------------------ extraction ----


def test_last_python_block_wins():
    text = "first\n```python\nprint(1)\n```\nthen\n```py\nprint(2)\n```\n```bash\nls\n```"
    assert extract_code(text) == ("print(2)\n", "")


def test_untagged_block_only_when_no_tagged_one():
    assert extract_code("```\nprint(3)\n```")[0] == "print(3)\n"
    assert extract_code("```python\nA\n```\n```\nB\n```")[0] == "A\n"


def test_no_block_gives_reason():
    code, reason = extract_code("just prose, print(1)")
    assert code is None and "no fenced" in reason
    assert extract_code("```python\nprint(1)\n")[0] is None  # unclosed: truncated generation
    assert extract_code("```python\n   \n```")[1] == "the last code block is empty"


# --------------------------------------------------------------------- formats ----


def test_open_r1_verification_info():
    cell = {"language": "python", "test_cases": [{"input": "1 2\n", "output": "3\n", "type": "stdin_stdout"}]}
    suite = parse_tests(json.dumps(cell))
    assert suite.cases == [StdioCase("1 2\n", "3\n")] and suite.language == "python"


def test_sandboxfusion_stdio_and_call():
    suite = parse_tests({"inputs": ["1\n", ["2", "3"]], "outputs": ["1\n", "5"]})
    assert suite.cases == [StdioCase("1\n", "1\n"), StdioCase("2\n3", "5")]
    suite = parse_tests({"fn_name": "add", "inputs": [[1, 2], [3, 4]], "outputs": [3, 7]})
    assert suite.cases == [CallCase("add", [1, 2], 3), CallCase("add", [3, 4], 7)]


def test_mbpp_asserts_become_outside_checks():
    suite = parse_tests({"test_list": ["assert add(1, 2) == 3", "assert add(0, 0) == (0)",
                                       "assert abs(add(0.1, 0.2) - 0.3) < 1e-9"],
                         "test_setup_code": "import math"})
    strong = suite.cases[:2]
    assert [c.expr for c in strong] == ["add(1, 2)", "add(0, 0)"] and [c.expected for c in strong] == [3, 0]
    assert all(c.setup == "import math" for c in suite.cases)
    assert suite.cases[2].weak and suite.weak == 1


def test_humaneval_check_function():
    test = "METADATA = {}\n\ndef check(candidate):\n    assert candidate(2) == 4\n    assert candidate(-1) == 1\n"
    suite = parse_tests({"test": test, "entry_point": "square"})
    assert [c.expr for c in suite.cases] == ["candidate(2)", "candidate(-1)"]
    assert "candidate = square" in suite.cases[0].setup and "METADATA" in suite.cases[0].setup
    looped = "def check(candidate):\n    for x in range(3):\n        assert candidate(x) == x * x\n"
    suite = parse_tests({"test": looped, "entry_point": "square"})
    assert len(suite.cases) == 1 and suite.cases[0].weak and suite.cases[0].statement == "check(square)"


def test_plain_assert_lines():
    suite = parse_tests(["assert f('a') == 'A'", "assert f('') == ''"])
    assert [c.expected for c in suite.cases] == ["A", ""]


@pytest.mark.parametrize("cell, message", [
    ({"inputs": ["1"], "outputs": []}, "same length"),
    ({"foo": 1}, "unknown tests format"),
    ("{not json", "does not parse"),
    ({"test_cases": [{"input": "1"}]}, "needs 'input' and 'output'"),
    ("x = 1", "no assert"),
    (42, "must be a dict"),
    ({"test": "def check(candidate):\n    assert candidate(1) == 1\n"}, "entry_point"),
])
def test_bad_cells_say_what_is_wrong(cell, message):
    with pytest.raises(TestFormatError, match=message):
        parse_tests(cell)


# ----------------------------------------------------------------------- judge ----


def _ok(stdout: str) -> RunResult:
    return RunResult("ok", stdout=stdout, exit_code=0)


def test_expected_output_never_enters_the_program():
    case = StdioCase("1 2\n", "EXPECTED-7f3a\n")
    assert "EXPECTED-7f3a" not in program_for("print(3)", case).program.code
    assert program_for("print(3)", case).program.stdin == "1 2\n"
    call = CallCase("f", [1], "EXPECTED-91bc")
    prepared = program_for("def f(x): return x", call)
    assert "EXPECTED-91bc" not in prepared.program.code + prepared.program.stdin
    strong = parse_tests(["assert f(1) == 'EXPECTED-55aa'"]).cases[0]
    assert "EXPECTED-55aa" not in program_for("def f(x): return x", strong).program.code


def test_stdout_line_by_line_without_truncation():
    case = StdioCase("", "1\n2\n")
    prepared = program_for("", case)
    assert judge(case, prepared, _ok("1  \n2\n\n")).passed  # trailing spaces and blank lines only
    extra = judge(case, prepared, _ok("1\n2\n3\n"))
    assert extra.status == "wrong" and "extra line" in extra.reason
    missing = judge(case, prepared, _ok("1\n"))
    assert missing.status == "wrong" and "missing line" in missing.reason
    assert judge(case, prepared, _ok("1\n 2\n")).status == "wrong"  # leading space matters
    assert output_lines("a\r\nb\r\n") == ["a", "b"]


def test_exit_zero_or_printed_passed_is_not_a_pass():
    call = CallCase("f", [1], 2)
    prepared = program_for("def f(x): return x + 1", call)
    assert judge(call, prepared, _ok("")).status == "wrong"  # exit 0 without a report
    assert judge(call, prepared, _ok("passed\nOK\n")).status == "wrong"
    forged = json.dumps({"value": 2})
    assert judge(call, prepared, _ok(f"deadbeef {forged}\n")).status == "wrong"  # wrong nonce
    assert judge(call, prepared, _ok(f"{prepared.nonce} {forged}\n")).passed


def test_type_strict_comparison():
    assert strict_equal([1, [2.0, "a"]], [1, [2.0, "a"]])
    assert not strict_equal(True, 1) and not strict_equal(1, 1.0) and not strict_equal("1", 1)
    assert strict_equal(0.1 + 0.2, 0.3) and not strict_equal(0.3, 0.31)
    assert not strict_equal({"a": 1}, {"a": 1, "b": 2})
    call = CallCase("f", [], [5])  # APPS wraps a single expected value in a list
    prepared = program_for("def f(): return 5", call)
    assert judge(call, prepared, _ok(f"{prepared.nonce} {json.dumps({'value': 5})}\n")).passed
    assert not judge(call, prepared, _ok(f"{prepared.nonce} {json.dumps({'value': True})}\n")).passed


def test_failed_runs_keep_their_status():
    case = StdioCase("", "1\n")
    prepared = program_for("", case)
    for status in ("timeout", "memory", "output_limit", "runtime_error", "sandbox_error"):
        assert judge(case, prepared, RunResult(status, error="x")).status == status


def test_weak_assert_is_flagged():
    case = AssertCase("", "assert f() > 0")
    prepared = program_for("def f(): return 1", case)
    outcome = judge(case, prepared, _ok(f"{prepared.nonce} {json.dumps({'passed': True})}\n"))
    assert outcome.passed and outcome.weak


def test_float_tolerance_forgives_numbers_only():
    from grpo_rewards.sandbox.judge import lines_close

    case = StdioCase("", "0.333333 x\n2.5e3\n")
    prepared = program_for("", case)
    close = _ok("0.33333334 x\n2500.0001\n")
    assert judge(case, prepared, close).status == "wrong"  # exact text by default
    assert judge(case, prepared, close, float_tolerance=1e-6).passed
    assert judge(case, prepared, _ok("0.3334 x\n2500\n"), float_tolerance=1e-6).status == "wrong"  # too far
    assert judge(case, prepared, _ok("0.333333 y\n2500\n"), float_tolerance=0.1).status == "wrong"  # a word differs
    assert judge(case, prepared, _ok("0.333333\nx 2500\n"), float_tolerance=0.1).status == "wrong"  # tokens moved
    assert not lines_close(["nan"], ["nan0"], 0.5) and lines_close(["-1e-9"], ["0.0"], 1e-6)
    assert not lines_close(["1_000"], ["1000"], 0.1)  # Python-only spellings are not numbers here
    assert not lines_close(["1", "2"], ["1"], 0.1)


def test_an_integer_token_compares_exactly_under_a_float_tolerance():
    """Integers that differ in their last digits are within any relative tolerance: an expected integer is
    matched only by an integer of the same value, whatever the tolerance and the length."""
    from grpo_rewards.sandbox.judge import lines_close

    assert not lines_close(["1000000008"], ["1000000007"], 1e-6)
    assert not lines_close(["1000000007.0000001"], ["1000000007"], 1e-6)
    assert not lines_close(["1e9"], ["1000000000"], 1e-6) and not lines_close(["-1e-9"], ["0"], 1e-6)
    assert not lines_close(["3 1000000008"], ["3 1000000007"], 0.5)
    assert lines_close(["+7", "007", "-0"], ["7", "7", "0"], 1e-6)  # the same value, spelt otherwise
    long = "9" * 100_000
    assert lines_close([long], ["0" + long], 1e-6) and not lines_close([long[:-1] + "8"], [long], 0.1)
    assert lines_close(["2500"], ["2.5e3"], 1e-6) and lines_close(["0.33333334"], ["0.333333"], 1e-6)  # floats
    case = StdioCase("", "998244353\n0.5\n")
    prepared = program_for("", case)
    assert judge(case, prepared, _ok("998244352\n0.5\n"), float_tolerance=1e-6).status == "wrong"
    assert judge(case, prepared, _ok("998244353\n0.5000001\n"), float_tolerance=1e-6).passed
