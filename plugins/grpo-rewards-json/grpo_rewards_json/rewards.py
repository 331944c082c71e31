"""The rewards: ``json_valid`` (the completion holds JSON of the expected kind) and ``json_schema``
(that JSON is valid against a JSON Schema given as a parameter or in a dataset column).

Both score ``value`` or ``wrong_value``; a completion whose JSON is too large or too deep to parse
(see :mod:`grpo_rewards_json.parse`) scores ``wrong_value``, never better than invalid JSON.
``json_schema`` scores ``None`` (the row does not count) when the row has no schema or its
schema is not a valid JSON Schema: that is the dataset's fault, not the policy's.

``json_schema`` checks ``"format"`` (``email``, ``date``, ``date-time``, ``uri``, ``ipv4``,
``uuid``, ...) with jsonschema's ``FormatChecker`` (``check_formats = true``, the default):
``{"format": "email"}`` rejects ``"not an email"``. Several formats need a library that the
``format-nongpl`` extra of jsonschema installs (a dependency of this package); jsonschema skips
a format it cannot check without a word, so a schema asking for one of :data:`CHECKABLE_FORMATS`
that the installed libraries cannot check is an error naming the format, not a silent pass.
A format no draft defines is an annotation, as the specification says, and is not checked.
``check_formats = false`` validates structure only (jsonschema's default).
"""

from __future__ import annotations

import json
import math
from collections import OrderedDict
from typing import Any

from grpo_rewards import completion_text
from grpo_rewards_json.parse import EXTRACT_METHODS, extract_json_text, parse_json

# the formats jsonschema checks when its format-nongpl extra is installed
CHECKABLE_FORMATS = frozenset({
    "color", "date", "date-time", "duration", "email", "hostname", "idn-email", "idn-hostname", "ipv4", "ipv6",
    "iri", "iri-reference", "json-pointer", "regex", "relative-json-pointer", "time", "uri", "uri-reference",
    "uri-template", "uuid",
})
TOP_LEVELS = {"object": (dict,), "array": (list,), "container": (dict, list), "any": (object,)}
_VALIDATORS = 256  # compiled schemas kept per reward instance


def _check(extract: str, top_level: str, max_chars: int, max_depth: int) -> None:
    if extract not in EXTRACT_METHODS:
        raise ValueError(f"extract must be one of {', '.join(EXTRACT_METHODS)}, got {extract!r}")
    if top_level not in TOP_LEVELS:
        raise ValueError(f"top_level must be one of {', '.join(TOP_LEVELS)}, got {top_level!r}")
    if max_chars < 1 or max_depth < 1:
        raise ValueError(f"max_chars and max_depth must be >= 1, got {max_chars} and {max_depth}")


class _JsonReward:
    """What both rewards share: extract, cap, parse and check the top-level kind."""

    def __init__(self, value: float, wrong_value: float, extract: str, top_level: str, max_chars: int,
                 max_depth: int) -> None:
        self.value, self.wrong_value, self.extract, self.top_level = value, wrong_value, extract, top_level
        self.max_chars, self.max_depth = max_chars, max_depth

    def parsed(self, completion: Any) -> tuple[bool, Any]:
        text = completion_text(completion)
        if len(text) > 4 * self.max_chars:  # before searching for fences
            return False, None
        found = extract_json_text(text, self.extract)
        if found is None:
            return False, None
        ok, value, _ = parse_json(found, max_chars=self.max_chars, max_depth=self.max_depth)
        return ok and isinstance(value, TOP_LEVELS[self.top_level]), value


class JsonValid(_JsonReward):
    """The ``json_valid`` reward (module docs); a module-level class, so it pickles."""

    __name__ = "json_valid"

    def __call__(self, completions: list[Any], **columns: Any) -> list[float | None]:
        return [self.value if self.parsed(c)[0] else self.wrong_value for c in completions]


def json_valid(*, value: float = 1.0, wrong_value: float = 0.0, extract: str = "auto", top_level: str = "object",
               max_chars: int = 100_000, max_depth: int = 32) -> JsonValid:
    """``value`` when the completion (or its last ```json fence) is JSON of kind ``top_level``, else ``wrong_value``."""
    _check(extract, top_level, max_chars, max_depth)
    return JsonValid(value, wrong_value, extract, top_level, max_chars, max_depth)


def _schema_of(cell: Any, max_chars: int) -> dict[str, Any] | bool | None:
    """A schema from a parameter or a dataset cell: a dict, ``true``/``false``, or JSON text of one."""
    if isinstance(cell, (dict, bool)):
        return cell
    if isinstance(cell, str) and cell.strip() and len(cell) <= max_chars:
        ok, value, _ = parse_json(cell, max_chars=max_chars, max_depth=64)
        return value if ok and isinstance(value, (dict, bool)) else None
    return None


def formats_used(schema: Any) -> set[str]:
    """Every ``"format"`` a schema (and its subschemas) asks for."""
    found: set[str] = set()
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if isinstance(node.get("format"), str):
                found.add(node["format"])
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return found


def unchecked_formats(schema: Any, checker: Any) -> list[str]:
    """The formats ``schema`` asks for that jsonschema checks only with a library that is not installed."""
    return sorted(f for f in formats_used(schema) & CHECKABLE_FORMATS if f not in checker.checkers)


def _missing_library(formats: list[str]) -> str:
    return (f"format {', '.join(map(repr, formats))} cannot be checked: its library is not installed "
            "(pip install 'jsonschema[format-nongpl]'), or set check_formats = false to validate structure only")


class JsonSchema(_JsonReward):
    """The ``json_schema`` reward (module docs)."""

    __name__ = "json_schema"

    def __init__(self, schema: dict[str, Any] | bool | None, schema_column: str, check_formats: bool = True,
                 **kw: Any) -> None:
        super().__init__(**kw)
        self.schema, self.schema_column, self.check_formats = schema, schema_column, check_formats
        self._validators: OrderedDict[str, Any] = OrderedDict()

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_validators"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _validators=OrderedDict())

    def _validator(self, schema: dict[str, Any] | bool) -> Any | None:
        key = json.dumps(schema, sort_keys=True)
        if key in self._validators:
            self._validators.move_to_end(key)
            return self._validators[key]
        import jsonschema  # here, not at import: with its format-nongpl extra it loads date and URI libraries

        cls = jsonschema.validators.validator_for(schema)
        try:
            cls.check_schema(schema)
            validator = cls(schema, format_checker=cls.FORMAT_CHECKER if self.check_formats else None)
        except (jsonschema.exceptions.SchemaError, RecursionError, ValueError, TypeError):
            validator = None
        if validator is not None and self.check_formats:
            missing = unchecked_formats(schema, cls.FORMAT_CHECKER)
            if missing:
                raise ValueError(_missing_library(missing))
        self._validators[key] = validator
        if len(self._validators) > _VALIDATORS:
            self._validators.popitem(last=False)
        return validator

    def __call__(self, completions: list[Any], **columns: Any) -> list[float | None]:
        cells = columns.get(self.schema_column) if self.schema is None else None
        if self.schema is None and cells is None:
            raise KeyError(f"column {self.schema_column!r} is missing and no schema parameter is set")
        if cells is not None and len(cells) != len(completions):
            raise ValueError(f"{len(completions)} completions but {len(cells)} values in {self.schema_column!r}")
        out: list[float | None] = []
        for i, completion in enumerate(completions):
            cell = self.schema if cells is None else cells[i]
            if isinstance(cell, float) and math.isnan(cell):  # a pandas gap
                cell = None
            schema = _schema_of(cell, self.max_chars)
            validator = None if schema is None else self._validator(schema)
            if validator is None:
                out.append(None)
                continue
            ok, value = self.parsed(completion)
            try:
                ok = ok and validator.is_valid(value)
            except RecursionError:  # a self-referencing schema that never bottoms out
                ok = False
            out.append(self.value if ok else self.wrong_value)
        return out


def json_schema(*, schema: dict | str | None = None, schema_column: str = "schema", value: float = 1.0,
                wrong_value: float = 0.0, extract: str = "auto", top_level: str = "any", max_chars: int = 100_000,
                max_depth: int = 32, check_formats: bool = True) -> JsonSchema:
    """``value`` when the completion's JSON is valid against the JSON Schema ``schema`` (a TOML table or JSON text)
    or, without it, the row's ``schema_column``; ``wrong_value`` otherwise; ``None`` for a row without a usable schema.

    ``check_formats`` (default true): ``"format"`` is checked (module docs); false: structure only."""
    _check(extract, top_level, max_chars, max_depth)
    parsed = None
    if schema is not None:
        parsed = _schema_of(schema, max_chars)
        if parsed is None:
            raise ValueError("schema must be a table or JSON text of a JSON Schema object")
        import jsonschema  # here, not at import (see above): registering the plugin stays light

        cls = jsonschema.validators.validator_for(parsed)
        try:
            cls.check_schema(parsed)
        except jsonschema.exceptions.SchemaError as exc:
            raise ValueError(f"schema is not a valid JSON Schema: {exc.message}") from None
        missing = unchecked_formats(parsed, cls.FORMAT_CHECKER) if check_formats else []
        if missing:
            raise ValueError(_missing_library(missing))
    return JsonSchema(parsed, schema_column, check_formats, value=value, wrong_value=wrong_value, extract=extract,
                      top_level=top_level, max_chars=max_chars, max_depth=max_depth)
