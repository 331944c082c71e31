"""The built-in tools: ``calculator`` (arithmetic, no code run) and ``python`` (the sandbox's Python runner).

``calculator`` reads its expression with :mod:`ast` and evaluates only numbers, ``+ - * / // % **``, unary
signs and parentheses: anything else (a name, a call, an attribute) is refused before anything runs, and
powers and results are bounded so that ``9**9**9`` is an error, not a hang.

``python`` runs the code in the sandbox (:mod:`grpo_rewards.sandbox`, the ``local`` backend shared with the code
rewards) under :data:`PYTHON_LIMITS` and returns what it printed. It keeps no state within a rollout: each call
is a fresh process, so a variable set in one call is gone in the next (the model writes whole programs).
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any

from grpo_rewards.sandbox.program import Limits, Program
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


def python(code: str) -> str:
    """Run a Python program in a sandbox and return what it printed.

    Args:
        code: a whole Python program; print what you want to see. Nothing is kept between calls.
    """
    result = shared_backend("local").run([Program(code, language="python", limits=PYTHON_LIMITS)])[0]
    if result.ok:
        return result.stdout
    detail = (result.stderr or result.error).strip()[-1000:]
    raise RuntimeError(f"{result.status}: {detail}" if detail else result.status)


BUILTIN_TOOLS: dict[str, Callable[..., str]] = {"calculator": calculator, "python": python}
