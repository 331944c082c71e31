"""Number parsing and answer normalisation shared by the rewards.

:func:`parse_number` turns one rendered answer into an exact :class:`fractions.Fraction`
(never a float), so ``4.0 == 4``, ``1,234 == 1234``, ``0.1 + 0.2``-style rounding
never decides a reward, and ``3/4 == 0.75``. Accepted renderings:

* thousands separators ``1,234,567`` (only well-formed groups of three), LaTeX ``1{,}234``
  and ``1\\,234``
* a sign, including the unicode minus ``−`` and en dash ``–``; ``+5``
* currency ``$``, ``\\$``, ``€``, ``£``, ``¥`` before the number or after the sign;
  a trailing ``%`` / ``\\%`` is dropped (``50%`` is 50: GSM8K answers percentages that way)
* decimals ``4.0``, ``.5``, ``5.``; exponents ``1.5e3`` (``|exponent| <= 400``)
* fractions ``3/4``, ``-3/4``, ``\\frac{3}{4}``, ``\\frac34``, ``\\dfrac``, ``\\tfrac``, ``-\\frac{3}{4}``
* wrappers ``$...$``, ``\\(...\\)``, ``\\[...\\]``, ``\\boxed{}``, ``\\text{}``, ``\\mathrm{}``, ``\\textbf{}``
* surrounding whitespace and one trailing sentence period

Only ASCII digits count (``int()`` would also accept ``٣`` or full-width digits; an
answer written that way is not parsed). Anything else, including words and units
(``72 apples``), is not a number: :func:`parse_number` returns ``None``.
"""

from __future__ import annotations

import re
from fractions import Fraction
from functools import lru_cache

MAX_EXPONENT = 400
MAX_LENGTH = 200  # longer strings are not parsed as numbers (keeps junk cheap)
MAX_WRAPPERS = 6  # layers of $...$, \\boxed{...} and the like peeled off an answer

_MINUS_SIGNS = str.maketrans({"−": "-", "‒": "-", "–": "-", "﹣": "-", "－": "-", "＋": "+"})
_WRAPPERS = re.compile(r"^\\(?:boxed|fbox|text|textbf|mathrm|mathbf|displaystyle)\s*\{(.*)\}$", re.DOTALL)
_MATH_DELIMS = (("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"))
_FRAC = re.compile(r"^([-+]?)\\[dt]?frac\s*(?:\{([^{}]*)\}|(\d))\s*(?:\{([^{}]*)\}|(\d))$")
_LATEX_NOISE = re.compile(r"\\[,;:! ]|\{,\}")
_CURRENCY = "$€£¥"
_PLAIN = r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?|\.\d+"
_NUMBER = re.compile(
    rf"(?P<sign>[-+]?)[ \t]*(?:[{re.escape(_CURRENCY)}][ \t]*)?(?P<sign2>[-+]?)(?P<body>{_PLAIN})(?:[eE](?P<exp>[-+]?\d+))?",
    re.ASCII,
)
_FRACTION = re.compile(rf"(?P<sign>[-+]?)(?P<num>{_PLAIN})[ \t]*/[ \t]*(?P<den>{_PLAIN})", re.ASCII)


def _unwrap(s: str) -> str:
    """Peel a trailing period, LaTeX/markup wrappers and surrounding whitespace (a few layers deep)."""
    for _ in range(MAX_WRAPPERS):
        s = s.strip()
        before = s
        if s.endswith(".") and not s.endswith(".."):
            s = s[:-1].rstrip()
        for left, right in _MATH_DELIMS:
            if len(s) > len(left) + len(right) and s.startswith(left) and s.endswith(right):
                s = s[len(left):-len(right)].strip()
        m = _WRAPPERS.match(s)
        if m:
            s = m.group(1)
        if s == before:
            break
    return s.strip()


def _plain(body: str) -> Fraction:
    body = body.replace(",", "")
    if body.endswith("."):
        body += "0"
    return Fraction(body)


@lru_cache(maxsize=65536)
def parse_number(text: str) -> Fraction | None:
    """The exact value of ``text`` if it is one number in a supported rendering, else ``None``."""
    if not isinstance(text, str) or len(text) > MAX_LENGTH:
        return None
    s = _unwrap(text.translate(_MINUS_SIGNS))
    s = _LATEX_NOISE.sub("", s).replace("\\$", "$").replace("\\%", "%")
    if s.endswith("%"):
        s = s[:-1].rstrip()
    m = _FRAC.match(s)
    if m:
        num, den = parse_number(m.group(2) or m.group(3)), parse_number(m.group(4) or m.group(5))
        if num is None or den is None or den == 0:
            return None
        value = num / den
        return -value if m.group(1) == "-" else value
    m = _FRACTION.fullmatch(s)
    if m:
        den = _plain(m.group("den"))
        if den == 0:
            return None
        value = _plain(m.group("num")) / den
        return -value if m.group("sign") == "-" else value
    m = _NUMBER.fullmatch(s)
    if not m or (m.group("sign") and m.group("sign2")):
        return None
    value = _plain(m.group("body"))
    if m.group("exp"):
        exp = int(m.group("exp"))
        if abs(exp) > MAX_EXPONENT:
            return None
        value *= Fraction(10) ** exp
    return -value if "-" in (m.group("sign"), m.group("sign2")) else value


def format_number(value: Fraction) -> str:
    """A canonical rendering: ``72``, ``-0.25``, or ``1/3`` when the decimal does not terminate."""
    if value.denominator == 1:
        return str(value.numerator)
    den = value.denominator
    for p in (2, 5):
        while den % p == 0:
            den //= p
    if den != 1:
        return f"{value.numerator}/{value.denominator}"
    digits = 0
    scaled = value
    while scaled.denominator != 1:
        scaled *= 10
        digits += 1
    sign = "-" if scaled < 0 else ""
    text = str(abs(scaled.numerator)).rjust(digits + 1, "0")
    return f"{sign}{text[:-digits]}.{text[-digits:]}"


_SPACES = re.compile(r"\s+")


def normalize_text(text: str, *, case_sensitive: bool = False) -> str:
    """A non-numeric answer for comparison: wrappers peeled, whitespace collapsed, case folded."""
    s = _SPACES.sub(" ", _unwrap(text)).strip()
    return s if case_sensitive else s.casefold()


def is_integer_literal(text: str, *, allow_negative: bool = False) -> bool:
    """Whether ``text`` is written as a bare integer (ASCII digits, optionally ``-``/``−`` when allowed)."""
    s = text.strip().translate(_MINUS_SIGNS)
    if allow_negative and s[:1] in "-+" and len(s) > 1:
        s = s[1:]
    return s.isascii() and s.isdigit()
