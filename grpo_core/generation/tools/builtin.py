"""The built-in tools: ``calculator`` (arithmetic, no code run), and ``python``, ``c`` and ``cpp`` (the sandbox's
runners).

``calculator`` reads its expression with :mod:`ast` and evaluates only numbers, ``+ - * / // % **``, unary
signs and parentheses: anything else (a name, a call, an attribute) is refused before anything runs, and
powers and results are bounded so that ``9**9**9`` is an error, not a hang.

``python`` runs the code in the sandbox (:mod:`grpo_rewards.sandbox`, the ``local`` backend shared with the code
rewards) under :data:`PYTHON_LIMITS` and returns what it printed. It keeps no state within a rollout: each call
is a fresh process, so a variable set in one call is gone in the next (the model writes whole programs).
``c`` (gcc, gnu17) and ``cpp`` (g++, gnu++17) compile and run a whole program the same way, each call a new
compile and a new process under :data:`COMPILED_LIMITS` (the sandbox caches compiled programs by source).

A program that fails is the call's error (what the model reads): its status and the end of its standard error
(a compiler's messages, a traceback). One that prints more than ``output_bytes`` is stopped there, and the
error shows the start of what it printed.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any

from grpo_rewards.sandbox.program import OUTPUT_LIMIT, Limits, Program
from grpo_rewards.sandbox.reward import shared_backend

_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
}
_UNARY: dict[type, Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
MAX_EXPONENT = 1000
MAX_BITS = 4096  # an integer result longer than this is refused
MAX_EXPRESSION = 1000  # characters


def _evaluate(node: ast.AST) -> int | float:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise ValueError(f"exponent {right} is over {MAX_EXPONENT}")
        value = _BINARY[type(node.op)](left, right)
        if isinstance(value, complex):
            raise ValueError("the result is not a real number")
        if isinstance(value, int) and value.bit_length() > MAX_BITS:
            raise ValueError("the result is too large")
        return value
    raise ValueError(f"only numbers and + - * / // % ** ( ) are allowed, not {type(node).__name__}")


def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression.

    Args:
        expression: numbers with + - * / // % ** and parentheses, e.g. "(3 + 4) * 12".
    """
    if len(expression) > MAX_EXPRESSION:
        raise ValueError(f"the expression is over {MAX_EXPRESSION} characters")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as error:
        raise ValueError(f"not an expression: {error.msg}") from None
    try:
        value = _evaluate(tree)
    except ZeroDivisionError:
        raise ValueError("division by zero") from None
    except OverflowError:
        raise ValueError("the result is too large") from None
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return str(value)


PYTHON_LIMITS = Limits(cpu_seconds=5.0, wall_seconds=10.0, memory_mb=512, output_bytes=64 * 1024)
COMPILED_LIMITS = Limits(cpu_seconds=5.0, wall_seconds=15.0, memory_mb=512, output_bytes=64 * 1024)
SHOWN_OUTPUT = 1000  # characters of a program's output or errors an error message shows


def run_program(code: str, language: str, limits: Limits) -> str:
    """What the program printed; a RuntimeError saying how it failed otherwise (module docs)."""
    result = shared_backend("local").run([Program(code, language=language, limits=limits)])[0]
    if result.ok:
        return result.stdout
    if result.status == OUTPUT_LIMIT:
        raise RuntimeError(f"{OUTPUT_LIMIT}: the program printed over {limits.output_bytes} bytes and was stopped; "
                           f"it began:\n{result.stdout[:SHOWN_OUTPUT]}")
    detail = (result.stderr or result.error).strip()[-SHOWN_OUTPUT:]
    raise RuntimeError(f"{result.status}: {detail}" if detail else result.status)


def python(code: str) -> str:
    """Run a Python program in a sandbox and return what it printed.

    Args:
        code: a whole Python program; print what you want to see. Nothing is kept between calls.
    """
    return run_program(code, "python", PYTHON_LIMITS)


def c(code: str) -> str:
    """Compile a C program (gcc, gnu17) and run it in a sandbox; return what it printed.

    Args:
        code: a whole C program with a main function; print what you want to see. Nothing is kept between calls.
    """
    return run_program(code, "c", COMPILED_LIMITS)


def cpp(code: str) -> str:
    """Compile a C++ program (g++, gnu++17) and run it in a sandbox; return what it printed.

    Args:
        code: a whole C++ program with a main function; print what you want to see. Nothing is kept between calls.
    """
    return run_program(code, "cpp", COMPILED_LIMITS)


BUILTIN_TOOLS: dict[str, Callable[..., str]] = {"calculator": calculator, "python": python, "c": c, "cpp": cpp}
