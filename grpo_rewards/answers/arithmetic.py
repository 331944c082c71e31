"""A tiny evaluator of arithmetic on number literals, for program-of-thought answers (``answer = 9 * 2``).

The expression is parsed with :mod:`ast` and only number literals, ``+ - * / // %``, unary signs and small
integer powers are evaluated, exactly (:class:`fractions.Fraction`); a name, a call, an attribute or any
other node is no arithmetic and gives ``None``. Nothing is executed: untrusted code runs only in the
sandbox. Sizes are bounded (:data:`MAX_CHARS` of text, exponents up to :data:`MAX_EXPONENT`, results up to
:data:`MAX_DIGITS` digits), so a hostile expression costs microseconds.
"""

from __future__ import annotations

import ast
import re
from fractions import Fraction

MAX_CHARS = 200
MAX_EXPONENT = 64
MAX_DIGITS = 400
#: what an arithmetic expression of literals may hold (checked before parsing)
_CHARS = re.compile(r"[\d\s.+\-*/%()eE_]+")
_OPERATOR = re.compile(r"\d\s*[-+*/%]")


def _bounded(value: Fraction) -> Fraction:
    if max(abs(value.numerator), value.denominator).bit_length() > MAX_DIGITS * 3.33:
        raise ValueError("too large")
    return value


def _eval(node: ast.AST) -> Fraction:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return Fraction(str(node.value)) if isinstance(node.value, float) else Fraction(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
        value = _eval(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left), _eval(node.right)
        op = node.op
        if isinstance(op, ast.Add):
            return _bounded(left + right)
        if isinstance(op, ast.Sub):
            return _bounded(left - right)
        if isinstance(op, ast.Mult):
            return _bounded(left * right)
        if isinstance(op, (ast.Div, ast.FloorDiv, ast.Mod)):
            if right == 0:
                raise ZeroDivisionError
            if isinstance(op, ast.Div):
                return left / right
            return Fraction(left // right) if isinstance(op, ast.FloorDiv) else left % right
        if isinstance(op, ast.Pow) and right.denominator == 1 and abs(right) <= MAX_EXPONENT:
            if right < 0 and left == 0:
                raise ZeroDivisionError
            return _bounded(left ** int(right))
    raise ValueError("not arithmetic on literals")


def evaluate(expression: str) -> Fraction | None:
    """The exact value of ``expression`` when it is arithmetic on number literals with at least one operator
    (``9 * 2``, ``(3 + 4) / 2``), else ``None`` (a single literal, a name, a call: module docs)."""
    text = expression.strip()
    if not text or len(text) > MAX_CHARS or not _CHARS.fullmatch(text) or not _OPERATOR.search(text):
        return None
    try:
        return _eval(ast.parse(text, mode="eval"))
    except (SyntaxError, ValueError, ZeroDivisionError, OverflowError, RecursionError, MemoryError):
        return None
