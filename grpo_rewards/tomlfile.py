"""TOML files with line numbers, for validators that report ``file:line: key: what is wrong``.

``tomllib`` parses but forgets positions; :func:`load_toml` also scans the text for
table headers and keys so each problem can be reported as ``file:line: key: what``.
Validators collect *every* problem before raising one :class:`ConfigError` (see
:mod:`grpo_rewards.errors`). A duplicate key, a BOM or a byte that is not UTF-8 is named as such.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grpo_rewards.errors import ConfigError, Problem
from grpo_rewards.files import read_text

__all__ = ["ConfigError", "Problem", "TomlDoc", "load_toml", "locate_keys", "parse_toml", "toml_value"]

_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(?:#.*)?$")
_KEY = re.compile(r"""^\s*((?:[A-Za-z0-9_\-]+|"[^"]*"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_\-]+|"[^"]*"|'[^']*'))*)\s*=""")


def _split_dotted(text: str) -> tuple[str, ...]:
    parts = re.findall(r"""[A-Za-z0-9_\-]+|"[^"]*"|'[^']*'""", text)
    return tuple(p[1:-1] if p[:1] in "\"'" else p for p in parts)


@dataclass
class TomlDoc:
    """A parsed TOML file: ``data`` plus the line of each key path."""

    path: str
    data: dict[str, Any]
    lines: dict[tuple[str, ...], int] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)

    def line_of(self, *key: str) -> int | None:
        """Line of ``key`` (a path like ``("rewards", "fmt", "weight")``), else of its nearest table."""
        for n in range(len(key), 0, -1):
            if key[:n] in self.lines:
                return self.lines[key[:n]]
        return None

    def problem(self, key: tuple[str, ...], message: str) -> None:
        self.problems.append(Problem(self.path, self.line_of(*key), ".".join(key), message))

    def raise_if_problems(self) -> None:
        if self.problems:
            raise ConfigError(self.problems)


def locate_keys(text: str) -> dict[tuple[str, ...], int]:
    """Map each table and key path in a TOML text to its 1-based line (multi-line values are skipped)."""
    lines: dict[tuple[str, ...], int] = {}
    table: tuple[str, ...] = ()
    in_multiline: str | None = None
    for number, raw in enumerate(text.splitlines(), start=1):
        if in_multiline:
            if in_multiline in raw:
                in_multiline = None
            continue
        header = _HEADER.match(raw)
        if header:
            table = _split_dotted(header.group(1))
            lines.setdefault(table, number)
            continue
        key = _KEY.match(raw)
        if key:
            path = table + _split_dotted(key.group(1))
            lines.setdefault(path, number)
            rest = raw[key.end():]
            for quote in ('"""', "'''"):
                if rest.count(quote) == 1:
                    in_multiline = quote
    return lines


def _syntax_problem(text: str, path: str, exc: tomllib.TOMLDecodeError) -> Problem:
    """tomllib's message, with the key named when a key or table is given twice."""
    match = re.search(r"line (\d+)", str(exc))
    line = int(match.group(1)) if match else None
    message = str(exc)
    if line and ("Cannot overwrite" in message or "Cannot declare" in message or "immutable namespace" in message):
        table: tuple[str, ...] = ()
        for raw in text.splitlines()[:line - 1]:
            if header := _HEADER.match(raw):
                table = _split_dotted(header.group(1))
        raw = text.splitlines()[line - 1]
        if header := _HEADER.match(raw):
            name = ".".join(_split_dotted(header.group(1)))
            return Problem(path, line, name, f"table [{name}] is declared twice (TOML allows each table once)")
        if key := _KEY.match(raw):
            name = ".".join(table + _split_dotted(key.group(1)))
            first = locate_keys(text).get(table + _split_dotted(key.group(1)))
            where = f" (first set on line {first})" if first and first != line else ""
            return Problem(path, line, name, f"duplicate key: {name} is already set{where}")
    return Problem(path, line, "", f"invalid TOML: {message}")


def parse_toml(text: str, path: str = "<string>") -> TomlDoc:
    """Parse ``text``; a syntax error becomes a :class:`ConfigError` with tomllib's line."""
    if text.startswith("\ufeff"):
        raise ConfigError([Problem(path, 1, "", "starts with a UTF-8 byte-order mark (BOM); save the file as "
                                                 "UTF-8 without BOM")])
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError([_syntax_problem(text, path, exc)]) from None
    return TomlDoc(path, data, locate_keys(text))


def load_toml(path: str | Path) -> TomlDoc:
    """Read and parse a TOML file: missing, binary, not UTF-8 or invalid -> one :class:`ConfigError` line."""
    text = read_text(path, ConfigError, bom_ok=False)
    return parse_toml(text, str(path))


def toml_value(value: Any) -> str:
    """``value`` (a bool, int, finite float, str, list or dict of those) as TOML text that parses back equal
    (``key = {toml_value(v)}``); a ``ValueError`` for anything TOML cannot hold."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"TOML has no finite form of {value!r}")
        return repr(value)
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"')
        return '"' + "".join(c if c >= " " and c != "\x7f" else f"\\u{ord(c):04x}" for c in escaped) + '"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{toml_value(str(k))} = {toml_value(v)}" for k, v in value.items()) + "}"
    raise ValueError(f"TOML cannot hold a {type(value).__name__} ({value!r})")
