"""The math-verify side of ``math_equivalence``: parse a gold answer and a candidate, compare them.

Runs inside the worker processes of :mod:`grpo_rewards.isolation.pool`
(the parent process never imports sympy for this). math-verify's own signal
timeouts are disabled (``parsing_timeout=None``, ``timeout_seconds=None``): the
pool enforces the time limit. Workers are warmed up when they start
(:func:`init_worker` loads math-verify and its LaTeX parser), so that cost never
counts against an item's time limit.

How text is read:

* Text with no math delimiters (``$``, ``\\(``, ``\\[``, ``\\begin{``) that is a
  formula (it holds a letter or a ``\\``, ``^``, ``_``, ``{``, and is not prose) is
  parsed as LaTeX, wrapped in ``$...$``, and only that way: ``x + 1`` is the
  polynomial x + 1, never the number 1 found by reading it as plain text; ``2x+3``,
  ``3x`` and a gold ``1+x`` likewise. Unit words math-verify knows (``5 cm``) are
  dropped by its LaTeX normalisation.
* Prose (a word of three or more letters that is not a function name such as
  ``sin`` or ``log``, or two words in a row) is never wrapped: it would parse as a
  product of letters. It is read as it is, and math-verify finds the math inside
  (``the value is 2^{10} = 1024`` gives 1024).
* A list, tuple, interval or matrix written bare, with no letters (``-2,1``,
  ``(6,31,-1)``, ``[-4, 0]``, ``(2, 2), (6, 2)``, ``\\begin{pmatrix} 0 & 3 \\end{pmatrix}``),
  is LaTeX too, wrapped in ``$...$``: read as plain text ``-2,1`` would be the number
  -2.1 and a tuple would not parse. This is how several boxed answers, read as one
  list by the extraction (``\\boxed{2} ... \\boxed{3}`` gives ``2, 3``), compare as a set. A
  number literal of the number grammar (``1,234``) is a number, not a list. Two digit
  groups joined by one comma (``1,22``) are a list in an extracted answer (as in a box)
  but a decimal comma in a reference or a whole completion (``extract = "none"``),
  which are plain text, as math-verify reads them (1.22).
* A bare ratio or clock time ``a:b`` (``7:32``, ``12:30``) is LaTeX too, the ratio a/b (``$7:32$``
  is 7/32, as math-verify reads it): read as plain text it would be the number a, so ``12`` would
  score right against ``12:30``. A whole hour (``12:00``) has no value and equals only its own text.
* Anything else (numbers ``1,234``, ``3/4``) is read as it is.
* A lone amount of money (``$12``, ``-$1,234.50``, ``\\$5``, ``$1e3``) is read as its number, by
  the number grammar (:mod:`grpo_rewards.answers.numbers`).
* A gold with ``####`` (GSM8K) is compared on the text after its last ``####``.

math-verify's string fallback is kept: the text math-verify extracted is kept
beside its sympy value, and two identical texts are equal (``$12:00$``, whose value
is sympy's ``zoo``, equals itself and not ``$13:00$``). A reference that gives no
sympy value at all (``{``) is unparseable, not a text to match. Integers of any length parse (the workers lift Python's 4,300-digit limit).
"""

from __future__ import annotations

import logging
import re
import sys
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

from grpo_rewards.answers.numbers import Number, compared_values, format_number, parse_literal, unwrap

_DELIMITED = re.compile(r"\$|\\\(|\\\[|\\begin\{")
_FORMULA_HINT = re.compile(r"[\\^_{A-Za-z<>=≤≥]")
_TEXT_ARGS = re.compile(r"\\(?:text|mathrm|textbf|mathbf|operatorname|mbox)\s*\{[^{}]*\}")
_COMMANDS = re.compile(r"\\[A-Za-z]+")
_WORD = re.compile(r"[A-Za-z]{3,}")
_TWO_WORDS = re.compile(r"\b[A-Za-z]{2,}\s+[A-Za-z]{2,}\b")
FUNCTIONS = frozenset((
    "sin", "cos", "tan", "cot", "sec", "csc", "sinh", "cosh", "tanh", "arcsin", "arccos", "arctan",
    "log", "exp", "sqrt", "max", "min", "gcd", "lcm", "det", "mod", "deg",
))
_MATRIX = re.compile(r"\\begin\{[pbvBV]?matrix\}.*\\end\{[pbvBV]?matrix\}\Z", re.DOTALL)
_DECIMAL_COMMA = re.compile(r"-?\d+,\d+\Z")
_COLON_FORM = re.compile(r"\d+\s*:\s*\d+\Z")  # 7:32, 12:30: a ratio (or a time), never the number before the colon
_VARIABLE_IS = re.compile(r"^\s*\$?\s*[A-Za-z]\s*=\s*")  # "x = 5": the value 5
REPR_CHARS = 120
MATCH_TYPES = ("latex", "expr")
_ARITHMETIC = re.compile(r"[\d\s.,+\-*/()×÷^{}\[\]=]+")  # digits and operators only: arithmetic to do
_SPANS = re.compile(r"\$\$(.+?)\$\$|\$(.+?)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.DOTALL)
_PM_LIST = re.compile(r"(?:^|,)\s*[A-Za-z]\s*=")


@dataclass(frozen=True)
class Options:
    """math-verify's comparison options, as ``math_equivalence`` exposes them.

    ``precision``: decimal places a number written with a decimal point is rounded to before it is
    compared (math-verify's ``float_rounding``; both sides rounded, exact numbers compared exactly);
    ``match_types``: what math-verify extracts from a text (``latex``, ``expr``); ``strict`` and
    ``allow_set_relation_comp``: math-verify's ``verify`` options of those names.
    """

    precision: int = 6
    match_types: tuple[str, ...] = MATCH_TYPES
    strict: bool = True
    allow_set_relation_comp: bool = False

    def check(self) -> Options:
        """``self`` when every option is valid; a ``ValueError`` naming the bad one."""
        if isinstance(self.precision, bool) or not isinstance(self.precision, int) or not 0 <= self.precision <= 15:
            raise ValueError(f"precision must be an integer from 0 to 15, got {self.precision!r}")
        if not self.match_types or any(m not in MATCH_TYPES for m in self.match_types):
            raise ValueError(f"match_types must be a non-empty list of {', '.join(MATCH_TYPES)}, got "
                             f"{list(self.match_types)!r}")
        for name in ("strict", "allow_set_relation_comp"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be true or false, got {getattr(self, name)!r}")
        return self


DEFAULT_OPTIONS = Options()


def numbers_close(a: Number, b: Number, precision: int) -> bool:
    """The precision rule: equal under the percent rule, exactly; or, when either was written with a
    decimal point, equal once both are rounded to ``precision`` decimal places (math-verify's rule:
    ``0.0833333333333333`` is ``1/12`` at 6 places, ``0.333`` is ``1/3`` at 3 places and not at 4), or to
    ``precision`` significant digits for numbers smaller than that (:func:`places`; math-verify refuses
    ``0`` and ``3e-9`` for ``3e-7`` too)."""
    x, y = compared_values(a, b)
    if x == y:
        return True
    if not (a.decimal or b.decimal):
        return False
    return round(x, places(x, y, precision)) == round(y, places(x, y, precision))


def places(x: Fraction, y: Fraction, precision: int) -> int:
    """The decimal places the precision rule rounds ``x`` and ``y`` to: ``precision``, plus one for each zero
    after the decimal point of the larger in size, so that ``precision`` significant digits remain under 1
    (a reference of ``3e-7`` is not 0, nor ``3e-9``). Numbers whose relative difference is over
    ``10**(1 - precision)`` never match."""
    size = max(abs(x), abs(y))
    if size >= 1:
        return precision
    return precision + len(str(size.denominator // size.numerator)) - 1  # the zeros after the point
WARM_UP = ("$x^2+\\frac{1}{2}$", "$\\frac{1}{2}+x^2$")


def init_worker() -> None:
    """Load math-verify and its LaTeX parser once per worker; silence its 'timeout is disabled' warning."""
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    if hasattr(sys, "set_int_max_str_digits"):
        sys.set_int_max_str_digits(0)  # a worker process only: integers of any length parse
    from math_verify import parse, verify

    verify(*(parse(text, parsing_timeout=None) for text in WARM_UP), timeout_seconds=None)


def _money_free(text: str) -> str:
    """A text that is one number literal with a ``$`` (``-$1,234.50``, ``\\$5``, ``$1e3``) as its plain
    number, by the number grammar: a lone ``$`` is money, not a math delimiter."""
    if "$" not in text:
        return text
    number = parse_literal(text)
    return text if number is None or number.percent else format_number(number.value)


def is_prose(text: str) -> bool:
    """Whether ``text`` holds words (not LaTeX commands, ``\\text{}`` arguments or function names)."""
    bare = _COMMANDS.sub(" ", _TEXT_ARGS.sub(" ", text))
    if _TWO_WORDS.search(bare):
        return True
    return any(word.group().lower() not in FUNCTIONS for word in _WORD.finditer(bare))


def is_formula(text: str) -> bool:
    """Text to parse as LaTeX (see module docs): no math delimiters, some letter or LaTeX sign, not prose."""
    return not _DELIMITED.search(text) and bool(_FORMULA_HINT.search(text)) and not is_prose(text)


def is_structure(text: str, plain_text: bool = False) -> bool:
    """A list, tuple, interval or matrix written bare (module docs): to parse as LaTeX, not as plain text.

    ``plain_text``: ``text`` is a reference or a whole completion, where ``1,22`` is a decimal comma.
    """
    if plain_text and _DECIMAL_COMMA.match(text):
        return False
    if "$" in text or "\\(" in text or "\\[" in text:
        return False
    if _MATRIX.match(text):
        return True
    if ("," not in text and ";" not in text) or _DELIMITED.search(text) or is_prose(text):
        return False
    return parse_literal(text) is None


def literal_answer(text: str):
    """The number literal ``text`` is (``x = 5`` is 5), by the number grammar; ``None`` if it is none."""
    number = parse_literal(text)
    if number is None:
        stripped = _VARIABLE_IS.sub("", text, count=1)
        if stripped != text:
            number = parse_literal(stripped.rstrip("$ "))
    return number


def literal_check(gold: str, answer: str, require_literal: bool, options: Options = DEFAULT_OPTIONS
                  ) -> tuple[str, str, str, str] | None:
    """The verdict when the gold is a number literal and the answer is one too (or must be and cannot be),
    else None (the worker decides).

    Decided by the number grammar (:mod:`grpo_rewards.answers.numbers`, with its percent rule and the
    precision rule of :func:`numbers_close`) in the calling process. With ``require_literal``, an
    answer of digits and operators only (``17*23+5``, ``(9+1)``) or of prose is wrong against a
    numeric gold; a formula (``\\sqrt{17}``, ``2^{10}``) goes to the worker, which accepts it only in
    simplest form (:func:`arithmetic_left`).
    """
    ref = parse_literal(gold_text(gold))
    if ref is None:
        return None
    got = literal_answer(answer)
    if got is None:
        if require_literal and (_ARITHMETIC.fullmatch(answer.strip()) or is_prose(answer) or not answer.strip()):
            return "wrong", _short(gold_text(gold)), _short(answer), "the answer is not a number literal"
        return None
    same = numbers_close(got, ref, options.precision)
    return ("ok" if same else "wrong"), _short(gold_text(gold)), _short(answer), (
        "equal numbers" if same else "different numbers")


def _short(text: str) -> str:
    return text if len(text) <= REPR_CHARS else text[: REPR_CHARS - 1] + "…"


def _configs(options: Options) -> list[Any] | None:
    """math-verify's extraction configs for ``options.match_types`` (``None``: its defaults)."""
    if tuple(options.match_types) == MATCH_TYPES:
        return None
    from math_verify import ExprExtractionConfig, LatexExtractionConfig

    return [LatexExtractionConfig(boxed_match_priority=0) if m == "latex" else ExprExtractionConfig()
            for m in options.match_types]


def _solutions(text: str) -> str:
    """A list of solutions ``x = a, x = b \\pm c`` as the set it lists, ``a, b + c, b - c`` (math-verify reads
    neither the repeated ``x =`` nor a ``\\pm`` inside a list)."""
    bare = text.strip().strip("$").strip()
    if bare.startswith("\\boxed{") and bare.endswith("}"):
        bare = bare[len("\\boxed{"):-1]
    items = [item.strip() for item in bare.split(",")]
    names = {re.match(r"([A-Za-z])\s*=", item).group(1) for item in items if re.match(r"[A-Za-z]\s*=", item)}
    if len(items) < 2 or len(names) != 1 or not all(re.match(r"[A-Za-z]\s*=", i) for i in items):
        return text
    out: list[str] = []
    for item in items:
        value = item.split("=", 1)[1].strip()
        if value.count("\\pm") == 1:
            out += [value.replace("\\pm", "+"), value.replace("\\pm", "-")]
        else:
            out.append(value)
    return "$" + ", ".join(out) + "$"


def _parse(text: str, plain_text: bool = True, options: Options = DEFAULT_OPTIONS) -> list[Any]:
    from math_verify import parse
    from sympy import Basic, MatrixBase

    original = text.strip()
    text = _money_free(original)
    if "expr" not in options.match_types and not _DELIMITED.search(text) and (text != original or not plain_text):
        text = f"${text}$"  # LaTeX extraction only reads delimited math: an extracted answer, a lone amount
    if "=" in text and "," in text and _PM_LIST.search(text.strip().strip("$").removeprefix("\\boxed{")):
        text = _solutions(text)
    if "latex" in options.match_types and (is_formula(text) or is_structure(text, plain_text)
                                           or _COLON_FORM.match(text)):
        text = f"${text}$"  # bare LaTeX, algebra, a list or a ratio: as plain text "x + 1" gives 1, "-2,1" -2.1, "7:32" 7
    configs = _configs(options)
    found = parse(text, parsing_timeout=None) if configs is None else parse(text, configs, parsing_timeout=None)
    return [x for x in found if isinstance(x, (Basic, MatrixBase, str))]


@lru_cache(maxsize=65536)  # a batch repeats each reference num_generations times
def gold_text(gold: str) -> str:
    """The part of a gold answer to compare: the text after the last ``####`` when there is one."""
    return gold.rsplit("####", 1)[1].strip() if "####" in gold else gold.strip()


def _show(parsed: list[Any]) -> str:
    text = str(parsed[0]) if parsed else ""
    return _short(text)


def check_gold(gold: str, options: Options = DEFAULT_OPTIONS) -> bool:
    """Whether ``gold`` parses and verifies equal to itself: a reference the reward can score against."""
    parsed = _parse(gold_text(gold), options=options)
    return any(not isinstance(x, str) for x in parsed) and _verify(parsed, parsed, options)


def _verify(gold: list[Any], answer: list[Any], options: Options) -> bool:
    from math_verify import verify

    return bool(verify(gold, answer, float_rounding=options.precision, strict=options.strict,
                       allow_set_relation_comp=options.allow_set_relation_comp, timeout_seconds=None))


def _is_numeric(node: Any) -> bool:
    return bool(getattr(node, "is_Rational", False)) or (
        getattr(node, "is_Pow", False) and node.args[0].is_Integer and node.args[1] == -1)


def arithmetic_left(latex: str) -> str | None:
    """What arithmetic is left undone in ``latex`` (``17 \\cdot 23 + 5``, ``\\sqrt{16}``, ``2^{10}``,
    ``2 \\cdot 3\\sqrt{2}``, ``\\sqrt{8}``), or ``None`` when sympy, reading it with ``evaluate=False``, finds
    nothing to compute: a simplest exact form (``\\sqrt{17}``, ``\\frac{1+\\sqrt{5}}{2}``, ``2\\pi``)."""
    import sympy
    from latex2sympy2_extended import latex2sympy

    if "\\boxed" in latex or "\\fbox" in latex or "," in latex or ";" in latex:
        return "it is not one number"  # latex2sympy would read one box of a list, or one item
    try:
        with sympy.evaluate(False):
            tree = latex2sympy(latex)
    except Exception:  # noqa: BLE001 - an answer sympy cannot read is no simplest form
        return "sympy cannot read it"
    if not isinstance(tree, sympy.Expr) or tree.free_symbols:  # a list, a set, a relation, a variable
        return "it is not a number"
    if tree.is_Rational or tree.is_Float:
        return None
    if sympy.nsimplify(tree.doit()).is_Rational:
        return "its value is a rational number written as arithmetic"
    for node in sympy.preorder_traversal(tree):
        if node.is_Atom:
            continue
        if node.is_Add and sum(1 for a in node.args if _is_numeric(a)) > 1:
            return f"{node} adds numbers"
        if node.is_Mul:
            numbers = [a for a in node.args if _is_numeric(a) and a != -1]
            integers = [a for a in numbers if not a.is_Pow]
            if len(integers) > 1 or len(numbers) - len(integers) > 1:
                return f"{node} multiplies numbers"
        if (node.is_Pow and node.args[0].is_Rational and node.args[1].is_Rational and node.args[1] != -1
                and (node.args[1].is_Integer or sympy.Pow(*node.args) != node)):
            return f"{node} is a power to compute"
        if node.is_Function and not node.free_symbols and sympy.nsimplify(node.doit()).is_Rational:
            return f"{node} has a value to compute"
    return None


def _false_relation(parsed: list[Any]) -> str | None:
    """Why a relation the answer states is false (``\\sqrt{3} = \\sqrt{2}``), when it has no variable."""
    import sympy

    items = [arg for item in parsed for arg in (item.args if isinstance(item, sympy.And) else (item,))]
    for item in items:
        if item is sympy.false:  # a relation between numbers sympy already found false (2 < 1)
            return "the answer states a false relation"
        if isinstance(item, sympy.Rel) and not item.free_symbols:
            try:
                truth = sympy.simplify(item.lhs - item.rhs) == 0 if isinstance(item, sympy.Eq) else bool(item.doit())
            except (TypeError, ValueError):
                continue
            if not truth:
                return f"the answer states a false relation: {_short(str(item))}"
    return None


def _hedged_spans(answer: str, options: Options) -> str | None:
    """Why an answer in prose holding several math spans is a hedge: spans whose values differ."""
    spans = [next(g for g in m.groups() if g is not None) for m in _SPANS.finditer(answer)]
    if len(spans) < 2 or not is_prose(_SPANS.sub(" ", answer)):
        return None
    values = [_parse(f"${span}$", options=options) for span in spans]
    values = [v for v in values if any(not isinstance(x, str) for x in v)]
    first = values[0] if values else None
    for other in values[1:]:
        if not _verify(first, other, options):
            return "the answer names several different values in prose: a hedge"
    return None


def check(gold: str, answer: str, require_literal: bool = False, whole_text: bool = False,
          options: Options = DEFAULT_OPTIONS) -> tuple[str, str, str, str]:
    """``(status, parsed_gold, parsed_answer, reason)`` with status ``ok``, ``wrong`` or ``undecided``.

    An unparseable gold is ``undecided`` (the row must not count), never ``ok``;
    an unparseable answer is ``wrong``. With ``require_literal`` and a gold that is a
    number literal, the answer must be a number literal (compared by the number grammar
    and the precision rule) or a simplest exact form (:func:`arithmetic_left`), compared
    by math-verify. A relation without variables that is false is wrong; a true one is
    its last side. Several different math spans in a prose answer are a hedge, wrong.
    ``whole_text``: the answer is a whole completion, plain text (``1,22`` is a decimal
    comma there, a list in an extracted answer).
    """
    gold_parsed = _parse(gold_text(gold), options=options)
    if not any(not isinstance(x, str) for x in gold_parsed):  # a text alone is not a parsed reference
        return "undecided", "", "", f"could not parse the reference {gold[:80]!r}"
    if not whole_text:
        hedge = _hedged_spans(answer, options)
        if hedge:
            return "wrong", _show(gold_parsed), _short(answer), hedge
    answer_parsed = _parse(answer, plain_text=whole_text, options=options)
    if not answer_parsed:
        return "wrong", _show(gold_parsed), "", f"could not parse the answer {answer[:80]!r}"
    false = _false_relation(answer_parsed)
    if false:
        return "wrong", _show(gold_parsed), _show(answer_parsed), false
    ref = parse_literal(gold_text(gold))
    texts = [x for x in answer_parsed if isinstance(x, str)]
    if ref is not None and require_literal and not whole_text:
        texts = [unwrap(answer)]  # the extracted answer itself must be the number, not what math-verify found in it
    if texts and "=" in texts[0] and literal_answer(texts[0].rsplit("=", 1)[1]) is not None:
        texts = [texts[0].rsplit("=", 1)[1]]  # a true relation (or x = value): its last side
    if ref is not None and (require_literal or any(literal_answer(x) for x in texts)):
        got = literal_answer(texts[0]) if texts else None
        if got is None:
            left = arithmetic_left(texts[0]) if texts else "no text"
            if left is not None:
                return "wrong", _show(gold_parsed), _show(answer_parsed), (
                    f"the answer is not a number literal nor a simplest exact form ({left})")
            same = _verify(gold_parsed, answer_parsed, options)
            return ("ok" if same else "wrong"), _show(gold_parsed), _show(answer_parsed), (
                "equal in simplest exact form" if same else "different values")
        same = numbers_close(got, ref, options.precision)
        return ("ok" if same else "wrong"), _show(gold_parsed), _show(answer_parsed), (
            "equal numbers" if same else "different numbers")
    if _verify(gold_parsed, answer_parsed, options):
        return "ok", _show(gold_parsed), _show(answer_parsed), "equivalent"
    return "wrong", _show(gold_parsed), _show(answer_parsed), "not equivalent"
