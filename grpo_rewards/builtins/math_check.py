"""The math-verify side of ``math_equivalence``: parse a gold answer and a candidate, compare them.

Runs inside the worker processes of :mod:`grpo_rewards.builtins.timeout_pool`
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
  the number grammar (:mod:`grpo_rewards.numbers`).
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
from typing import Any

from grpo_rewards.numbers import format_number, numbers_equal, parse_literal

_DELIMITED = re.compile(r"\$|\\\(|\\\[|\\begin\{")
_FORMULA_HINT = re.compile(r"[\\^_{A-Za-z]")
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


def literal_check(gold: str, answer: str, require_literal: bool) -> tuple[str, str, str, str] | None:
    """The verdict when the gold is a number literal and the answer is one too (or must be), else None.

    Decided by the number grammar (:mod:`grpo_rewards.numbers`, with its percent rule)
    in the calling process. With ``require_literal``, an answer that is not a number
    literal (``17*23+5``, ``2^{10}``, ``x + 1``) is wrong against a numeric gold.
    """
    ref = parse_literal(gold_text(gold))
    if ref is None:
        return None
    got = literal_answer(answer)
    if got is None:
        if require_literal:
            return "wrong", _short(gold_text(gold)), _short(answer), "the answer is not a number literal"
        return None
    same = numbers_equal(got, ref)
    return ("ok" if same else "wrong"), _short(gold_text(gold)), _short(answer), (
        "equal numbers" if same else "different numbers")


def _short(text: str) -> str:
    return text if len(text) <= REPR_CHARS else text[: REPR_CHARS - 1] + "…"


def _parse(text: str, plain_text: bool = True) -> list[Any]:
    from math_verify import parse
    from sympy import Basic, MatrixBase

    text = _money_free(text.strip())
    if is_formula(text) or is_structure(text, plain_text) or _COLON_FORM.match(text):
        text = f"${text}$"  # bare LaTeX, algebra, a list or a ratio: as plain text "x + 1" gives 1, "-2,1" -2.1, "7:32" 7
    found = parse(text, parsing_timeout=None)
    return [x for x in found if isinstance(x, (Basic, MatrixBase, str))]


def gold_text(gold: str) -> str:
    """The part of a gold answer to compare: the text after the last ``####`` when there is one."""
    return gold.rsplit("####", 1)[1].strip() if "####" in gold else gold.strip()


def _show(parsed: list[Any]) -> str:
    text = str(parsed[0]) if parsed else ""
    return _short(text)


def check_gold(gold: str) -> bool:
    """Whether ``gold`` parses and verifies equal to itself: a reference the reward can score against."""
    from math_verify import verify

    parsed = _parse(gold_text(gold))
    return any(not isinstance(x, str) for x in parsed) and bool(verify(parsed, parsed, timeout_seconds=None))


def check(gold: str, answer: str, require_literal: bool = False, whole_text: bool = False
          ) -> tuple[str, str, str, str]:
    """``(status, parsed_gold, parsed_answer, reason)`` with status ``ok``, ``wrong`` or ``undecided``.

    An unparseable gold is ``undecided`` (the row must not count), never ``ok``;
    an unparseable answer is ``wrong``. With ``require_literal`` and a gold that is a
    number literal, the text math-verify extracted from the answer must be a number
    literal too, compared by the number grammar. ``whole_text``: the answer is a whole
    completion, plain text (``1,22`` is a decimal comma there, a list in an extracted answer).
    """
    from math_verify import verify

    gold_parsed = _parse(gold_text(gold))
    if not any(not isinstance(x, str) for x in gold_parsed):  # a text alone is not a parsed reference
        return "undecided", "", "", f"could not parse the reference {gold[:80]!r}"
    answer_parsed = _parse(answer, plain_text=whole_text)
    if not answer_parsed:
        return "wrong", _show(gold_parsed), "", f"could not parse the answer {answer[:80]!r}"
    ref = parse_literal(gold_text(gold))
    if ref is not None and (require_literal or any(isinstance(x, str) and literal_answer(x) for x in answer_parsed)):
        texts = [x for x in answer_parsed if isinstance(x, str)]
        got = literal_answer(texts[0]) if texts else None
        if got is None:
            return "wrong", _show(gold_parsed), _show(answer_parsed), "the answer is not a number literal"
        same = numbers_equal(got, ref)
        return ("ok" if same else "wrong"), _show(gold_parsed), _show(answer_parsed), (
            "equal numbers" if same else "different numbers")
    if verify(gold_parsed, answer_parsed, timeout_seconds=None):
        return "ok", _show(gold_parsed), _show(answer_parsed), "equivalent"
    return "wrong", _show(gold_parsed), _show(answer_parsed), "not equivalent"
