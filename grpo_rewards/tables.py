"""Tables and help text for a terminal of any width: nothing a user reads or types is cut.

* :func:`doc_text`: a docstring's reStructuredText inline markup as the command line writes code:
  ````x````, ``:func:`x```` and ``:class:`~a.b.X``` become ```x``` / ```X```.
* :func:`print_table`: every cell is plain text (rich markup in it is never parsed: ``[min_words,
  max_words]`` stays), and no word is ever cut or ellipsised: each column is at least as wide as its
  longest word, key columns (the names a user types) are never wrapped. When the terminal is too narrow
  for that, a table with fewer lines is tried, then each row is printed as a block instead: its key cells
  on one line, the rest indented below, wrapped between words.

The width is rich's: the terminal's, or ``COLUMNS`` when set (80 when the output is not a terminal).
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

_ROLE = re.compile(r":[a-z]+(?::[a-z]+)?:`~?([^`]+)`")  # :func:`x`, :class:`~a.b.X`, :py:meth:`x`
_LITERAL = re.compile(r"(?<!`)``(?!`)(.+?)(?<!`)``(?!`)")  # ``x``, not a ```fence


def doc_text(text: str) -> str:
    """``text`` with RST inline literals and roles written as ```x``` (a role's ``~a.b.X`` as ```X```)."""
    def role(m: re.Match[str]) -> str:
        target = m.group(1)
        return f"`{target.rsplit('.', 1)[-1] if m.group(0).count('~') else target}`"

    return _LITERAL.sub(lambda m: f"`{m.group(1)}`", _ROLE.sub(role, text))


@dataclass(frozen=True)
class Column:
    """A table column: ``key`` columns (names to type) are never wrapped; ``label`` says whether the block
    layout writes ``header: value`` or the value alone (a description)."""

    header: str
    key: bool = False
    justify: str = "left"
    label: bool = True


NBSP = "\u00a0"  # textwrap does not break at it
SHORT = 16  # a field's value up to this long stays on the line of its header


def _longest_word(text: str) -> int:
    return max((len(w) for w in text.split()), default=0)


def min_widths(columns: Sequence[Column], rows: Sequence[Sequence[Any]]) -> list[int]:
    """The narrowest each column can be without cutting a word (or wrapping a key cell)."""
    widths = []
    for i, col in enumerate(columns):
        cells = [str(r[i]) for r in rows] + [col.header]
        if col.key:
            widths.append(max(max((len(line) for line in c.splitlines()), default=0) for c in cells))
        else:
            widths.append(max(_longest_word(c) for c in cells))
    return widths


def _styles() -> list[tuple[dict[str, Any], Callable[[int], int]]]:
    """Table styles, roomiest first, with the characters each takes beside the cells of ``n`` columns."""
    from rich import box

    return [({}, lambda n: 3 * n + 1),  # "│ cell " per column and a closing "│"
            ({"box": box.SIMPLE_HEAD, "show_edge": False, "pad_edge": False}, lambda n: 3 * n - 3)]


def fits(columns: Sequence[Column], rows: Sequence[Sequence[Any]], width: int) -> dict[str, Any] | None:
    """The roomiest table style in which ``rows`` fit ``width`` characters without cutting a word, or None."""
    least = sum(min_widths(columns, rows))
    return next((style for style, overhead in _styles() if least + overhead(len(columns)) <= width), None)


def print_table(console: Any, title: str, columns: Sequence[Column], rows: Sequence[Sequence[Any]]) -> None:
    """Print ``rows`` (cells: text, or a rich ``Text`` for a style) on ``console`` (module docs)."""
    from rich.table import Table
    from rich.text import Text

    style = fits(columns, rows, console.width)
    if style is None:
        _print_blocks(console, title, columns, rows)
        return
    table = Table(title=Text(title), **style)
    for col, least in zip(columns, min_widths(columns, rows), strict=True):
        table.add_column(Text(col.header), justify=col.justify, no_wrap=col.key, min_width=least, overflow="fold")
    for row in rows:
        table.add_row(*(c if isinstance(c, Text) else Text(str(c)) for c in row))
    console.print(table)


def _field(header: str, value: str) -> str:
    """``header: value``, kept on one line when the value is short (a number), else wrapped after the header."""
    short = len(value) <= SHORT
    return f"{header}: {value}".replace(" ", NBSP) if short else f"{header}:{NBSP}{value}".replace(" ", NBSP, header.count(" "))


def _print_blocks(console: Any, title: str, columns: Sequence[Column], rows: Sequence[Sequence[Any]]) -> None:
    from rich.text import Text

    width = max(console.width, 20)
    console.print(Text(title))
    for row in rows:
        keys = [str(c) for c, col in zip(row, columns, strict=True) if col.key and str(c)]
        console.print(Text("  ".join(keys)), overflow="ignore", crop=False, soft_wrap=True)
        rest = [(col, c) for c, col in zip(row, columns, strict=True) if not col.key and str(c)]
        fields = [_field(col.header, str(c)) for col, c in rest if col.label]
        texts = [str(c) for col, c in rest if not col.label]
        for part in ["  ".join(fields), *texts] if fields else texts:
            style = next((c.style for _, c in rest if isinstance(c, Text) and str(c) == part), "")
            for line in textwrap.wrap(part, width=width, initial_indent="    ", subsequent_indent="    ",
                                      break_long_words=False, break_on_hyphens=False):
                console.print(Text(line.replace(NBSP, " "), style=style), overflow="ignore", crop=False,
                              soft_wrap=True)
