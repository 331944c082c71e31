"""Training rows and prompts: ``[data]`` -> a list of dict rows, and a row -> the prompt text.

Sources (``[data] source``):
  * a local file: ``.jsonl`` / ``.json`` (JSON lines or one array), ``.csv``, ``.parquet``;
  * ``scheme:rest`` where ``scheme`` is registered through ``grpo_register_dataset_sources``
    (the loader gets the ``[data]`` table as a dict, plus ``split``);
  * anything else is a Hugging Face hub dataset (``datasets.load_dataset(source, subset, split=...)``).

Rows keep every column (``answer``, ``tests``, ...) because rewards read them; ``columns`` renames
them first. Problems raise :class:`DataError`, one ``file:line: key: what`` line per problem, every bad
row at once: a row that is not an object, lacks a column the first row has, or whose prompt is not text
or a list of chat messages.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grpo_core.config import LOCAL_DATA_SUFFIXES, SOURCE_SCHEME
from grpo_rewards.columns import needs, reference_columns, reference_problem
from grpo_rewards.errors import Problem, UserError
from grpo_rewards.files import read_text
from grpo_rewards.plugins import PluginError, get_registry

if TYPE_CHECKING:
    from grpo_core.config import DataConfig
    from grpo_rewards.plugins import Registry


class DataError(UserError, ValueError):
    """A dataset could not be loaded or does not fit the ``[data]`` config (one line per problem)."""


MAX_LISTED = 20  # bad rows listed one per line; the rest are counted


def _raise_all(problems: list[Problem]) -> None:
    if len(problems) > MAX_LISTED:
        more = len(problems) - MAX_LISTED
        problems = [*problems[:MAX_LISTED], Problem(problems[0].file, None, "", f"... and {more} more bad rows")]
    if problems:
        raise DataError(problems)


def _read_parquet(path: Path) -> list[dict[str, Any]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(path).read().to_pylist()
    except (pa.ArrowException, OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(f"not a readable parquet file: {first}", file=str(path)) from None


def _read_csv(path: Path, text: str) -> tuple[list[dict[str, Any]], list[int | None]]:
    reader = csv.DictReader(io.StringIO(text, newline=""))
    rows, lines, problems = [], [], []
    try:
        for row in reader:
            if None in row:  # more fields than the header: csv puts them under the key None
                problems.append(Problem(str(path), reader.line_num, "", f"{len(reader.fieldnames or []) + len(row[None])} "
                                        f"fields, the header has {len(reader.fieldnames or [])}"))
            elif any(v is None for v in row.values()):
                problems.append(Problem(str(path), reader.line_num, "", f"{sum(v is not None for v in row.values())} "
                                        f"fields, the header has {len(reader.fieldnames or [])}"))
            rows.append(row)
            lines.append(reader.line_num)
    except csv.Error as exc:
        problems.append(Problem(str(path), reader.line_num, "", f"invalid CSV: {exc}"))
    if reader.fieldnames and len(set(reader.fieldnames)) < len(reader.fieldnames):
        dupes = sorted({f for f in reader.fieldnames if reader.fieldnames.count(f) > 1})
        problems.insert(0, Problem(str(path), 1, "", f"duplicate column name(s) in the header: {', '.join(dupes)}"))
    _raise_all(problems)
    return rows, lines


def _read_json_lines(path: Path, text: str) -> tuple[list[Any], list[int | None]]:
    if path.suffix.lower() == ".json" and text.lstrip().startswith("["):
        try:
            rows = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DataError(f"invalid JSON: {exc.msg} (column {exc.colno})", file=str(path), line=exc.lineno) from None
        except RecursionError:
            raise DataError("invalid JSON: nested too deeply", file=str(path)) from None
        return rows, [None] * len(rows)
    rows, lines, problems = [], [], []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
            lines.append(number)
        except json.JSONDecodeError as exc:
            problems.append(Problem(str(path), number, "", f"invalid JSON: {exc.msg} (column {exc.colno})"))
        except RecursionError:
            problems.append(Problem(str(path), number, "", "invalid JSON: nested too deeply"))
    _raise_all(problems)
    return rows, lines


def read_local_rows(path: str | Path) -> tuple[list[dict[str, Any]], list[int | None]]:
    """Rows of a local ``.jsonl``/``.json``/``.csv``/``.parquet`` file and the line of each (None where a
    format has no lines). Every bad line is reported at once: not UTF-8, invalid JSON, not an object, a CSV
    row whose fields do not match the header."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in LOCAL_DATA_SUFFIXES:
        raise DataError(f"unsupported file type {suffix!r} (use {', '.join(LOCAL_DATA_SUFFIXES)})", file=str(path))
    if path.is_dir():
        raise DataError("is a folder, not a file", file=str(path))
    if suffix == ".parquet":
        rows = _read_parquet(path)
        lines: list[int | None] = [None] * len(rows)
    else:
        text = read_text(path, DataError)
        rows, lines = _read_csv(path, text) if suffix == ".csv" else _read_json_lines(path, text)
    _raise_all([Problem(str(path), line, "", f"{'row ' + str(i + 1) + ': ' if line is None else ''}expected a "
                        f"JSON object, got {_kind(row)}") for i, (row, line) in enumerate(zip(rows, lines, strict=True))
                if not isinstance(row, dict)])
    return rows, lines


def read_local(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a local ``.jsonl``/``.json``/``.csv``/``.parquet`` file (see :func:`read_local_rows`)."""
    return read_local_rows(path)[0]


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return {list: "an array", dict: "an object", str: "a string"}.get(type(value), f"a number ({value!r})")


def _from_source(source: str, data_cfg: DataConfig, split: str, registry: Registry | None = None
                 ) -> tuple[list[dict[str, Any]], list[int | None]]:
    scheme = SOURCE_SCHEME.match(source)
    if scheme:
        loader = (registry or get_registry()).get("dataset_sources", scheme.group(1))
        spec = {**dataclasses.asdict(data_cfg), "source": source, "split": split}
        rows = list(loader(spec))
        return [dict(r) if isinstance(r, dict) else r for r in rows], [None] * len(rows)
    if Path(source).expanduser().exists():
        return read_local_rows(Path(source).expanduser())
    if source.lower().endswith(LOCAL_DATA_SUFFIXES):
        raise DataError(f"data.source: file not found: {source}")
    try:
        import datasets
    except ImportError:
        raise DataError(f"data.source: {source!r} looks like a hub dataset; install `datasets`") from None
    try:
        ds = datasets.load_dataset(source, data_cfg.subset, split=split)
    except Exception as exc:  # offline, unknown name, missing config/split: one line, with the cause
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(f"data.source: cannot load hub dataset {source!r} (split {split!r}): {msg}") from None
    rows = ds.to_list()
    return rows, [None] * len(rows)


def _prompt_problem(prompt: Any) -> str | None:
    if isinstance(prompt, str):
        return None if prompt.strip() else "is empty"
    if isinstance(prompt, list) and prompt and all(
            isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str) for m in prompt):
        return None
    if isinstance(prompt, list):
        return "must be a list of {\"role\", \"content\"} messages with text content"
    return f"must be text or a list of chat messages, got {_kind(prompt)}"


def _shape(rows: list[dict[str, Any]], lines: list[int | None], data_cfg: DataConfig, where: str,
           file: str) -> list[dict[str, Any]]:
    if data_cfg.columns:
        rows = [{data_cfg.columns.get(k, k): v for k, v in r.items()} for r in rows]
    if not rows:
        raise DataError(f"data.source: {where} has no rows")
    if data_cfg.prompt_field not in rows[0]:
        raise DataError(f"data.prompt_field: column {data_cfg.prompt_field!r} not in {where} "
                        f"(columns: {', '.join(map(str, rows[0]))}); set prompt_field or rename with [data.columns]")
    if data_cfg.answer_field and data_cfg.answer_field not in rows[0]:
        raise DataError(f"data.answer_field: column {data_cfg.answer_field!r} not in {where} "
                        f"(columns: {', '.join(map(str, rows[0]))}); set answer_field (or \"\" for none)")
    columns = list(rows[0])
    problems = []
    for i, (row, line) in enumerate(zip(rows, lines, strict=True)):
        at = "" if line else f"row {i + 1}: "
        missing = [c for c in columns if c not in row]
        if missing:
            problems.append(Problem(file, line, "", f"{at}missing column(s) {', '.join(map(repr, missing))} "
                                                   "(the first row has them)"))
        elif (why := _prompt_problem(row[data_cfg.prompt_field])) is not None:
            problems.append(Problem(file, line, data_cfg.prompt_field, f"{at}{why}"))
        elif data_cfg.answer_field and row[data_cfg.answer_field] is None:
            problems.append(Problem(file, line, data_cfg.answer_field, f"{at}is null"))
    _raise_all(problems)
    if data_cfg.answer_field and data_cfg.answer_field != "answer" and "answer" not in rows[0]:
        rows = [{**r, "answer": r[data_cfg.answer_field]} for r in rows]  # rewards read the `answer` column
    return rows


def load_rows(data_cfg: DataConfig, *, split: str | None = None, source: str | None = None,
              registry: Registry | None = None) -> list[dict[str, Any]]:
    """Rows of ``source`` (default ``data_cfg.source``) and ``split`` (default ``data_cfg.split``), renamed
    by ``columns``, cut to ``limit`` rows; checks every row (see the module docs). A ``scheme:`` source's
    loader comes from ``registry`` (default: the process-wide one)."""
    source = source or data_cfg.source
    split = split or data_cfg.split
    rows, lines = _from_source(source, data_cfg, split, registry)
    if data_cfg.limit:
        rows, lines = rows[: data_cfg.limit], lines[: data_cfg.limit]
    bad = [Problem(source, None, "", f"row {i + 1}: expected an object, got {_kind(r)}")
           for i, r in enumerate(rows) if not isinstance(r, dict)]
    _raise_all(bad)
    return _shape(rows, lines, data_cfg, f"{source} [{split}]", source)


def train_eval_rows(data_cfg: DataConfig, registry: Registry | None = None, *,
                    train: list[dict[str, Any]] | None = None, held: list[dict[str, Any]] | None = None
                    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The training rows and the held-out rows: ``eval_source``/``eval_split`` when given, else the last
    ``eval_size`` training rows are held out (and removed from training). ``eval_size`` caps either.
    ``registry`` as in :func:`load_rows`. ``train`` / ``held``: rows already in hand (the Python API's dataset
    objects), taken in place of loading them."""
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
    if not shuffle:
        return list(range(num_rows))
    import numpy as np

    return np.random.default_rng([seed, epoch]).permutation(num_rows).tolist()


def format_prompt(row: dict[str, Any], data_cfg: DataConfig, tokenizer: Any) -> str:
    """The text the model continues: the chat template (system prompt + user turn, generation prompt
    added) when ``chat_template`` is on, else ``system_prompt`` and the prompt separated by a blank line.
    A prompt that is already a list of ``{"role", "content"}`` messages is used as the conversation."""
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
