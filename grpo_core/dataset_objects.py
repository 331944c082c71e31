"""Datasets handed over as Python objects (the Python API's ``train_dataset`` / ``eval_dataset``) -> rows.

Accepted: a ``datasets.Dataset``, a ``datasets.IterableDataset`` (read once, up to ``data.limit`` rows: an
endless stream needs ``limit``), a ``pandas.DataFrame`` or a list of dicts. A ``DatasetDict`` is refused
with the split to pick. The rows are checked as a file's are (:mod:`grpo_core.data`): the prompt column,
the answer column, every row an object with the first row's columns, the same one-line errors naming
``train_dataset`` or ``eval_dataset``.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

from grpo_core.data import DataError, _kind, _raise_all, _shape
from grpo_rewards.errors import Problem

if TYPE_CHECKING:
    from grpo_core.config import DataConfig


def _type_name(obj: Any) -> str:
    return f"{type(obj).__module__.split('.')[0]}.{type(obj).__name__}"


def _raw_rows(obj: Any, name: str, limit: int | None) -> list[Any]:
    kind = _type_name(obj)
    if kind in ("datasets.DatasetDict", "datasets.IterableDatasetDict") or (
            isinstance(obj, dict) and obj and all(_type_name(v).startswith("datasets.") for v in obj.values())):
        splits = ", ".join(map(repr, list(obj)))
        raise DataError(f"{name}: a dataset with splits ({splits}); pass one of them, e.g. {name}=ds[\"train\"]")
    if kind == "datasets.Dataset":
        return (obj.select(range(min(limit, len(obj)))) if limit else obj).to_list()
    if kind == "datasets.IterableDataset":
        return list(itertools.islice(iter(obj), limit))
    if kind == "pandas.DataFrame":
        frame = obj.head(limit) if limit else obj
        return frame.to_dict(orient="records")
    if isinstance(obj, (list, tuple)):
        return list(obj[:limit] if limit else obj)
    raise DataError(f"{name}: expected a datasets.Dataset, datasets.IterableDataset, pandas.DataFrame, a list of "
                    f"dicts or a data source name, got {kind}")


def rows_from_object(obj: Any, data_cfg: DataConfig, name: str = "train_dataset") -> list[dict[str, Any]]:
    """The checked rows of a dataset object (see the module docs), renamed by ``data.columns``, cut to
    ``data.limit``; raises :class:`DataError` (one line per problem)."""
    rows = _raw_rows(obj, name, data_cfg.limit)
    _raise_all([Problem(name, None, "", f"row {i + 1}: expected a dict, got {_kind(r)}")
                for i, r in enumerate(rows) if not isinstance(r, dict)])
    return _shape(rows, [None] * len(rows), data_cfg, name, name)
