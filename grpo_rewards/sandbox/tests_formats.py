"""Test cases from a dataset column, in the formats code datasets use.

``{"language", "test_cases": [{"input", "output"}]}``  open-r1's ``verification_info``
``{"inputs": [...], "outputs": [...]}``               SandboxFusion / APPS standard input/output
``{"fn_name": "f", "inputs": [[args]], "outputs": [...]}``  a function called with arguments
``{"test_list": ["assert f(1) == 2", ...]}``          MBPP (``test_setup_code``/``test_imports`` too)
``{"test": "def check(candidate): ...", "entry_point": "f"}``  HumanEval
a string or list of ``assert`` lines                 assert-style, best effort

A cell may be a dict or its JSON text. Asserts of the form ``assert EXPR == LITERAL``
become checks judged outside the sandbox (the literal never enters it); any other
assert runs inside and is *weak*: a hostile program could fake its pass.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field
from typing import Any


class TestFormatError(ValueError):
    """A tests cell in no format we know."""

    __test__ = False  # not a pytest class


@dataclass(frozen=True)
class StdioCase:
    stdin: str
    expected: str


@dataclass(frozen=True)
class CallCase:
    fn_name: str
    args: Any
    expected: Any


@dataclass(frozen=True)
class AssertCase:
    """``expr`` is evaluated in the sandbox and compared with ``expected`` outside; ``expr=None`` is weak."""

    setup: str
    statement: str
    expr: str | None = None
    expected: Any = None

    @property
    def weak(self) -> bool:
        return self.expr is None


TestCase = StdioCase | CallCase | AssertCase


@dataclass
class TestSuite:
    __test__ = False  # not a pytest class

    cases: list[TestCase] = field(default_factory=list)
    language: str = "python"

    @property
    def weak(self) -> int:
        return sum(1 for c in self.cases if isinstance(c, AssertCase) and c.weak)


def parse_tests(cell: Any, language: str = "python") -> TestSuite:
    """A :class:`TestSuite` from one dataset cell; :class:`TestFormatError` says what is wrong."""
    if isinstance(cell, (bytes, bytearray)):
        cell = cell.decode()
    if isinstance(cell, str):
        stripped = cell.strip()
        if stripped[:1] in "{[":
            try:
                cell = json.loads(stripped)
            except json.JSONDecodeError:
                if stripped.startswith("{"):
                    raise TestFormatError("tests cell looks like JSON but does not parse") from None
        if isinstance(cell, str):
            return TestSuite(_assert_cases(cell, ""), language)
    if isinstance(cell, list):
        if all(isinstance(x, str) for x in cell):
            return TestSuite(_assert_cases("\n".join(cell), ""), language)
        raise TestFormatError("a list of tests must hold assert lines (strings)")
    if not isinstance(cell, dict):
        raise TestFormatError(f"tests cell must be a dict, JSON text or assert lines, got {type(cell).__name__}")
    language = str(cell.get("language") or language)
    if "test_cases" in cell:
        cases = cell["test_cases"]
        if not isinstance(cases, list):
            raise TestFormatError("'test_cases' must be a list of {input, output}")
        if cases and all(isinstance(c, dict) and "fn_name" in c for c in cases):
            return TestSuite([CallCase(c["fn_name"], c["input"], c["output"]) for c in cases], language)
        out: list[TestCase] = []
        for i, c in enumerate(cases):
            if not isinstance(c, dict) or "input" not in c or "output" not in c:
                raise TestFormatError(f"test_cases[{i}] needs 'input' and 'output'")
            out.append(StdioCase(_text(c["input"]), _text(c["output"])))
        return TestSuite(out, language)
    if "inputs" in cell or "outputs" in cell:
        inputs, outputs = cell.get("inputs"), cell.get("outputs")
        if not isinstance(inputs, list) or not isinstance(outputs, list) or len(inputs) != len(outputs):
            raise TestFormatError("'inputs' and 'outputs' must be lists of the same length")
        fn = cell.get("fn_name")
        if fn:
            return TestSuite([CallCase(str(fn), a, e) for a, e in zip(inputs, outputs, strict=True)], language)
        return TestSuite([StdioCase(_text(a), _text(e)) for a, e in zip(inputs, outputs, strict=True)], language)
    if "test_list" in cell:
        setup = "\n".join(str(cell.get(k) or "") for k in ("test_imports", "test_setup_code") if cell.get(k))
        if isinstance(cell.get("test_imports"), list):
            setup = "\n".join([*cell["test_imports"], str(cell.get("test_setup_code") or "")])
        return TestSuite(_assert_cases("\n".join(cell["test_list"]), setup), language)
    if "test" in cell:
        return TestSuite(_humaneval_cases(str(cell["test"]), cell.get("entry_point")), language)
    raise TestFormatError(f"unknown tests format (keys: {', '.join(sorted(cell)) or 'none'})")


def _text(value: Any) -> str:
    if isinstance(value, list):
        return "\n".join(str(v) for v in value)
    return str(value)


def _literal(node: ast.expr) -> tuple[bool, Any]:
    """Whether ``node`` is a literal JSON can carry, and its value."""
    try:
        value = ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False, None
    return _jsonable(value), value


def _jsonable(value: Any) -> bool:
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_jsonable(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _jsonable(v) for k, v in value.items())
    return False


def _assert_case(node: ast.Assert, setup: str) -> AssertCase:
    statement = ast.unparse(node)
    test = node.test
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
        left, right = test.left, test.comparators[0]
        for expr, lit in ((left, right), (right, left)):
            ok, value = _literal(lit)
            if ok and not _literal(expr)[0]:
                return AssertCase(setup, statement, ast.unparse(expr), value)
    return AssertCase(setup, statement)


def _assert_cases(source: str, setup: str) -> list[TestCase]:
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise TestFormatError(f"assert tests do not parse: {exc.msg} (line {exc.lineno})") from None
    cases: list[TestCase] = []
    other: list[str] = [setup] if setup else []
    for node in tree.body:
        if isinstance(node, ast.Assert):
            cases.append(_assert_case(node, "\n".join(other)))
        else:
            other.append(ast.unparse(node))
    if not cases:
        raise TestFormatError("no assert statement in the tests")
    return cases


def _humaneval_cases(source: str, entry_point: Any) -> list[TestCase]:
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise TestFormatError(f"HumanEval test does not parse: {exc.msg} (line {exc.lineno})") from None
    check = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "check"), None)
    if check is None:
        return _assert_cases(source, "")
    if not entry_point:
        raise TestFormatError("HumanEval tests need 'entry_point'")
    module = "\n".join(ast.unparse(n) for n in tree.body if n is not check)
    param = check.args.args[0].arg if check.args.args else "candidate"
    setup = "\n".join(s for s in (module, f"{param} = {entry_point}") if s)
    if all(isinstance(n, ast.Assert) or _is_docstring(n) for n in check.body):
        return [_assert_case(n, setup) for n in check.body if isinstance(n, ast.Assert)]
    # loops, helpers, locals: run check() whole, inside the sandbox (weak)
    return [AssertCase(f"{module}\n{ast.unparse(check)}", f"check({entry_point})")]


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
