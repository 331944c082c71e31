"""The math-verify side of ``math_equivalence``: parse a gold answer and a candidate, compare them.

Runs inside the worker processes of :mod:`grpo_rewards.builtins.timeout_pool`
(the parent process never imports sympy for this). math-verify's own signal
timeouts are disabled (``parsing_timeout=None``, ``timeout_seconds=None``): the
pool enforces the time limit.

Text with no math delimiters (``$``, ``\\(``, ``\\[``, ``\\begin{``) that looks
like LaTeX (it holds a ``\\``, ``^``, ``_`` or ``{``) is parsed wrapped in
``$...$`` first, so that a bare gold such as ``\\sqrt{2}``, ``2^{1/2}`` or
``x^2+1`` parses as LaTeX. Otherwise, or when that finds nothing, the text is
parsed as it is (math-verify finds ``$...$``, ``\\boxed{}`` and plain numbers or
expressions such as ``1,234``, ``3/4``). A lone amount of money (``$12``,
``-$1,234.50``, ``\\$5``) is read as its number. Prose ("garbage words") is never
wrapped, so it does not parse into a product of symbols. A gold with ``####`` (GSM8K) is compared on the
text after its last ``####``.
"""

from __future__ import annotations

import logging
import re
from typing import Any

_DELIMITED = re.compile(r"\$|\\\(|\\\[|\\begin\{")
_LATEX_HINT = re.compile(r"[\\^_{]")
_INTEGER = re.compile(r"[-+]?(?:[0-9]{1,3}(?:,[0-9]{3}){1,99}|[0-9]{1,300})")
_CURRENCY = re.compile(r"\s*([-+−]?)\s*\\?\$\s*(\d[\d,]*(?:\.\d+)?)\s*")  # -$1,234.50 or \$5: a lone $ is money
REPR_CHARS = 120


def init_worker() -> None:
    """Import math-verify once per worker and silence its 'timeout is disabled' warning."""
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    import math_verify  # noqa: F401


def _money_free(text: str) -> str:
    money = _CURRENCY.fullmatch(text)
    return money.group(1).replace("−", "-") + money.group(2) if money else text


def integer_check(gold: str, answer: str) -> tuple[str, str, str, str] | None:
    """The verdict of :func:`check` when both sides are plain integers (``72``, ``-1,234``, ``$5``), else None.

    Exact integer comparison: what math-verify concludes for such pairs, without
    sympy, so the caller can decide these in its own process (most GSM8K rows).
    """
    g = _INTEGER.fullmatch(_money_free(gold_text(gold)))
    a = _INTEGER.fullmatch(_money_free(answer.strip()))
    if g is None or a is None:
        return None
    gi, ai = int(g.group(0).replace(",", "")), int(a.group(0).replace(",", ""))
    return ("ok" if gi == ai else "wrong"), str(gi), str(ai), "equivalent" if gi == ai else "not equivalent"


def _parse(text: str) -> list[Any]:
    from math_verify import parse
    from sympy import Basic, MatrixBase

    def sympy_only(found: list[Any]) -> list[Any]:
        return [x for x in found if isinstance(x, (Basic, MatrixBase))]

    text = _money_free(text)
    attempts = [text]
    if not _DELIMITED.search(text) and _LATEX_HINT.search(text):
        attempts.insert(0, f"${text}$")  # bare LaTeX: "2^{1/2}" read as plain text would give 2
    for attempt in attempts:
        found = sympy_only(parse(attempt, fallback_mode="no_fallback", parsing_timeout=None))
        if found:
            return found
    return []


def gold_text(gold: str) -> str:
    """The part of a gold answer to compare: the text after the last ``####`` when there is one."""
    return gold.rsplit("####", 1)[1].strip() if "####" in gold else gold.strip()


def _show(parsed: list[Any]) -> str:
    text = str(parsed[0]) if parsed else ""
    return text if len(text) <= REPR_CHARS else text[: REPR_CHARS - 1] + "…"


def check(gold: str, answer: str) -> tuple[str, str, str, str]:
    """``(status, parsed_gold, parsed_answer, reason)`` with status ``ok``, ``wrong`` or ``undecided``.

    An unparseable gold is ``undecided`` (the row must not count), never ``ok``;
    an unparseable answer is ``wrong``.
    """
    from math_verify import verify

    gold_parsed = _parse(gold_text(gold))
    if not gold_parsed:
        return "undecided", "", "", f"could not parse the reference {gold[:80]!r}"
    answer_parsed = _parse(answer)
    if not answer_parsed:
        return "wrong", _show(gold_parsed), "", f"could not parse the answer {answer[:80]!r}"
    if verify(gold_parsed, answer_parsed, timeout_seconds=None):
        return "ok", _show(gold_parsed), _show(answer_parsed), "equivalent"
    return "wrong", _show(gold_parsed), _show(answer_parsed), "not equivalent"
