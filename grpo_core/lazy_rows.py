"""Rows read on demand: a large data file is never held as Python objects, only an index of where each row is.

* :class:`Rows` is a read-only sequence of dict rows (``len``, ``rows[i]``, iteration, slices that stay lazy),
  over a *source* that fetches row ``i``: a local JSON-lines file (:func:`index_json_lines`: the byte offset of
  each line, 8 bytes a row), a local CSV file (:func:`index_csv`: the byte offset of each record) or a
  ``datasets.Dataset`` (:class:`ArrowSource`: a memory-mapped Arrow table, as ``datasets`` caches it on disk).
  ``rows.mapped(fn)`` applies a per-row function (the ``[data] columns`` renames) when a row is fetched.
* Indexing a file is one streaming pass of constant memory that reports every bad line at once as
  ``file:line: what`` (:class:`grpo_core.data.DataError`): invalid JSON, not an object, not UTF-8, a CSV record
  whose fields do not match the header.
* :func:`split_ranges`: the rows a split like ``train[:1000]`` or ``train[10%:]+train[:5]`` names in a local file
  (which has the one split ``train``), parsed by ``datasets``' own ``ReadInstruction``.
"""

from __future__ import annotations

import csv
import json
import os
from array import array
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol

from grpo_rewards.errors import Problem, UserError
from grpo_rewards.files import BOM, json_value

if TYPE_CHECKING:
    import numpy as np

MAX_LISTED = 20  # bad rows listed one per line; the rest are counted


def raise_all(problems: list[Problem], error: type[UserError]) -> None:
    """Raise ``error`` with every problem, the first ``MAX_LISTED`` listed and the rest counted."""
    if len(problems) > MAX_LISTED:
        more = len(problems) - MAX_LISTED
        problems = [*problems[:MAX_LISTED], Problem(problems[0].file, None, "", f"... and {more} more bad rows")]
    if problems:
        raise error(problems)


def kind_of(value: Any) -> str:
    """How a JSON value is named in an error (``an array``, ``a string``, ``null``...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return {list: "an array", dict: "an object", str: "a string"}.get(type(value), f"a number ({value!r})")


class Source(Protocol):
    """Where rows come from: a length and row ``i`` (``line(i)``: its line in a file, or None)."""

    def __len__(self) -> int: ...
    def get(self, i: int) -> Any: ...
    def line(self, i: int) -> int | None: ...


class _File:
    """One read handle per process (reopened in a forked child)."""

    def __init__(self, path: Path) -> None:
        self.path, self._fh, self._pid = path, None, 0

    def at(self, offset: int) -> BinaryIO:
        if self._fh is None or self._pid != os.getpid():
            self._fh, self._pid = open(self.path, "rb"), os.getpid()  # noqa: SIM115 (kept open for the next rows)
        self._fh.seek(offset)
        return self._fh

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["path"])


class JsonLinesSource:
    """Rows of a JSON-lines file: ``json.loads`` of the line at each recorded offset."""

    def __init__(self, path: Path, offsets: np.ndarray, lines: np.ndarray) -> None:
        self.path, self.offsets, self.lines, self._file = path, offsets, lines, _File(path)

    def __len__(self) -> int:
        return len(self.offsets)

    def get(self, i: int) -> Any:
        return json.loads(self._file.at(int(self.offsets[i])).readline())

    def line(self, i: int) -> int | None:
        return int(self.lines[i])


def _decoded(raw: bytes, path: Path, number: int, error: type[UserError]) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at column {exc.start + 1}); save the file as "
                    "UTF-8", file=str(path), line=number) from None


Visit = Callable[[Any, int], None]


def index_json_lines(path: Path, error: type[UserError], visit: Visit | None = None) -> JsonLinesSource:
    """Index a JSON-lines file in one pass of constant memory (each line parsed once, then dropped); every
    invalid line, and every line that is not a JSON object, is reported at once. ``visit(row, line)``: called
    with each object row (the caller's own checks, in the same pass)."""
    offsets, lines, problems = array("q"), array("i"), []
    with open(path, "rb") as fh:
        if b"\x00" in fh.read(65536):
            raise error("a binary file, not text", file=str(path))
        fh.seek(0)
        offset = 0
        for number, raw in enumerate(fh, start=1):
            start, offset = offset, offset + len(raw)
            if number == 1 and raw.startswith(BOM):
                start, raw = start + len(BOM), raw[len(BOM):]
            if not raw.strip():
                continue
            row, why_not = json_value(_decoded(raw, path, number, error))
            if why_not:
                problems.append(Problem(str(path), number, "", why_not))
                continue
            if not isinstance(row, dict):
                problems.append(Problem(str(path), number, "", f"expected a JSON object, got {kind_of(row)}"))
            elif visit is not None and not problems:
                visit(row, number)
            offsets.append(start)
            lines.append(number)
    raise_all(problems, error)
    import numpy as np  # numpy (and ctypes) load when a file is indexed, not when the CLI registers
    return JsonLinesSource(path, np.frombuffer(offsets, dtype=np.int64), np.frombuffer(lines, dtype=lines.typecode))


def _text_lines(fh: BinaryIO, path: Path, error: type[UserError], consumed: list[int], first: int) -> Iterator[str]:
    """Decoded lines of ``fh`` for ``csv.reader``; ``consumed[0]`` counts the bytes read (the records' offsets)."""
    number = first
    for raw in fh:
        consumed[0] += len(raw)
        yield _decoded(raw, path, number, error)
        number += 1


class CsvSource:
    """Rows of a CSV file: the record at each recorded offset, as ``csv.DictReader`` would give it."""

    def __init__(self, path: Path, header: list[str], offsets: np.ndarray, lines: np.ndarray) -> None:
        self.path, self.header, self.offsets, self.lines, self._file = path, header, offsets, lines, _File(path)

    def __len__(self) -> int:
        return len(self.offsets)

    def get(self, i: int) -> dict[str, Any]:
        fh = self._file.at(int(self.offsets[i]))
        values = next(csv.reader(_text_lines(fh, self.path, UserError, [0], int(self.lines[i]))))
        return dict(zip(self.header, values, strict=False))

    def line(self, i: int) -> int | None:
        return int(self.lines[i])


def index_csv(path: Path, error: type[UserError], visit: Visit | None = None) -> CsvSource:
    """Index a CSV file in one pass of constant memory; every record whose field count differs from the header's
    is reported at once, and a header naming a column twice. ``visit(row, line)``: called with each row."""
    offsets, lines, problems = array("q"), array("i"), []
    with open(path, "rb") as fh:
        head = fh.read(len(BOM))
        if head != BOM:
            fh.seek(0)
        if b"\x00" in fh.read(65536):
            raise error("a binary file, not text", file=str(path))
        fh.seek(len(BOM) if head == BOM else 0)
        consumed = [fh.tell()]
        reader = csv.reader(_text_lines(fh, path, error, consumed, 1))
        header: list[str] = []
        try:
            header = next(reader, [])
            end = consumed[0]
            for record in reader:
                start, end = end, consumed[0]
                if not record:  # a blank line: DictReader skips it
                    continue
                if len(record) != len(header):
                    problems.append(Problem(str(path), reader.line_num, "", f"{len(record)} fields, the header has "
                                                                            f"{len(header)}"))
                elif visit is not None and not problems:
                    visit(dict(zip(header, record, strict=True)), reader.line_num)
                offsets.append(start)
                lines.append(reader.line_num)
        except csv.Error as exc:
            problems.append(Problem(str(path), reader.line_num, "", f"invalid CSV: {exc}"))
    if len(set(header)) < len(header):
        dupes = sorted({f for f in header if header.count(f) > 1})
        problems.insert(0, Problem(str(path), 1, "", f"duplicate column name(s) in the header: {', '.join(dupes)}"))
    raise_all(problems, error)
    import numpy as np  # numpy (and ctypes) load when a file is indexed, not when the CLI registers
    return CsvSource(path, header, np.frombuffer(offsets, dtype=np.int64), np.frombuffer(lines, dtype=lines.typecode))


class ArrowSource:
    """Rows of a ``datasets.Dataset`` (memory-mapped from ``datasets``' on-disk cache)."""

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def get(self, i: int) -> Any:
        return self.dataset[int(i)]

    def line(self, i: int) -> int | None:
        return None

    def iter_range(self, start: int, stop: int) -> Iterator[dict[str, Any]]:
        """Rows ``start:stop`` read 1000 at a time (a row at a time costs a table lookup each)."""
        part = self.dataset.select(range(start, stop)) if (start, stop) != (0, len(self.dataset)) else self.dataset
        for batch in part.iter(batch_size=1000):
            names = list(batch)
            yield from (dict(zip(names, values, strict=True)) for values in zip(*batch.values(), strict=True))


class Rows(Sequence[Any]):
    """A lazy, read-only sequence of rows: ``index`` picks rows of ``source`` (a slice of it stays lazy) and
    ``fn`` shapes each fetched row. ``line_of(i)``: the file line of row ``i`` (None outside line files)."""

    def __init__(self, source: Source, index: range | np.ndarray | None = None,
                 fn: Callable[[Any], Any] | None = None) -> None:
        self.source, self.fn = source, fn
        self.index = range(len(source)) if index is None else index

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return Rows(self.source, self.index[i], self.fn)
        row = self.source.get(int(self.index[i]))
        return self.fn(row) if self.fn is not None else row

    def __iter__(self) -> Iterator[Any]:
        index = self.index
        if isinstance(index, range) and index.step == 1 and hasattr(self.source, "iter_range"):
            rows = self.source.iter_range(index.start, index.stop)
            yield from (map(self.fn, rows) if self.fn is not None else rows)
            return
        for i in range(len(index)):
            yield self[i]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and len(self) == len(other) and all(
            a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __add__(self, other: Sequence[Any]) -> list[Any]:  # rows were a list: joining them still gives one
        return [*self, *other]

    def __radd__(self, other: Sequence[Any]) -> list[Any]:
        return [*other, *self]

    def __repr__(self) -> str:
        return f"<{len(self)} rows of {getattr(self.source, 'path', type(self.source).__name__)}>"

    def line_of(self, i: int) -> int | None:
        return self.source.line(int(self.index[i]))

    def pick(self, index: Sequence[int] | np.ndarray) -> Rows:
        """The rows at positions ``index`` of this sequence (still lazy)."""
        import numpy as np  # numpy (and ctypes) load when a file is indexed, not when the CLI registers
        return Rows(self.source, np.asarray(self.index)[np.asarray(index, dtype=np.int64)], self.fn)

    def mapped(self, fn: Callable[[Any], Any]) -> Rows:
        """These rows with ``fn`` applied to each when fetched (after this sequence's own function)."""
        first = self.fn
        return Rows(self.source, self.index, fn if first is None else (lambda row: fn(first(row))))


def split_ranges(split: str, num_rows: int, error: type[UserError], where: str) -> np.ndarray | range:
    """The row positions ``split`` names in a source with the one split ``train`` of ``num_rows`` rows
    (``train``, ``train[:1000]``, ``train[10%:]``, ``train[:5]+train[-5:]``), as ``datasets`` reads a slice."""
    if split == "train":
        return range(num_rows)
    from datasets import ReadInstruction  # heavy import (pyarrow, fsspec): only for a sliced split

    try:
        parts = ReadInstruction.from_spec(split).to_absolute({"train": num_rows})
    except (ValueError, KeyError, AssertionError) as exc:
        names = {part.split("[", 1)[0].strip() for part in split.split("+")}
        why = (f"{where} has one split, 'train'" if names != {"train"}
               else (str(exc).strip().splitlines() or [type(exc).__name__])[0])
        raise error(f"data.split: {split!r}: {why}") from None
    if len(parts) == 1:
        return range(parts[0].from_, parts[0].to)
    import numpy as np  # numpy (and ctypes) load when a file is indexed, not when the CLI registers
    return np.concatenate([np.arange(p.from_, p.to, dtype=np.int64) for p in parts])
