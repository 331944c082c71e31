"""Training rows and prompts: ``[data]`` -> a lazy sequence of dict rows, and a row -> the prompt text.

Sources (``[data] source``):
  * a local file: ``.jsonl`` / ``.json`` (JSON lines or one array), ``.csv``, ``.parquet``;
  * ``scheme:rest`` where ``scheme`` is registered through ``grpo_register_dataset_sources``
    (the loader gets the ``[data]`` table as a dict, plus ``split``);
  * anything else goes to ``datasets.load_dataset(source, subset, split=..., data_files=..., revision=...)``:
    a hub dataset, a local folder, or a builder name (``json``, ``csv``, ``parquet``) with ``data_files``.

Large data is never read whole (:mod:`grpo_core.lazy_rows`): a JSON-lines or CSV file is indexed in one
streaming pass (a byte offset per row) and each row is parsed when it is used; a parquet file, a hub dataset
or ``data_files`` are ``datasets``' memory-mapped Arrow tables. A JSON array file (one value) and a registered
source's rows are read whole. ``split`` takes ``datasets``' slicing syntax for every source (``train[:1000]``,
``train[10%:]``; a local file has the one split ``train``). With ``streaming = true`` the source is a
``datasets.IterableDataset`` read a step at a time (:mod:`grpo_core.row_stream`).

Rows keep every column (``answer``, ``tests``, ...) because rewards read them; ``columns`` renames
them first. Problems raise :class:`DataError`, one ``file:line: key: what`` line per problem, every bad
row at once (found in one pass of constant memory): a row that is not an object, lacks a column the first
row has, or whose prompt is not text or a list of chat messages.
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grpo_core.config import DATASET_BUILDERS, LOCAL_DATA_SUFFIXES, SOURCE_SCHEME
from grpo_core.lazy_rows import (
    MAX_LISTED,
    ArrowSource,
    Rows,
    index_csv,
    index_json_lines,
    kind_of,
    raise_all,
    split_ranges,
)
from grpo_core.row_stream import StreamedRows
from grpo_rewards.columns import needs, reference_columns, reference_problem
from grpo_rewards.errors import Problem, UserError
from grpo_rewards.files import read_text
from grpo_rewards.plugins import PluginError, get_registry

if TYPE_CHECKING:
    from grpo_core.config import DataConfig
    from grpo_rewards.plugins import Registry


class DataError(UserError, ValueError):
    """A dataset could not be loaded or does not fit the ``[data]`` config (one line per problem)."""


def _raise_all(problems: list[Problem]) -> None:
    raise_all(problems, DataError)


_kind = kind_of


class ListSource:
    """Rows already in memory (a JSON array file, a registered source, the Python API's objects)."""

    def __init__(self, rows: list[Any], lines: Sequence[int | None] | None = None) -> None:
        self.rows, self.lines = rows, lines

    def __len__(self) -> int:
        return len(self.rows)

    def get(self, i: int) -> Any:
        return self.rows[i]

    def line(self, i: int) -> int | None:
        return self.lines[i] if self.lines is not None else None


def _read_parquet(path: Path, split: str = "train") -> Rows:
    import pyarrow as pa  # heavy optional imports: only for a parquet source
    import pyarrow.parquet as pq

    try:
        pq.ParquetFile(path).metadata  # noqa: B018 (reads the footer: a file that is not parquet fails here)
    except (pa.ArrowException, OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(f"not a readable parquet file: {first}", file=str(path)) from None
    table = _load_dataset("parquet", None, split, {"data_files": {"train": str(path)}}, str(path), quiet=True)
    return Rows(ArrowSource(table))


def _read_json_array(path: Path) -> Rows:
    text = read_text(path, DataError)
    try:
        rows = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"invalid JSON: {exc.msg} (column {exc.colno})", file=str(path), line=exc.lineno) from None
    except RecursionError:
        raise DataError("invalid JSON: nested too deeply", file=str(path)) from None
    _raise_all([Problem(str(path), None, "", f"row {i + 1}: expected a JSON object, got {_kind(row)}")
                for i, row in enumerate(rows) if not isinstance(row, dict)])
    return Rows(ListSource(rows))


def _is_json_array(path: Path) -> bool:
    with open(path, "rb") as fh:
        head = fh.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
    return head.startswith(b"[")


def read_local_rows(path: str | Path, split: str = "train", visit: Callable[[Any, int | None], None] | None = None
                    ) -> Rows:
    """Rows of a local ``.jsonl``/``.json``/``.csv``/``.parquet`` file, read lazily (see the module docs);
    ``rows.line_of(i)`` is the file line of row ``i`` (None where a format has no lines). Every bad line is
    reported at once: not UTF-8, invalid JSON, not an object, a CSV row whose fields do not match the header.
    ``split``: ``train`` or a slice of it (``train[:100]``). ``visit(row, line)``: called with each row of a
    JSON-lines or CSV file read whole (``split = "train"``) as it is indexed."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in LOCAL_DATA_SUFFIXES:
        raise DataError(f"unsupported file type {suffix!r} (use {', '.join(LOCAL_DATA_SUFFIXES)})", file=str(path))
    if path.is_dir():
        raise DataError("is a folder, not a file", file=str(path))
    if not path.is_file():
        raise DataError("file not found", file=str(path))
    if suffix == ".parquet":
        return _read_parquet(path, split)
    if suffix == ".json" and _is_json_array(path):
        rows = _read_json_array(path)
    else:
        try:
            visit = visit if split == "train" else None
            rows = Rows(index_csv(path, DataError, visit) if suffix == ".csv"
                        else index_json_lines(path, DataError, visit))
        except OSError as exc:
            raise DataError(f"cannot read: {exc.strerror or exc}", file=str(path)) from None
    return Rows(rows.source, split_ranges(split, len(rows), DataError, str(path)))


def read_local(path: str | Path) -> Rows:
    """Rows of a local ``.jsonl``/``.json``/``.csv``/``.parquet`` file (see :func:`read_local_rows`)."""
    return read_local_rows(path)


def is_builder(source: str) -> bool:
    """Whether ``source`` names one of ``datasets``' packaged builders (``json``, ``csv``, ``parquet``...),
    which read ``data_files`` rather than a hub repository."""
    return source in DATASET_BUILDERS


@contextlib.contextmanager
def _quiet_progress(quiet: bool) -> Iterator[None]:
    """``datasets``' progress bars off while a local file is converted (noise for a file already on disk)."""
    import datasets  # heavy optional import: only where datasets loads

    was = datasets.is_progress_bar_enabled()
    if quiet:
        datasets.disable_progress_bars()
    try:
        yield
    finally:
        if quiet and was:
            datasets.enable_progress_bars()


def _error_key(exc: BaseException, kwargs: dict[str, Any]) -> str:
    """The ``[data]`` key a ``datasets.load_dataset`` failure is about."""
    text, name = str(exc), type(exc).__name__
    if "Revision" in name or (kwargs.get("revision") and "revision" in text.lower()):
        return "revision"
    if kwargs.get("data_files") and (isinstance(exc, (FileNotFoundError, StopIteration)) or "DataFiles" in name
                                     or "EmptyDataset" in name or "data_files" in text):
        return "data_files"
    if isinstance(exc, ValueError) and ("split" in text.lower() or "instruction" in text.lower()):
        return "split"
    return "source"


# the file types datasets reads from a folder; it picks the commonest and silently skips the others
FOLDER_DATA_SUFFIXES = (".jsonl", ".json", ".csv", ".tsv", ".parquet", ".arrow", ".txt")


def mixed_folder_problem(source: str, kwargs: dict[str, Any]) -> str | None:
    """Why a data folder without ``data_files`` cannot be read whole: it holds more than one type of data file."""
    folder = Path(source).expanduser()
    if kwargs.get("data_files") or not folder.is_dir():
        return None
    kinds: dict[str, int] = {}
    for path in folder.rglob("*"):
        suffix = path.suffix.lower()
        if suffix in FOLDER_DATA_SUFFIXES and path.is_file() and not any(p.startswith(".") for p in path.parts):
            kind = "json" if suffix == ".jsonl" else suffix[1:]  # one reader for .json and .jsonl
            kinds[kind] = kinds.get(kind, 0) + 1
    if len(kinds) < 2:
        return None
    found = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))  # "1 csv, 2 json"
    return (f"data.source: {source} holds data files of several types ({found}): only one type would be read and "
            "the others skipped; keep one type in the folder or name the files with data.data_files")


def _load_dataset(source: str, subset: str | None, split: str, kwargs: dict[str, Any], shown: str,
                  quiet: bool = False) -> Any:
    """``datasets.load_dataset(source, subset, split=split, **kwargs)``; a failure is one line naming the key."""
    if (mixed := mixed_folder_problem(source, kwargs)) is not None:
        raise DataError(mixed)
    try:
        import datasets  # heavy optional import: only where a source needs it
    except ImportError:
        raise DataError(f"data.source: {source!r} needs `datasets`; install it") from None
    try:
        with _quiet_progress(quiet):
            return datasets.load_dataset(source, subset, split=split, **kwargs)
    except Exception as exc:  # offline, unknown name, bad revision/split/files: one line, with the cause
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        key = _error_key(exc, kwargs)
        if key == "data_files" and msg == type(exc).__name__:
            msg = f"no data file found for {kwargs['data_files']!r}"
        what = "hub dataset" if not is_builder(source) and not Path(shown).exists() else "dataset"
        raise DataError(f"data.{key}: cannot load {what} {shown!r} (split {split!r}): {msg}") from None


def _hub_kwargs(data_cfg: DataConfig, source: str) -> dict[str, Any]:
    kwargs: dict[str, Any] = {}
    if data_cfg.data_files:
        files = data_cfg.data_files
        patterns = [files] if isinstance(files, str) else list(files.values() if isinstance(files, dict) else files)
        local = is_builder(source) or Path(source).is_dir()
        for pattern in patterns if local else ():
            base = Path(source) if Path(source).is_dir() else Path()
            if "://" not in pattern and not glob.glob(str(base / Path(pattern).expanduser())):
                raise DataError(f"data.data_files: no file matches {pattern!r}"
                                f"{' in ' + source if Path(source).is_dir() else ''}")
        kwargs["data_files"] = files
    if data_cfg.revision:
        kwargs["revision"] = data_cfg.revision
    return kwargs


def _from_source(source: str, data_cfg: DataConfig, split: str, registry: Registry | None = None,
                 visit: Callable[[Any, int | None], None] | None = None) -> Rows:
    scheme = SOURCE_SCHEME.match(source)
    if scheme:
        loader = (registry or get_registry()).get("dataset_sources", scheme.group(1))
        spec = {**dataclasses.asdict(data_cfg), "source": source, "split": split}
        rows = [dict(r) if isinstance(r, dict) else r for r in loader(spec)]
        _raise_all([Problem(source, None, "", f"row {i + 1}: expected an object, got {_kind(r)}")
                    for i, r in enumerate(rows[: data_cfg.limit] if data_cfg.limit else rows)
                    if not isinstance(r, dict)])
        return Rows(ListSource(rows))
    path = Path(source).expanduser()
    if path.is_file() or (path.exists() and source.lower().endswith(LOCAL_DATA_SUFFIXES)):
        return read_local_rows(path, split, visit)  # (a folder named like a data file: "is a folder")
    if source.lower().endswith(LOCAL_DATA_SUFFIXES):
        raise DataError(f"data.source: file not found: {source}")
    return Rows(ArrowSource(_load_dataset(source, data_cfg.subset, split, _hub_kwargs(data_cfg, source), source)))


def _prompt_problem(prompt: Any) -> str | None:
    if isinstance(prompt, str):
        return None if prompt.strip() else "is empty"
    if isinstance(prompt, list) and prompt and all(
            isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str) for m in prompt):
        return None
    if isinstance(prompt, list):
        return "must be a list of {\"role\", \"content\"} messages with text content"
    return f"must be text or a list of chat messages, got {_kind(prompt)}"


def _renamer(data_cfg: DataConfig) -> Callable[[dict[str, Any]], dict[str, Any]] | None:
    names = data_cfg.columns
    return (lambda r: {names.get(k, k): v for k, v in r.items()}) if names else None


def _first_row_checks(first: dict[str, Any], data_cfg: DataConfig, where: str) -> None:
    if data_cfg.prompt_field not in first:
        raise DataError(f"data.prompt_field: column {data_cfg.prompt_field!r} not in {where} "
                        f"(columns: {', '.join(map(str, first))}); set prompt_field or rename with [data.columns]")
    if data_cfg.answer_field and data_cfg.answer_field not in first:
        raise DataError(f"data.answer_field: column {data_cfg.answer_field!r} not in {where} "
                        f"(columns: {', '.join(map(str, first))}); set answer_field (or \"\" for none)")


def row_problem(row: Any, columns: Sequence[str], data_cfg: DataConfig) -> tuple[str, str] | None:
    """``(key, what)`` for a row that cannot be trained on (``columns``: the first row's), or None."""
    if not isinstance(row, dict):
        return "", f"expected an object, got {_kind(row)}"
    missing = [c for c in columns if c not in row]
    if missing:
        return "", f"missing column(s) {', '.join(map(repr, missing))} (the first row has them)"
    if (why := _prompt_problem(row[data_cfg.prompt_field])) is not None:
        return data_cfg.prompt_field, why
    if data_cfg.answer_field and row[data_cfg.answer_field] is None:
        return data_cfg.answer_field, "is null"
    return None


def answer_alias(data_cfg: DataConfig, first: dict[str, Any]) -> Callable[[dict[str, Any]], dict[str, Any]] | None:
    """Rewards read the ``answer`` column: the answer field copied there when named otherwise (None: no copy)."""
    field = data_cfg.answer_field
    if field and field != "answer" and "answer" not in first:
        return lambda r: {**r, "answer": r[field]}
    return None


class RowChecks:
    """The row checks of a source, fed one row at a time (``checks(row, line)``), in constant memory: the first
    row's columns, then every row against them (see the module docs); :meth:`finish` raises every problem."""

    def __init__(self, data_cfg: DataConfig, where: str, file: str) -> None:
        self.cfg, self.where, self.file, self.rename = data_cfg, where, file, _renamer(data_cfg)
        self.first: dict[str, Any] | None = None
        self.first_error: DataError | None = None
        self.problems: list[Problem] = []
        self.bad = self.count = 0

    def __call__(self, row: Any, line: int | None) -> None:
        self.count += 1
        if self.rename is not None and isinstance(row, dict):
            row = self.rename(row)
        if self.first is None:
            self.first = row
            try:
                _first_row_checks(row, self.cfg, self.where)
            except DataError as exc:
                self.first_error = exc
        if self.first_error is not None:
            return
        if (found := row_problem(row, list(self.first), self.cfg)) is None:
            return
        self.bad += 1
        if len(self.problems) <= MAX_LISTED:  # the rest are counted (constant memory however many rows are bad)
            at = "" if line else f"row {self.count}: "
            self.problems.append(Problem(self.file, line, found[0], f"{at}{found[1]}"))

    def finish(self) -> dict[str, Any]:
        """The first row (renamed), or the checks' error."""
        if self.first is None:
            raise DataError(f"data.source: {self.where} has no rows")
        if self.first_error is not None:
            raise self.first_error
        problems = self.problems
        if self.bad > len(problems):
            more = Problem(self.file, None, "", f"... and {self.bad - MAX_LISTED} more bad rows")
            problems = [*problems[:MAX_LISTED], more]
        _raise_all(problems)
        return self.first


def _shape(rows: Sequence[dict[str, Any]], lines: Sequence[int | None] | None, data_cfg: DataConfig, where: str,
           file: str, checks: RowChecks | None = None) -> Rows:
    """``rows`` renamed by ``columns`` and checked in one streaming pass (every bad row reported at once);
    ``checks`` already fed with every row (while the file was indexed) saves the pass."""
    if not isinstance(rows, Rows):
        rows = Rows(ListSource(list(rows), lines))
    if checks is None or checks.count != len(rows):
        checks = RowChecks(data_cfg, where, file)
        for i, row in enumerate(rows):
            checks(row, rows.line_of(i))
    first = checks.finish()
    if checks.rename is not None:
        rows = rows.mapped(checks.rename)
    alias = answer_alias(data_cfg, first)
    return rows.mapped(alias) if alias is not None else rows


def load_rows(data_cfg: DataConfig, *, split: str | None = None, source: str | None = None,
              registry: Registry | None = None) -> Rows:
    """Rows of ``source`` (default ``data_cfg.source``) and ``split`` (default ``data_cfg.split``), renamed
    by ``columns``, cut to ``limit`` rows; checks every row (see the module docs). A ``scheme:`` source's
    loader comes from ``registry`` (default: the process-wide one). The rows are a lazy sequence
    (:class:`grpo_core.lazy_rows.Rows`): each is read when used."""
    source = source or data_cfg.source
    split = split or data_cfg.split
    where = f"{source} [{split}]"
    checks = RowChecks(data_cfg, where, source)  # fed while a whole local file is indexed: one pass, not two
    rows = _from_source(source, data_cfg, split, registry, None if data_cfg.limit else checks)
    if data_cfg.limit:
        rows = rows[: data_cfg.limit]
    return _shape(rows, None, data_cfg, where, source, checks)


def stream_rows(data_cfg: DataConfig, *, skip: int = 0) -> StreamedRows:
    """The training rows as a stream (``streaming = true``): ``datasets.load_dataset(..., streaming=True)``
    re-created per epoch, cut to ``limit`` rows, the first ``skip`` rows left out (held out), then shuffled
    in ``datasets``' buffer (``shuffle_buffer`` rows, seeded by ``seed`` and the epoch) when ``shuffle`` is on.
    Each row is renamed and checked when it is read (:mod:`grpo_core.row_stream`)."""
    source = data_cfg.source
    local = Path(source).expanduser().is_file()
    builder, kwargs = (_local_builder(Path(source)), {"data_files": {"train": str(Path(source).expanduser())}}) \
        if local else (source, _hub_kwargs(data_cfg, source))
    base = _load_dataset(builder, None if local else data_cfg.subset, data_cfg.split,
                         {**kwargs, "streaming": True}, source, quiet=local)

    def epoch_stream(epoch: int) -> Any:
        ds = base.take(data_cfg.limit) if data_cfg.limit else base
        ds = ds.skip(skip) if skip else ds
        if data_cfg.shuffle:
            ds = ds.shuffle(seed=data_cfg.seed, buffer_size=data_cfg.shuffle_buffer)
            ds.set_epoch(epoch)
        return ds

    where = f"{source} [{data_cfg.split}]"
    return StreamedRows(epoch_stream, _StreamShape(data_cfg, where), where, DataError)


class _StreamShape:
    """A streamed row renamed and checked as a file's rows are (against the first row read)."""

    def __init__(self, data_cfg: DataConfig, where: str) -> None:
        self.cfg, self.where, self.rename = data_cfg, where, _renamer(data_cfg)
        self.columns: list[str] | None = None
        self.alias: Callable[[dict[str, Any]], dict[str, Any]] | None = None

    def __call__(self, raw: Any, epoch: int, number: int) -> dict[str, Any]:
        row = self.rename(raw) if self.rename is not None and isinstance(raw, dict) else raw
        if self.columns is None and isinstance(row, dict):
            _first_row_checks(row, self.cfg, self.where)
            self.columns, self.alias = list(row), answer_alias(self.cfg, row)
        found = row_problem(row, self.columns or [], self.cfg)
        if found is not None:
            raise DataError(f"data.{found[0] or 'source'}: {self.where}: row {number} of epoch {epoch}: {found[1]}")
        return self.alias(row) if self.alias is not None else row


def _local_builder(path: Path) -> str:
    return {".csv": "csv", ".parquet": "parquet"}.get(path.suffix.lower(), "json")


def _first_rows(data_cfg: DataConfig, count: int) -> list[dict[str, Any]]:
    """The first ``count`` rows of the (unshuffled) stream, checked: a streamed run's held-out rows."""
    plain = dataclasses.replace(data_cfg, shuffle=False)
    return list(stream_rows(plain).head(count))


def train_eval_rows(data_cfg: DataConfig, registry: Registry | None = None, *,
                    train: Sequence[dict[str, Any]] | None = None, held: Sequence[dict[str, Any]] | None = None
                    ) -> tuple[Any, Any]:
    """The training rows and the held-out rows: ``eval_source``/``eval_split`` when given, else the last
    ``eval_size`` training rows are held out (and removed from training). ``eval_size`` caps either.
    ``registry`` as in :func:`load_rows`. ``train`` / ``held``: rows already in hand (the Python API's dataset
    objects), taken in place of loading them. With ``streaming`` the training rows are a
    :class:`~grpo_core.row_stream.StreamedRows` and the held-out rows (``eval_size`` of them, the stream's
    first rows unless ``eval_source``/``eval_split`` name others) a list."""
    if data_cfg.streaming and train is None:
        if data_cfg.eval_source or data_cfg.eval_split:
            other = dataclasses.replace(data_cfg, source=data_cfg.eval_source or data_cfg.source,
                                        split=data_cfg.eval_split or data_cfg.split, limit=None)
            held_rows = held if held is not None else (_first_rows(other, data_cfg.eval_size) if data_cfg.eval_size
                                                       else load_rows(other))
            return stream_rows(data_cfg), held_rows
        if data_cfg.eval_size:
            return stream_rows(data_cfg, skip=data_cfg.eval_size), _first_rows(data_cfg, data_cfg.eval_size)
        return stream_rows(data_cfg), []
    if train is None:
        train = load_rows(data_cfg, registry=registry)
    if held is None and (data_cfg.eval_source or data_cfg.eval_split):
        held = load_rows(data_cfg, source=data_cfg.eval_source or data_cfg.source,
                         split=data_cfg.eval_split or data_cfg.split, registry=registry)
    if held is not None:
        return train, held[: data_cfg.eval_size] if data_cfg.eval_size else held
    if data_cfg.eval_size:
        if data_cfg.eval_size >= len(train):
            raise DataError(f"data.eval_size: {data_cfg.eval_size} leaves no training rows out of {len(train)}")
        return train[: -data_cfg.eval_size], train[-data_cfg.eval_size:]
    return train, []


def epoch_order(num_rows: int, epoch: int, *, seed: int, shuffle: bool) -> list[int]:
    """The row order of one pass over the data: a permutation drawn from ``(seed, epoch)`` alone, so a
    resumed run recovers it from the epoch number (no RNG state needed)."""
    return epoch_permutation(num_rows, epoch, seed=seed, shuffle=shuffle).tolist()


def epoch_permutation(num_rows: int, epoch: int, *, seed: int, shuffle: bool) -> Any:
    """:func:`epoch_order` as a numpy array (4 or 8 bytes a row, not a Python list)."""
    import numpy as np

    if not shuffle:
        return np.arange(num_rows)
    return np.random.default_rng([seed, epoch]).permutation(num_rows)


def format_prompt(row: dict[str, Any], data_cfg: DataConfig, tokenizer: Any,
                  tools: list[dict[str, Any]] | None = None) -> str:
    """The text the model continues: the chat template (system prompt + user turn, generation prompt
    added) when ``chat_template`` is on, else ``system_prompt`` and the prompt separated by a blank line.
    A prompt that is already a list of ``{"role", "content"}`` messages is used as the conversation. ``tools``
    (JSON schemas) are rendered by the chat template, as it tells the model which tools it may call."""
    prompt = row[data_cfg.prompt_field]
    system = data_cfg.system_prompt
    if data_cfg.chat_template:
        if not getattr(tokenizer, "chat_template", None):
            raise DataError("data.chat_template: the tokenizer has no chat template; set chat_template = false")
        if isinstance(prompt, list):
            messages = list(prompt)
            if system and not (messages and messages[0].get("role") == "system"):
                messages.insert(0, {"role": "system", "content": system})
        else:
            messages = ([{"role": "system", "content": system}] if system else []) + [
                {"role": "user", "content": str(prompt)}]
        if tools:
            return tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    if isinstance(prompt, list):
        prompt = "\n".join(str(m.get("content", "")) for m in prompt)
    return f"{system}\n\n{prompt}" if system else str(prompt)


def reward_columns(cfg: Any, registry: Any = None) -> dict[str, list[str]]:
    """The dataset columns each reward of a run config reads: its spec's ``columns``, renamed by the
    reward's ``<name>_column`` parameters (``reference_column``, ``keywords_column``, ...)."""
    registry = registry or get_registry()
    tables = cfg.raw.get("rewards", {}) if isinstance(cfg.raw.get("rewards"), dict) else {}
    out: dict[str, list[str]] = {}
    for entry in cfg.rewards.entries:
        if not entry.use or entry.use.startswith("verify:"):
            continue
        try:
            spec = registry.reward(entry.use)
        except PluginError:
            continue
        params = tables.get(entry.alias, {})
        renames = {p.default: params.get(name, p.default) for name, p in spec.params.items()
                   if name.endswith("_column") and isinstance(p.default, str)}
        out[entry.alias] = [renames.get(c, c) for c in spec.columns]
    return out


TRAINER_COLUMNS = ("prompts", "completion_ids")  # every reward gets these from the trainer, not from the data


def missing_reward_columns(cfg: Any, rows: list[dict[str, Any]], registry: Any = None) -> list[str]:
    """The rows checked against the rewards as ``grpo rewards score`` checks its input
    (:mod:`grpo_rewards.columns`): a :class:`DataError` for a column a reward needs that no row has or
    every row holds null in (every row would score None), and for a row whose text reference holds a JSON
    object or array; one warning line per column a reward reads only when present that the data lacks."""
    passed = set(rows[0]) - {cfg.data.prompt_field} if rows else set()  # the prompt goes as `prompts`
    source, have = cfg.data.source, ", ".join(sorted(map(str, passed))) or "none"
    problems = []
    for n in needs(cfg.rewards, TRAINER_COLUMNS):
        if n.column in passed and any(r.get(n.column) is not None for r in rows):
            continue
        where = "every row holds null in" if n.column in passed else "no row has"
        problems.append(Problem(source, None, n.column, f"{where} this column, which {n.who()} needs: every row "
                                                        f"would score None (columns: {have})"))
    for column, aliases in reference_columns(cfg.rewards).items():
        problems += [Problem(source, None, column, f"row {i + 1}: {why} (reward {', '.join(map(repr, aliases))} "
                                                   "compares answers with it as text)")
                     for i, r in enumerate(rows) if (why := reference_problem(r.get(column))) is not None]
    _raise_all(problems)
    present = set(rows[0]) if rows else set()
    return [f"reward {alias!r} reads column {col!r}, which the data does not have (columns: {', '.join(sorted(present))})"
            for alias, cols in reward_columns(cfg, registry).items() for col in cols
            if col not in present and col not in TRAINER_COLUMNS]
