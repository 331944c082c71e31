"""Units of measure in a reference and an answer: the rule ``math_equivalence`` applies before comparing values.

:func:`split_unit` separates a quantity into its value and its unit (``12 m``, ``3 hours``,
``5\\text{ cm}^3``, ``60 km/h``, ``5 cm²``); :func:`compare_units` says what the units allow:

* a reference with no unit: nothing to check (the answer's unit, if any, is read as before);
* a reference with a unit: the answer must carry a unit of the same kind. The same unit
  (spelling aside: ``m``, ``meter``, ``metres``; ``h``, ``hr``, ``hours``) compares the
  values as they are; another unit of the same dimension (``0.5 km`` for ``500 m``,
  ``90 min`` for ``1.5 h``) converts the answer's value by the factor of :data:`UNITS`;
  a unit of another dimension (``12 km`` for ``12 s``, ``cm^2`` for ``cm^3``) or a bare
  number is wrong. A unit this table does not know (``\\text{apples}``) must be written
  the same (plural ``s`` aside).

The table holds the units of school and competition mathematics: lengths, areas and volumes
(powers of lengths, litres), times, masses and speeds. Temperatures (an offset, not a factor),
currencies (the number grammar reads ``$12``) and angles (math-verify reads ``^\\circ``) are
not units here.
"""

from __future__ import annotations

import re
from fractions import Fraction
from functools import lru_cache

_F = Fraction
# name -> (dimension exponents (length, time, mass), factor to SI)
_BASE: dict[str, tuple[tuple[int, int, int], Fraction]] = {}


def _add(names: str, dim: tuple[int, int, int], factor: Fraction) -> None:
    for name in names.split():
        _BASE[name] = (dim, factor)


_add("mm millimeter millimeters millimetre millimetres", (1, 0, 0), _F(1, 1000))
_add("cm centimeter centimeters centimetre centimetres", (1, 0, 0), _F(1, 100))
_add("dm decimeter decimeters decimetre decimetres", (1, 0, 0), _F(1, 10))
_add("m meter meters metre metres", (1, 0, 0), _F(1))
_add("km kilometer kilometers kilometre kilometres", (1, 0, 0), _F(1000))
_add("in inch inches", (1, 0, 0), _F(254, 10000))
_add("ft foot feet", (1, 0, 0), _F(3048, 10000))
_add("yd yard yards", (1, 0, 0), _F(9144, 10000))
_add("mi mile miles", (1, 0, 0), _F(1609344, 1000))
_add("ms millisecond milliseconds", (0, 1, 0), _F(1, 1000))
_add("s sec secs second seconds", (0, 1, 0), _F(1))
_add("min mins minute minutes", (0, 1, 0), _F(60))
_add("h hr hrs hour hours", (0, 1, 0), _F(3600))
_add("day days", (0, 1, 0), _F(86400))
_add("week weeks wk wks", (0, 1, 0), _F(604800))
_add("mg milligram milligrams", (0, 0, 1), _F(1, 10**6))
_add("g gram grams gramme grammes", (0, 0, 1), _F(1, 1000))
_add("kg kilogram kilograms kilo kilos", (0, 0, 1), _F(1))
_add("t tonne tonnes", (0, 0, 1), _F(1000))
_add("lb lbs pound pounds", (0, 0, 1), _F(45359237, 10**8))
_add("oz ounce ounces", (0, 0, 1), _F(45359237, 16 * 10**8))
_add("ml mL milliliter milliliters millilitre millilitres", (3, 0, 0), _F(1, 10**6))
_add("l L liter liters litre litres", (3, 0, 0), _F(1, 1000))
_add("mph", (1, -1, 0), _F(1609344, 3600 * 1000))
_add("kph kmh", (1, -1, 0), _F(1000, 3600))
UNITS = _BASE

_POWER_WORDS = {"square": 2, "sq": 2, "cubic": 3, "cu": 3}
_TEXT = re.compile(r"\\(?:text|mathrm|mbox|rm|textrm|operatorname)\s*\{([^{}]*)\}")
_SUPER = {"²": "^2", "³": "^3"}
_UNIT_TAIL = re.compile(
    r"(?P<unit>(?:(?:square|sq|cubic|cu)\.?\s+)?[A-Za-z]+\.?(?:\s*\^\s*\{?\s*[23]\s*\}?)?"
    r"(?:\s*(?:/|\bper\b)\s*[A-Za-z]+(?:\s*\^\s*\{?\s*[23]\s*\}?)?)?)\s*\.?\Z")
_VALUE_END = re.compile(r"[\d}).]\s*\Z")


def _normal(text: str) -> str:
    text = _TEXT.sub(lambda m: " " + m.group(1) + " ", text)
    for sup, plain in _SUPER.items():
        text = text.replace(sup, plain)
    return text.replace("\\,", " ").replace("\\ ", " ").replace("\\;", " ").replace("~", " ").strip()


_HAS_LETTER = re.compile(r"[A-Za-z²³]")


@lru_cache(maxsize=65536)  # a batch repeats each reference num_generations times
def split_unit(text: str) -> tuple[str, str] | None:
    """``(value, unit)`` when ``text`` is a value followed by a unit (``"12 km"`` -> ``("12", "km")``), else
    ``None``. A bare word after a number counts as a unit only when :data:`UNITS` knows it or when it was
    written in ``\\text{}``."""
    if len(text) > 200 or _HAS_LETTER.search(text) is None:
        return None
    had_text = _TEXT.search(text) is not None
    plain = _normal(text.strip().strip("$").strip())
    found = _UNIT_TAIL.search(plain)
    if not found or found.start() == 0:
        return None
    value = plain[:found.start()].strip()
    if not value or not _VALUE_END.search(value) or value.endswith("\\"):
        return None
    unit = re.sub(r"\s*\^\s*\{?\s*(\d)\s*\}?", r"^\1", found.group("unit").strip().rstrip("."))
    if _factor(unit) is None and not had_text:
        return None
    return value, unit


def _one(name: str) -> tuple[tuple[int, int, int], Fraction] | None:
    name = name.strip().rstrip(".")
    power = 1
    m = re.fullmatch(r"(?:(square|sq|cubic|cu)\.?\s+)?([A-Za-z]+)(?:\s*\^\s*\{?\s*([23])\s*\}?)?", name)
    if not m:
        return None
    if m.group(1):
        power = _POWER_WORDS[m.group(1)]
    if m.group(3):
        power = int(m.group(3))
    base = _BASE.get(m.group(2)) or _BASE.get(m.group(2).lower())
    if base is None:
        return None
    dim, factor = base
    return (dim[0] * power, dim[1] * power, dim[2] * power), factor ** power


def _factor(unit: str) -> tuple[tuple[int, int, int], Fraction] | None:
    """The dimension and SI factor of ``unit`` (``km``, ``cm^3``, ``km/h``, ``square feet``), else ``None``."""
    parts = re.split(r"\s*(?:/|\bper\b)\s*", unit)
    if len(parts) > 2:
        return None
    top = _one(parts[0])
    if top is None:
        return None
    if len(parts) == 1:
        return top
    bottom = _one(parts[1])
    if bottom is None:
        return None
    return tuple(a - b for a, b in zip(top[0], bottom[0], strict=True)), top[1] / bottom[1]


def _spelling(unit: str) -> str:
    word = re.sub(r"\s+", " ", unit.strip().lower())
    return word[:-1] if word.endswith("s") and len(word) > 2 else word


def compare_units(gold_unit: str, answer_unit: str | None) -> Fraction | str:
    """The factor that turns the answer's value into the reference's unit, or why the units disagree (a string).

    ``answer_unit`` is ``None`` when the answer carries no unit.
    """
    if answer_unit is None:
        return f"the reference is in {gold_unit} and the answer has no unit"
    gold, answer = _factor(gold_unit), _factor(answer_unit)
    if gold is None or answer is None:
        if gold is None and answer is None and _spelling(gold_unit) == _spelling(answer_unit):
            return Fraction(1)
        return f"the answer is in {answer_unit}, the reference in {gold_unit}"
    if gold[0] != answer[0]:
        return f"the answer is in {answer_unit}, not a unit of the reference's kind ({gold_unit})"
    return answer[1] / gold[1]
