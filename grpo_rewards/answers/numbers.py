"""The number grammar: the one place that decides what a number literal is and what it is worth.

Every reward that reads a number uses this module: :func:`parse_literal` /
:func:`parse_number` (one answer, whole text), :data:`NUMBER_IN_TEXT` (numbers inside
prose, for ``last_number`` extraction), :func:`numbers_equal` (the percent rule),
:func:`compared_values` (the percent rule for distances) and :func:`plain_decimal`
(tokens of program output, for the code rewards). A value is an exact :class:`fractions.Fraction`,
never a float, so ``4.0 == 4``, ``1,234 == 1234`` and ``3/4 == 0.75``.

A number literal is, after wrappers are peeled (``$...$``, ``\\(...\\)``, ``\\[...\\]``,
``\\boxed{}``, ``\\text{}``, ``\\mathrm{}``, ``\\textbf{}``; surrounding space; one
trailing sentence period):

* digits with thousands groups: ``1,234,567``, ``1 000 000`` (space, no-break or thin
  space), LaTeX ``1{,}234`` and ``1\\,234``; only well-formed groups of three after a
  leading group that does not start with 0 (``0,111`` is no thousands number)
* a decimal comma where it is unambiguous (:func:`decimal_points`), a comma before one, two, four or more
  digits: after thousands groups of dots or spaces (``1.234,5``, ``1 234,5``), in LaTeX ``3{,}5``, and, in a
  text with a decimal-comma context (an answer or result word of Spanish, French, German, Portuguese,
  Italian or Russian, or a grouped decimal comma elsewhere in it), after digits (``la respuesta es 3,5``:
  3.5). Without that context such a number (``3,5``, ``1,22``) is ambiguous, a decimal or a list, and is no
  number: never its ``3`` or its ``5``. A comma before exactly three digits is never a decimal comma: a
  thousands separator (``1,234``, ``1{,}234``, in every context) or, after a group that is none
  (``0,111``, ``1.234,567``), no number
* Indian digit grouping: ``1,23,456``, ``12,34,56,789`` (groups of two before the last three)
* a sign, including the unicode minus ``−`` and en dash ``–``; ``+5``
* currency: a symbol ``$``, ``\\$``, ``€``, ``£``, ``¥``, ``₹``, ``₩``, ``₽``, ``₺``, ``₦``, ``₱``, ``₫``
  before the number or after the sign, or right after the number (``12€``, ``1,000.99$``);
  an ISO code or ``Rs`` before or after it (``USD 12``, ``12 EUR``, ``Rs. 500``, ``INR 1,23,456``)
* decimals ``4.0``, ``.5``, ``5.``; exponents ``1.5e3`` (``|exponent| <= 400``) and scientific
  notation ``1.5 \\times 10^{3}``, ``1.5 \\cdot 10^3``, ``1.5×10^3``, ``1.5 x 10^-3``
* fractions ``3/4``, ``-3/4``, ``\\frac{3}{4}``, ``\\frac34``, ``\\dfrac``, ``\\tfrac``, ``-\\frac{3}{4}``;
  mixed numbers ``3\\frac{1}{2}``, ``3 \\frac12``, ``-2\\tfrac{1}{4}`` and ``3 1/2`` (a whole number, a
  space, and a proper fraction whose numerator has one or two digits: ``3 125/200`` stays ``3125/200``)
* a number in parentheses: ``(10)``, ``\\left( \\frac{1}{3} \\right)``
* a trailing percent sign ``50%`` / ``50\\%``
* an integer in English words (:mod:`grpo_rewards.answers.number_words`: ``twelve``, ``forty-two``,
  ``one hundred and five``), as a whole answer only: ``last_number`` reads digits only

Markdown emphasis around an answer is peeled like the LaTeX wrappers: ``**12**``, ``__12__``, ``*12*``.

Only ASCII digits count (``int()`` would also accept ``٣``). Integers of any length
parse (Python's 4,300-digit ``int(str)`` limit does not apply) up to :data:`MAX_LENGTH`
characters. Anything else is not a number literal: words and units (``72 apples``),
arithmetic (``17*23+5``, ``2^{10}``, ``10^{3}`` alone), algebra (``x + 1``), dates (``2023-05-01``),
times (``12:30``). The ambiguous separators keep one reading each: ``1,234`` is 1234 (a thousands
group, in every context), ``1.234`` is the decimal 1.234, ``1,22`` is no number (a decimal comma or a
list: a decimal only in a decimal-comma context).

A :class:`Number` remembers whether it was written with a decimal point or an exponent
(``decimal``): the precision rule of ``math_equivalence`` rounds only such numbers, as
math-verify rounds only floats.

The percent rule (:func:`numbers_equal`): ``p%`` equals a number ``r`` written without a
percent sign when ``p == r`` (GSM8K writes percentages as bare numbers: "what percent...?
#### 50") or ``p / 100 == r`` (the value: ``50% == 0.5``); two percentages are equal
when their numbers are. :func:`parse_number` returns the number as written (``50%`` is 50).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from grpo_rewards.answers.number_words import words_value
from grpo_rewards.answers.scanning import words

MAX_EXPONENT = 400
MAX_LENGTH = 20_000  # longer strings are not parsed as numbers (keeps junk cheap)
MAX_WRAPPERS = 6  # layers of $...$, \\boxed{...} and the like peeled off an answer
_INT_CHUNK = 4000  # int(str) refuses more than 4,300 digits: longer integers are built in chunks

MINUS_SIGNS = str.maketrans({"−": "-", "‒": "-", "–": "-", "﹣": "-", "－": "-", "＋": "+"})
_WRAPPERS = re.compile(r"^\\(?:boxed|fbox|text|textbf|textrm|mathrm|mathbf|mathit|boldsymbol|bm|displaystyle)\s*\{(.*)\}$",
                       re.DOTALL)
_VARIABLE = re.compile(r"^[A-Za-z](?:_\{?\w+\}?)?[ \t]*=[ \t]*(?=\S)(?!=)")  # "x = 12": the value of one variable
_ORDINAL = re.compile(r"(?<=\d)(?:st|nd|rd|th)$")
_SCALE = re.compile(r"[ \t\u00a0]*(thousand|million|billion|trillion)$", re.IGNORECASE)
SCALES = {"thousand": 10**3, "million": 10**6, "billion": 10**9, "trillion": 10**12}
_PERCENT_WORD = re.compile(r"[ \t\u00a0]*(?:per[ \t]?cent|percent)$", re.IGNORECASE)
_OVERLINE = re.compile(r"^([-+]?)(\d*)\.(\d*)\\(?:overline|bar)\{(\d+)\}$")
#: unicode vulgar fractions (``½``, ``3¾``)
VULGAR = {"½": "1/2", "⅓": "1/3", "⅔": "2/3", "¼": "1/4", "¾": "3/4", "⅕": "1/5", "⅖": "2/5", "⅗": "3/5",
          "⅘": "4/5", "⅙": "1/6", "⅚": "5/6", "⅛": "1/8", "⅜": "3/8", "⅝": "5/8", "⅞": "7/8"}
_VULGAR = re.compile(rf"^([-+]?)(\d*)[ \t]?([{''.join(VULGAR)}])$")
_MARKDOWN = re.compile(r"^(\*\*|__|\*)(?=\S)(.*?)(?<=\S)\1$", re.DOTALL)
_MATH_DELIMS = (("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"))
_FRAC = re.compile(r"^([-+]?)\\[dtc]?frac\s*(?:\{([^{}]*)\}|(\d))\s*(?:\{([^{}]*)\}|(\d))$")
_LATEX_NOISE = re.compile(r"\\[,;:! ]|\{,\}(?=\d{3}(?!\d))")  # "1{,}234": a thousands separator; "3{,}5": a comma
_THOUSANDS_SPACE = "[ \u00a0\u202f\u2009]"
CURRENCY = "$€£¥₹₩₽₺₦₱₫"
CURRENCY_CODES = ("USD", "EUR", "GBP", "JPY", "INR", "CNY", "RMB", "CAD", "AUD", "CHF", "HKD", "SGD", "NZD", "KRW",
                  "RUB", "BRL", "MXN", "ZAR", "Rs", "Rs.")
_CODE_BEFORE = re.compile(rf"^(?:{'|'.join(re.escape(c) for c in sorted(CURRENCY_CODES, key=len, reverse=True))})[ \t\u00a0]*(?=[-+−\d.])")
_CODE_AFTER = re.compile(rf"(?<=[\d.%])[ \t\u00a0]*(?:{'|'.join(re.escape(c) for c in CURRENCY_CODES if c[-1] != '.')})$")
_SYMBOL_AFTER = re.compile(rf"(?<=[\d.])[ \t]*(?:[{re.escape(CURRENCY)}]|\\\$)$")
_SCIENTIFIC = re.compile(r"^(?P<mantissa>[^\\×x]+?)\s*(?:\\times|\\cdot|×|·|x)\s*10\s*\^\s*(?:\{\s*(?P<e1>[-+−]?\d{1,3})\s*\}|(?P<e2>[-+−]?\d{1,3}))$")
_MIXED = re.compile(r"^(?P<sign>[-+]?)(?P<whole>\d+)\s*(?P<frac>\\[dtc]?frac.*)$", re.DOTALL)
_MIXED_SLASH = re.compile(r"^(?P<sign>[-+]?)(?P<whole>\d+)[ \t]+(?P<num>\d{1,2})[ \t]*/[ \t]*(?P<den>\d+)$")
_DECIMAL_MARK = re.compile(r"\d\.|\.\d|\d[eE][-+]?\d")
_PARENS = re.compile(r"^(?:\\left\s*\(|\()(.*?)(?:\\right\s*\)|\))$", re.DOTALL)
#: an unsigned decimal: thousands groups (comma or space), plain digits, fraction part
PLAIN = rf"(?:[1-9]\d{{0,2}}(?:,\d{{3}})+|[1-9]\d?(?:,\d\d)+,\d{{3}}|[1-9]\d{{0,2}}(?:{_THOUSANDS_SPACE}\d{{3}})+|\d+)(?:\.\d*)?|\.\d+"
_NUMBER = re.compile(
    rf"(?P<sign>[-+]?)[ \t]*(?:[{re.escape(CURRENCY)}][ \t]*)?(?P<sign2>[-+]?)(?P<body>{PLAIN})"
    rf"(?:[eE](?P<exp>[-+]?\d+))?",
    re.ASCII,
)
_FRACTION = re.compile(rf"(?P<sign>[-+]?)(?P<num>{PLAIN})[ \t]*/[ \t]*(?P<den>{PLAIN})", re.ASCII)

# the lookahead first: a position where no number can start fails on one character, before the lookbehinds
_IN_TEXT_HEAD = r"(?=[-+−\\$€£¥\d.½⅓⅔¼¾⅕⅖⅗⅘⅙⅚⅛⅜⅝⅞])(?<![\w.^_\\])(?<!\d[-–—:/])(?<!\d[-–—:] )(?<!\^\{)(?<!_\{)"
_IN_TEXT_TAIL = (
    r"|(?:[-+−])?\.\d+|(?:[-+−])?\d*[½⅓⅔¼¾⅕⅖⅗⅘⅙⅚⅛⅜⅝⅞])"
    r"(?:[ \t]?\\?%|(?:st|nd|rd|th)|[ \t](?:per[ \t]?cent|percent|thousand|million|billion|trillion)\b)?"
    r"(?![\w^_]|[-–—:/]\d|\.\d|,\d)"
)

#: A number literal inside prose (``last_number`` extraction): signed, with currency, thousands
#: groups, a decimal part, an exponent, ``/denominator``, ``\\frac{a}{b}`` and a trailing ``%``.
#: Not a number here: digits glued to a word or a decimal point (``x2``, ``v1.2``), a list marker
#: at the start of a line (``2. Next``), parts of dates, ranges, times and ratios
#: (``2023-05-01``, ``10-3``, ``12:30``), and bases or exponents of a power (``2^10``, ``x_1``).
#: The pattern that scans a text; :func:`widen` grows a match found by it into the whole literal
#: (Indian grouping, scientific notation, a mixed number), as :data:`NUMBER_AT` reads it.
NUMBER_IN_TEXT = re.compile(
    _IN_TEXT_HEAD + r"(?:"
    r"(?:[-+−][ \t]?)?\\[dtc]?frac(?:[ \t]?\{\d+\}[ \t]?\{\d+\}|\d\d(?!\d))"
    r"|(?:[-+−][ \t]?)?(?:\\?[$€£¥][ \t]?)?"
    r"(?:[1-9]\d{0,2}(?:,\d{3})+(?![\d])|[1-9]\d{0,2}(?:[ \u00a0\u202f\u2009]\d{3})+(?![\d])|\d+)(?:\.\d+)?"
    r"(?:[eE][-+]?\d+)?(?:/\d+(?:\.\d+)?)?" + _IN_TEXT_TAIL,
)
#: A number literal of prose read at a known position (anchored ``match``): :data:`NUMBER_IN_TEXT`'s forms,
#: Indian digit grouping (``1,23,456``), scientific notation (``1.5 \\times 10^{3}``) and mixed numbers
#: (``2\\frac{1}{4}``).
NUMBER_AT = re.compile(
    _IN_TEXT_HEAD + r"(?:"
    r"(?:[-+−][ \t]?)?\\[dtc]?frac(?:[ \t]?\{\d+\}[ \t]?\{\d+\}|\d\d(?!\d))"
    r"|(?:[-+−][ \t]?)?(?:\\?[$€£¥][ \t]?)?"
    r"(?:[1-9]\d{0,2}(?:,\d{3})+(?![\d])|[1-9]\d?(?:,\d\d)+,\d{3}(?![\d])|[1-9]\d{0,2}(?:[ \u00a0\u202f\u2009]\d{3})+(?![\d])|\d+)(?:\.\d+)?"
    r"(?:[eE][-+]?\d+)?(?:/\d+(?:\.\d+)?)?"
    r"(?:[ \t]?(?:\\times|\\cdot|×)[ \t]?10\^(?:\{[-+−]?\d{1,3}\}|[-+−]?\d{1,3})|[ \t]?\\[dtc]?frac\{\d+\}\{\d+\})?"
    + _IN_TEXT_TAIL,
)
_INDIAN_HEAD = re.compile(r"(?<![\d,])[1-9]\d?(?:,\d\d)*,\Z")
_FRAC_HEAD = re.compile(r"(?:[-+−][ \t]?)?(?:(?<![\w.])\d+[ \t]?)?\\[dtc]?frac\{(?:\d+\}\{)?\Z")


def widen(text: str, match: re.Match[str]) -> tuple[int, int]:
    """The span of the whole literal around a :data:`NUMBER_IN_TEXT` match: ``456`` of ``1,23,456`` grows to
    the Indian grouping, ``1.5`` of ``1.5 \\times 10^{3}`` to the scientific notation, ``2`` of
    ``2\\frac{1}{4}`` to the mixed number."""
    start, end = match.span()
    before = text[start - 1:start]
    if before in (",", "{"):
        head = (_INDIAN_HEAD if before == "," else _FRAC_HEAD).search(text, max(0, start - 40), start)
        if head:
            start = head.start()
    if start != match.start() or text[end:end + 1] in (" ", "\t", "\\", "×"):
        wide = NUMBER_AT.match(text, start)
        if wide and wide.end() >= end:
            return start, wide.end()
        return match.span()
    return start, end



@dataclass(frozen=True)
class Number:
    """A parsed literal: its ``value`` as written, whether it had a percent sign, and whether it was written
    with a decimal point or an exponent (``decimal``: what the precision rule may round)."""

    value: Fraction
    percent: bool = False
    decimal: bool = False


def unwrap(s: str) -> str:
    """Peel a trailing period, LaTeX/markup wrappers and surrounding whitespace (a few layers deep)."""
    for _ in range(MAX_WRAPPERS):
        s = s.strip()
        before = s
        if s.endswith(".") and not s.endswith(".."):
            s = s[:-1].rstrip()
        for left, right in _MATH_DELIMS:
            if len(s) > len(left) + len(right) and s.startswith(left) and s.endswith(right):
                s = s[len(left):-len(right)].strip()
        m = _WRAPPERS.match(s) or _MARKDOWN.match(s)
        if m:
            s = m.group(m.lastindex)
        if s == before:
            break
    return s.strip()


def _int(digits: str) -> int:
    """``int(digits)`` for any number of ASCII digits (no 4,300-digit limit)."""
    if len(digits) <= _INT_CHUNK:
        return int(digits)
    half = len(digits) // 2
    return _int(digits[:half]) * 10 ** (len(digits) - half) + _int(digits[half:])


def _plain(body: str) -> Fraction:
    body = body.replace(",", "").replace(" ", "").replace("\u00a0", "").replace("\u202f", "").replace("\u2009", "")
    whole, _, frac = body.partition(".")
    value = Fraction(_int(whole or "0"))
    if frac:
        value += Fraction(_int(frac), 10 ** len(frac))
    return value


@lru_cache(maxsize=65536)
def parse_literal(text: str) -> Number | None:
    """The :class:`Number` written in ``text`` if it is one number literal, else ``None``."""
    if not isinstance(text, str) or len(text) > MAX_LENGTH:
        return None
    s = _unwrap_percent(text)
    if s is None:
        return None
    s, percent = s
    value = _value(s)
    return None if value is None else Number(value, percent, _DECIMAL_MARK.search(s) is not None)


def _unwrap_percent(text: str) -> tuple[str, bool] | None:
    s = unwrap(text.translate(MINUS_SIGNS))
    s = _LATEX_NOISE.sub("", s).replace("\\$", "$").replace("\\%", "%")
    if "," in s:  # "3{,}5", "1.234,5": a decimal comma where it is unambiguous
        s = decimal_points(s.replace("{,}", "."), context=False)  # what _LATEX_NOISE left of "{,}" is a comma
    if "=" in s[:24]:
        variable = _VARIABLE.match(s)
        if variable:  # "x = 12"
            s = unwrap(s[variable.end():])
    percent = s.endswith("%")
    if percent:
        s = unwrap(s[:-1])
    elif s[-1:] in "tT" and s[-7:].lower() in ("percent", "per cent", "er cent"):
        word = _PERCENT_WORD.search(s)
        if word and word.start():  # "12 percent"
            s, percent = s[:word.start()], True
    return s, percent


def _value(s: str) -> Fraction | None:
    """The value of one number literal ``s`` (wrappers and percent sign already peeled)."""
    value = _plain_value(s)
    if value is not None or not s:
        return value
    if s[-1] in "dhnst" and s[-3:-2].isdigit():  # "3rd", "21st": an ordinal is its number
        ordinal = _ORDINAL.search(s)
        if ordinal and _ordinal_suffix(s[:ordinal.start()]) == s[ordinal.start():]:
            return _plain_value(s[:ordinal.start()])
    if s[-1] in "dnDN":  # "1.2 million"
        scale = _SCALE.search(s)
        if scale and scale.start():
            base = _plain_value(s[:scale.start()].rstrip())  # digits: "1.2 million" (words have their own scales)
            if base is not None:
                return base * SCALES[scale.group(1).lower()]
    if s[-1] == "}" and "\\" in s:  # "0.\overline{3}": a repeating decimal
        m = _OVERLINE.match(s)
        if m:
            sign, whole, head, period = m.groups()
            value = Fraction(int(whole or "0")) + Fraction(int(head or "0"), 10 ** len(head))
            value += Fraction(int(period), (10 ** len(period) - 1) * 10 ** len(head))
            return -value if sign == "-" else value
    if s[-1] in VULGAR:  # "½", "3¾"
        m = _VULGAR.match(s)
        if m:
            value = Fraction(int(m.group(2) or "0")) + Fraction(VULGAR[m.group(3)])
            return -value if m.group(1) == "-" else value
    if s[0] in "(\\":
        m = _PARENS.match(s)
        if m and m.group(1).strip():
            return _value(_unwrap_percent(m.group(1))[0])
    if s[-1] in "}0123456789" and "10" in s:
        m = _SCIENTIFIC.match(s)
        if m:
            mantissa = _plain_value(m.group("mantissa").strip())
            exp = int((m.group("e1") or m.group("e2")).replace("−", "-"))
            return None if mantissa is None else mantissa * Fraction(10) ** exp
    if s[0].isdigit() or s[0] in "-+":
        m = _MIXED.match(s)
        if m:
            frac = _FRAC.match(m.group("frac"))
            part = None if frac is None or frac.group(1) else _value(m.group("frac"))
            if part is None or not 0 < part < 1:
                return None
            value = _int(m.group("whole")) + part
            return -value if m.group("sign") == "-" else value
        m = _MIXED_SLASH.match(s)
        if m:
            num, den = int(m.group("num")), int(m.group("den"))
            if not 0 < num < den:
                return None
            value = _int(m.group("whole")) + Fraction(num, den)
            return -value if m.group("sign") == "-" else value
    stripped = _CODE_BEFORE.sub("", s, count=1)
    if stripped[-1:].isalpha():
        stripped = _CODE_AFTER.sub("", stripped, count=1)
    elif stripped[-1:] in CURRENCY:
        stripped = _SYMBOL_AFTER.sub("", stripped, count=1)
    if stripped != s and stripped:
        return _plain_value(stripped)
    if s[0].isalpha():
        words = words_value(s)
        return None if words is None else Fraction(words)
    return None


def _ordinal_suffix(digits: str) -> str:
    """The English ordinal suffix of a whole number written in ``digits`` (``1`` ``st``, ``12`` ``th``)."""
    if not digits.isdigit():
        return ""
    n = int(digits[-2:])
    return "th" if 10 < n % 100 < 14 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")


def _plain_value(s: str) -> Fraction | None:
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


def parse_number(text: str) -> Fraction | None:
    """The exact value of ``text`` if it is one number literal (``50%`` is 50), else ``None``."""
    number = parse_literal(text)
    return None if number is None else number.value


def numbers_equal(a: Number, b: Number) -> bool:
    """Equality under the percent rule (module docs): ``50%`` equals ``50`` and ``0.5``, not ``5000%``."""
    if a.percent == b.percent:
        return a.value == b.value
    x, y = compared_values(a, b)
    return x == y


def compared_values(a: Number, b: Number) -> tuple[Fraction, Fraction]:
    """The values of ``a`` and ``b`` as the percent rule compares them (for distances between numbers).

    A percentage facing a number written without a percent sign is read as written
    (``p``) or as its value (``p / 100``), whichever is nearer the other number; two
    percentages, or two plain numbers, are read as written. :func:`numbers_equal` is
    ``x == y`` of these values.
    """
    if a.percent == b.percent:
        return a.value, b.value
    if a.percent:
        return _nearer(a.value, b.value), b.value
    return a.value, _nearer(b.value, a.value)


def _nearer(percent: Fraction, other: Fraction) -> Fraction:
    as_value = percent / 100
    return percent if abs(percent - other) <= abs(as_value - other) else as_value


#: one comma between digits, not inside a longer list or number (``3,5``, ``1,22``, ``1,234``)
_ONE_COMMA = re.compile(r"\d(?<![\d.,]\d)\d*,\d+(?!\d|[.,]\d)", re.ASCII)
_THOUSANDS = re.compile(r"[-+]?[1-9]\d{0,2},\d{3}", re.ASCII)
#: :data:`_ONE_COMMA` with other than three digits after the comma: the ones a decimal-comma context reads as decimals
#: (three digits stay: "1,234" is thousands, "0,111" undecided), split around the comma for a template substitution
_DECIMAL_COMMA = re.compile(r"(\d(?<![\d.,]\d)\d*),(\d{1,2}|\d{4,})(?!\d|[.,]\d)", re.ASCII)
#: thousands groups of dots or spaces, then a decimal comma (``1.234,5``, ``1 234,5``): a decimal comma in any text
_GROUPED_COMMA = re.compile(r"\d(?<![\d.,]\d)\d{0,2}(?:(?:\.\d{3})+|(?:[ \u00a0\u202f\u2009]\d{3})+),\d+(?!\d|[.,]\d)",
                            re.ASCII)
#: the words that give a text a decimal-comma context: answer and result in languages written with one
_COMMA_LANGUAGE = re.compile(words([
    "respuesta", "resultado", r"r[ée]ponse", r"r[ée]sultat", "antwort", "ergebnis", "resposta", "risposta",
    "risultato", "ответ", "результат", "итог"]))
#: a comma that may be a decimal comma: before one, two, four or more digits (never before a group of three)
_DECIDABLE_COMMA = re.compile(r",(?!\d{3}(?!\d))\d", re.ASCII)


def ambiguous_comma(literal: str) -> bool:
    """Whether ``literal`` is a number written with one comma that is no thousands group (``3,5``, ``1,22``,
    ``0,111``): a decimal comma or a list, which only a decimal-comma context decides."""
    return _ONE_COMMA.fullmatch(literal.lstrip("-+−")) is not None and _THOUSANDS.fullmatch(literal) is None


def ambiguous_comma_around(text: str, start: int, end: int) -> re.Match[str] | None:
    """The number written with an ambiguous comma (:func:`ambiguous_comma`) that the digits ``text[start:end]``
    open or close (``3`` or ``5`` of ``3,5``), or ``None``."""
    if text[end:end + 1] != "," and text[start - 1:start] != ",":
        return None
    for found in _ONE_COMMA.finditer(text, max(0, start - 40), min(len(text), end + 40)):
        if found.start() <= start and end <= found.end() and ambiguous_comma(found.group()):
            return found
    return None


def decimal_points(text: str, *, context: bool | None = None) -> str:
    """``text`` with each unambiguous decimal comma written as a point (module docs): after thousands groups of
    dots or spaces always; one comma that is no thousands group (``3,5``) when the text has a decimal-comma
    context (``context=None``: decided from ``text``; ``False``: none; ``True``: given)."""
    if "," not in text or _DECIDABLE_COMMA.search(text) is None:
        return text  # "1,234": every comma is before a group of three
    grouped = _GROUPED_COMMA.search(text) is not None
    if grouped:
        text = _GROUPED_COMMA.sub(_grouped_point, text)
    if context is False or not any(ambiguous_comma(m.group()) for m in _ONE_COMMA.finditer(text)):
        return text  # no comma left that a context would decide ("1,234" is thousands in any text)
    if context is None:
        context = grouped or _COMMA_LANGUAGE.search(text) is not None
    return _DECIMAL_COMMA.sub(_point, text) if context else text


def _point(found: re.Match[str]) -> str:  # a function: Python 3.11 expands a template ("\1.\2") in Python per match
    return found[1] + "." + found[2]


def _grouped_point(found: re.Match[str]) -> str:
    whole, _, decimals = found.group().rpartition(",")
    if len(decimals) == 3:  # "1.234,567": a group of three after the comma, no number
        return found.group()
    return re.sub(r"[. \u00a0\u202f\u2009]", "", whole) + "." + decimals


def is_list_marker(text: str, match: re.Match[str]) -> bool:
    """Whether a :data:`NUMBER_IN_TEXT` match is a list marker: ``2.`` or ``2)`` opening a line."""
    start, end = match.span()
    if text[end:end + 1] not in (".", ")") or text[end + 1:end + 2] not in (" ", "\t"):
        return False
    line_start = text.rfind("\n", 0, start) + 1
    return not text[line_start:start].strip(" \t")


def int_text(n: int) -> str:
    """``str(n)`` for an integer of any size (no 4,300-digit limit)."""
    if n.bit_length() < 14_000:
        return str(n)
    if n < 0:
        return "-" + int_text(-n)
    k = int(n.bit_length() * 0.30103) // 2  # about half the decimal digits
    high, low = divmod(n, 10**k)
    return int_text(high) + int_text(low).rjust(k, "0")


def format_number(value: Fraction) -> str:
    """A canonical rendering: ``72``, ``-0.25``, or ``1/3`` when the decimal does not terminate."""
    if value.denominator == 1:
        return int_text(value.numerator)
    den = value.denominator
    for p in (2, 5):
        while den % p == 0:
            den //= p
    if den != 1:
        return f"{int_text(value.numerator)}/{int_text(value.denominator)}"
    digits = 0
    scaled = value
    while scaled.denominator != 1:
        scaled *= 10
        digits += 1
    sign = "-" if scaled < 0 else ""
    text = int_text(abs(scaled.numerator)).rjust(digits + 1, "0")
    return f"{sign}{text[:-digits]}.{text[-digits:]}"


def is_integer_literal(text: str, *, allow_negative: bool = False) -> bool:
    """Whether ``text`` is written as a bare integer (ASCII digits, optionally ``-``/``−`` when allowed)."""
    s = text.strip().translate(MINUS_SIGNS)
    if allow_negative and s[:1] in "-+" and len(s) > 1:
        s = s[1:]
    return s.isascii() and s.isdigit()


#: a plain decimal token of program output (``-1.5``, ``2e-3``): what ``float_tolerance`` may compare
PLAIN_DECIMAL = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def plain_decimal(token: str) -> float | None:
    """The float value of a plain decimal token of program output, else ``None``."""
    return float(token) if PLAIN_DECIMAL.fullmatch(token) else None
