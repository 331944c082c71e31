"""Verdicts computed outside the sandbox: expected outputs never enter it.

:func:`program_for` turns one test case into the program the sandbox runs (for a
function call: the solution plus a small runner that writes the return value as
JSON on a line tagged with a fresh nonce); :func:`judge` compares what came back
with the expected value, here in the trainer. Exit code 0, "no exception" or a
printed "passed" is never a pass by itself (only weak asserts, flagged as such,
trust the program).
"""

from __future__ import annotations

import json
import math
import re
import reprlib
import secrets
import sys
from dataclasses import dataclass
from typing import Any

from grpo_rewards.answers.numbers import plain_decimal
from grpo_rewards.sandbox.extract import without_main_block
from grpo_rewards.sandbox.program import OK, RUNTIME_ERROR, WRONG, Limits, Program, RunResult
from grpo_rewards.sandbox.tests_formats import AssertCase, CallCase, StdioCase, TestCase

_EMIT = '''
def _grpo_emit(_obj):
    import json as _j, os as _o, sys as _s
    try:
        _s.stdout.flush()
    except Exception:
        pass
    try:
        _line = _j.dumps(_obj)
    except (TypeError, ValueError) as _e:
        _line = _j.dumps({{"unserializable": type(_obj.get("value")).__name__}})
    _data = ("\\n" + {nonce!r} + " " + _line + "\\n").encode()
    while _data:
        _data = _data[_o.write(1, _data):]
'''
_CALL = '''
def _grpo_call():
    import json as _j
    _args = _j.loads({args!r})
    _fn = globals().get({name!r})
    if _fn is None and isinstance(globals().get("Solution"), type):
        _fn = getattr(globals()["Solution"](), {name!r}, None)
    if _fn is None:
        raise NameError("function {name} is not defined")
    if isinstance(_args, dict):
        return _fn(**_args)
    return _fn(*_args) if isinstance(_args, list) else _fn(_args)
_grpo_emit({{"value": _grpo_call()}})
'''


@dataclass(frozen=True)
class Outcome:
    """One test's verdict: a status of :data:`~grpo_rewards.sandbox.program.STATUSES` and why."""

    status: str
    reason: str = ""
    weak: bool = False

    @property
    def passed(self) -> bool:
        return self.status == OK


@dataclass(frozen=True)
class Prepared:
    program: Program
    nonce: str


def program_for(code: str, case: TestCase, limits: Limits | None = None, language: str = "python") -> Prepared:
    """The program that runs ``case`` against the solution ``code`` (no expected value in it)."""
    nonce = secrets.token_hex(12)
    if isinstance(case, StdioCase):
        return Prepared(Program(code, case.stdin, language, limits), nonce)
    emit = _EMIT.format(nonce=nonce)
    if language in ("python", "python3", "py"):  # the solution is imported, not run: its demo stays out
        code = without_main_block(code)
    if isinstance(case, CallCase):
        runner = _CALL.format(args=json.dumps(case.args), name=case.fn_name)
        return Prepared(Program(f"{code}\n{emit}{runner}", "", language, limits), nonce)
    assert isinstance(case, AssertCase)
    if case.weak:
        tail = f"{case.setup}\n{case.statement}\n_grpo_emit({{'passed': True}})\n"
    else:
        tail = f"{case.setup}\n_grpo_emit({{'value': ({case.expr})}})\n"
    return Prepared(Program(f"{code}\n{emit}{tail}", "", language, limits), nonce)


def judge(case: TestCase, prepared: Prepared, result: RunResult, *, float_tolerance: float = 0.0) -> Outcome:
    """Compare the run's output with the case's expected output (here, outside the sandbox).

    ``float_tolerance`` > 0: stdout lines also match when they differ only in numbers within that
    relative or absolute tolerance, token by token (``0.33333334`` for ``0.333333``)."""
    weak = isinstance(case, AssertCase) and case.weak
    if result.status != OK:
        return Outcome(result.status, result.error or result.status, weak)
    if isinstance(case, StdioCase):
        got, want = output_lines(result.stdout), output_lines(case.expected)
        if got == want or (float_tolerance > 0 and lines_close(got, want, float_tolerance)):
            return Outcome(OK)
        return Outcome(WRONG, _first_difference(got, want))
    reported = _reported(result.stdout, prepared.nonce)
    if reported is None:
        return Outcome(WRONG, "the program ended without the runner's report", weak)
    if "unserializable" in reported:
        return Outcome(WRONG, f"returned a {reported['unserializable']}, which JSON cannot carry", weak)
    if weak:
        return Outcome(OK if reported.get("passed") is True else WRONG, "weak assert (ran inside the sandbox)", True)
    value = reported.get("value")
    if isinstance(case, CallCase):
        if strict_equal(value, case.expected) or (
            isinstance(case.expected, list) and len(case.expected) == 1 and strict_equal(value, case.expected[0])
        ):
            return Outcome(OK)
        return Outcome(WRONG, f"returned {_short(value)}, expected {_short(case.expected)}")
    assert isinstance(case, AssertCase)
    if python_equal(value, case.expected):
        return Outcome(OK)
    return Outcome(WRONG, f"{case.expr} gave {_short(value)}, expected {_short(case.expected)}")


def output_lines(text: str) -> list[str]:
    """Lines without trailing spaces, trailing blank lines dropped; nothing else is forgiven."""
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def lines_close(got: list[str], want: list[str], tolerance: float) -> bool:
    """Same lines and whitespace-separated tokens, where numeric tokens (plain decimals of the number
    grammar, :func:`grpo_rewards.answers.numbers.plain_decimal`) may differ within ``tolerance`` (relative or
    absolute) and every other token must be identical. An expected integer token (digits, an optional sign)
    is exact: only an integer of the same value matches it (``+7`` and ``007`` for ``7``), never ``7.0000001``
    nor ``1000000008`` for ``1000000007``."""
    if len(got) != len(want):
        return False
    for got_line, want_line in zip(got, want):
        got_tokens, want_tokens = got_line.split(), want_line.split()
        if len(got_tokens) != len(want_tokens):
            return False
        for g, w in zip(got_tokens, want_tokens):
            if g == w:
                continue
            if not (_PLAIN_LINEAR.fullmatch(g) and _PLAIN_LINEAR.fullmatch(w)):
                return False  # checked first without backtracking: the grammar's own regex is quadratic on
                # a long digit run that ends in a non-digit, and these tokens are the program's output
            if _INTEGER.fullmatch(w):  # an integer answer is exact: 1000000008 is not 1000000007 within 1e-6
                if not (_INTEGER.fullmatch(g) and _integer_text(g) == _integer_text(w)):
                    return False
                continue
            g_value, w_value = plain_decimal(g), plain_decimal(w)
            if g_value is None or w_value is None:
                return False
            if not math.isclose(g_value, w_value, rel_tol=tolerance, abs_tol=tolerance):
                return False
    return True


# plain decimals (grpo_rewards.answers.numbers.PLAIN_DECIMAL), with possessive quantifiers: the same strings, in
# linear time
_PLAIN_LINEAR = re.compile(r"[+-]?+(?:\d++(?:\.\d*+)?+|\.\d++)(?:[eE][+-]?+\d++)?+")
_INTEGER = re.compile(r"[+-]?+\d++")


def _integer_text(token: str) -> str:
    """An integer token's value as text (sign, then digits without leading zeros): compared exactly, in linear
    time, whatever its length (no int() of a 100,000-digit run)."""
    sign = "-" if token.startswith("-") else ""
    digits = token.lstrip("+-").lstrip("0") or "0"
    return ("" if digits == "0" else sign) + digits


def _first_difference(got: list[str], want: list[str]) -> str:
    for i, (g, w) in enumerate(zip(got, want)):
        if g != w:
            return f"line {i + 1}: got {_short(g)}, expected {_short(w)}"
    if len(got) > len(want):
        return f"{len(got) - len(want)} extra line(s) after line {len(want)}"
    return f"{len(want) - len(got)} missing line(s) after line {len(got)}"


# a report is the program's output, parsed here in the trainer: by the C json decoder, in time linear in
# its size, and bounded by the output cap, so a crafted report costs milliseconds of the trainer's thread.
# Integers past Python's int-from-text limit (4,300 digits; checked by a hook when the interpreter's limit is
# off, as converting a long digit run is quadratic) and nesting past MAX_REPORT_DEPTH are refused; a regex
# over the text (strings of escaped quotes, digit runs) would backtrack quadratically, and a 50,000-deep
# report recurse past the stack
MAX_REPORT_CHARS = 1 << 20
MAX_REPORT_DEPTH = 100
MAX_INT_DIGITS = 4300  # Python's default int_max_str_digits


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError("integer too long")
    return int(text)


_DECODER = json.JSONDecoder()
_BOUNDED_DECODER = json.JSONDecoder(parse_int=_bounded_int)  # a Python call per integer: slower


def _depth_within(value: Any, limit: int) -> bool:
    """Whether ``value`` nests lists and dicts at most ``limit`` deep (iterative, and only containers are
    visited one by one: a list of a million numbers costs one pass in C)."""
    stack = [(value, 1)] if type(value) in (list, dict) else []
    while stack:
        item, depth = stack.pop()
        nested = [c for c in (item.values() if type(item) is dict else item) if type(c) in (list, dict)]
        if nested:
            if depth >= limit:
                return False
            stack += [(c, depth + 1) for c in nested]
    return True


def parse_report(text: str) -> Any:
    """The JSON value of a runner's report, or ``None`` when it is malformed or over the bounds on size,
    nesting depth and number length; never raises, and costs time linear in ``len(text)``."""
    if len(text) > MAX_REPORT_CHARS:
        return None
    decoder = _DECODER if 0 < sys.get_int_max_str_digits() <= MAX_INT_DIGITS else _BOUNDED_DECODER
    try:
        value = decoder.decode(text)
    except (ValueError, RecursionError, MemoryError):
        return None
    return value if _depth_within(value, MAX_REPORT_DEPTH) else None


def _reported(stdout: str, nonce: str) -> dict[str, Any] | None:
    prefix = nonce + " "
    for line in reversed(stdout.split("\n")):
        if line.startswith(prefix):
            obj = parse_report(line[len(prefix):])
            return obj if isinstance(obj, dict) else None
    return None


def strict_equal(a: Any, b: Any) -> bool:
    """Equality that keeps types apart: ``True != 1``, ``1 != 1.0``, ``"1" != 1``; floats within 1e-9."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, float) and isinstance(b, float):
        return a == b or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9) or (math.isnan(a) and math.isnan(b))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(strict_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(strict_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def python_equal(a: Any, b: Any) -> bool:
    """What ``assert a == b`` meant, with tuples and lists alike (JSON has no tuples)."""
    def norm(x: Any) -> Any:
        if isinstance(x, (list, tuple)):
            return [norm(v) for v in x]
        if isinstance(x, dict):
            return {k: norm(v) for k, v in x.items()}
        return x
    return bool(norm(a) == norm(b))


_REPR = reprlib.Repr()  # bounded: a reported list of a million items is not printed whole to be cut
_REPR.maxlevel, _REPR.maxlist, _REPR.maxdict, _REPR.maxtuple, _REPR.maxset = 4, 12, 8, 12, 12
_REPR.maxstring = _REPR.maxlong = _REPR.maxother = 90


def _short(value: Any, n: int = 80) -> str:
    text = _REPR.repr(value)
    return text if len(text) <= n else text[: n - 3] + "..."


__all__ = ["Outcome", "Prepared", "judge", "output_lines", "program_for", "python_equal", "strict_equal", "RUNTIME_ERROR"]
