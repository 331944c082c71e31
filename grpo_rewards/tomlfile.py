"""TOML files with line numbers, and the config-error type every validator reports with.

``tomllib`` parses but forgets positions; :func:`load_toml` also scans the text for
table headers and keys so each problem can be reported as ``file:line: key: what``.
Validators collect *every* problem before raising one :class:`ConfigError`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomllib

_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(?:#.*)?$")
_KEY = re.compile(r"""^\s*((?:[A-Za-z0-9_\-]+|"[^"]*"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_\-]+|"[^"]*"|'[^']*'))*)\s*=""")


def _split_dotted(text: str) -> tuple[str, ...]:
    parts = re.findall(r"""[A-Za-z0-9_\-]+|"[^"]*"|'[^']*'""", text)
    return tuple(p[1:-1] if p[:1] in "\"'" else p for p in parts)


@dataclass(frozen=True)
class Problem:
    file: str
    line: int | None
    key: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.key}: {self.message}" if self.key else f"{where}: {self.message}"


class ConfigError(Exception):
    """One or more problems in a config file; ``str()`` gives one line per problem."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


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


def parse_toml(text: str, path: str = "<string>") -> TomlDoc:
    """Parse ``text``; a syntax error becomes a :class:`ConfigError` with tomllib's line."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = re.search(r"line (\d+)", str(exc))
        raise ConfigError([Problem(path, int(match.group(1)) if match else None, "", f"invalid TOML: {exc}")]) from None
    return TomlDoc(path, data, locate_keys(text))


def load_toml(path: str | Path) -> TomlDoc:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError([Problem(str(path), None, "", f"cannot read: {exc.strerror or exc}")]) from None
    return parse_toml(text, str(path))
