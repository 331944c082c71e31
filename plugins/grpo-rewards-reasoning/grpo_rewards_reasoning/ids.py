"""Reading the ``completion_ids`` column: one row of token ids, or ``None`` for a cell that is not one."""

from __future__ import annotations

from typing import Any


def token_ids(cell: Any) -> list[int] | None:
    """The token ids in one ``completion_ids`` cell (a list, tuple, array or tensor of integers), else ``None``."""
    if hasattr(cell, "tolist") and not isinstance(cell, (str, bytes)):
        cell = cell.tolist()
    if not isinstance(cell, (list, tuple)):
        return None
    if not all(isinstance(i, int) and not isinstance(i, bool) for i in cell):
        return None
    return list(cell)


def id_rows(columns: dict[str, Any], n: int) -> list[list[int] | None] | None:
    """The batch's ``completion_ids`` as rows (``None`` where a cell is not token ids), or ``None`` when absent."""
    ids = columns.get("completion_ids")
    if ids is None:
        return None
    if len(ids) != n:
        raise ValueError(f"{n} completions but {len(ids)} rows of completion_ids")
    return [token_ids(cell) for cell in ids]
