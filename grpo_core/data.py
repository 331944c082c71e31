"""Training rows and prompts: ``[data]`` -> a list of dict rows, and a row -> the prompt text.

Sources (``[data] source``):
  * a local file: ``.jsonl`` / ``.json`` (JSON lines or one array), ``.csv``, ``.parquet``;
  * ``scheme:rest`` where ``scheme`` is registered through ``grpo_register_dataset_sources``
    (the loader gets the ``[data]`` table as a dict, plus ``split``);
  * anything else is a Hugging Face hub dataset (``datasets.load_dataset(source, subset, split=...)``).

Rows keep every column (``answer``, ``tests``, ...) because rewards read them; ``columns`` renames
them first. Problems raise :class:`DataError` with a one-line message naming the ``data.*`` key.
"""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grpo_core.config import LOCAL_DATA_SUFFIXES, SOURCE_SCHEME

if TYPE_CHECKING:
    from grpo_core.config import DataConfig


class DataError(ValueError):
    """A dataset could not be loaded or does not fit the ``[data]`` config."""


def read_local(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a local ``.jsonl``/``.json``/``.csv``/``.parquet`` file."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in LOCAL_DATA_SUFFIXES:
        raise DataError(f"{path}: unsupported file type {suffix!r} (use {', '.join(LOCAL_DATA_SUFFIXES)})")
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).to_pylist()
    with open(path, encoding="utf-8", newline="") as fh:
        if suffix == ".csv":
            return list(csv.DictReader(fh))
        text = fh.read()
    if suffix == ".json" and text.lstrip().startswith("["):
        rows = json.loads(text)
    else:
        rows = []
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise DataError(f"{path}:{number}: invalid JSON: {exc.msg}") from None
    if not all(isinstance(r, dict) for r in rows):
        raise DataError(f"{path}: every row must be a JSON object")
    return rows


def _from_source(source: str, data_cfg: DataConfig, split: str) -> list[dict[str, Any]]:
    scheme = SOURCE_SCHEME.match(source)
    if scheme:
        from grpo_rewards.plugins import get_registry

        loader = get_registry().get("dataset_sources", scheme.group(1))
        spec = {**dataclasses.asdict(data_cfg), "source": source, "split": split}
        return [dict(r) for r in loader(spec)]
    if Path(source).expanduser().exists():
        return read_local(Path(source).expanduser())
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
    return ds.to_list()


def _shape(rows: list[dict[str, Any]], data_cfg: DataConfig, where: str) -> list[dict[str, Any]]:
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
    if data_cfg.answer_field and data_cfg.answer_field != "answer" and "answer" not in rows[0]:
        rows = [{**r, "answer": r[data_cfg.answer_field]} for r in rows]  # rewards read the `answer` column
    return rows


def load_rows(data_cfg: DataConfig, *, split: str | None = None, source: str | None = None) -> list[dict[str, Any]]:
    """Rows of ``source`` (default ``data_cfg.source``) and ``split`` (default ``data_cfg.split``), renamed
    by ``columns``, cut to ``limit`` rows; checks the prompt (and answer) columns exist."""
    source = source or data_cfg.source
    split = split or data_cfg.split
    rows = _from_source(source, data_cfg, split)
    if data_cfg.limit:
        rows = rows[: data_cfg.limit]
    return _shape(rows, data_cfg, f"{source} [{split}]")


def train_eval_rows(data_cfg: DataConfig) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The training rows and the held-out rows: ``eval_source``/``eval_split`` when given, else the last
    ``eval_size`` training rows are held out (and removed from training). ``eval_size`` caps either."""
    train = load_rows(data_cfg)
    if data_cfg.eval_source or data_cfg.eval_split:
        held = load_rows(data_cfg, source=data_cfg.eval_source or data_cfg.source,
                         split=data_cfg.eval_split or data_cfg.split)
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
    from grpo_rewards.plugins import PluginError, get_registry

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


def missing_reward_columns(cfg: Any, rows: list[dict[str, Any]], registry: Any = None) -> list[str]:
    """One warning line per reward column absent from ``rows`` (such a reward scores nothing useful)."""
    present = set(rows[0]) if rows else set()
    return [f"reward {alias!r} reads column {col!r}, which the data does not have (columns: {', '.join(sorted(present))})"
            for alias, cols in reward_columns(cfg, registry).items() for col in cols if col not in present]
