"""Prompts from rows, and the prompt-length rule (``[data] max_prompt_length``, ``overlong_prompts``).

* :class:`Prompts`: the formatted prompt of each row, made when asked for (``prompts[i]``; a slice is a list),
  so a run never holds every prompt.
* :func:`fit_rows`: the rows a run trains on. Map-style rows (a file, the hub): every prompt is formatted and
  tokenized once, 1024 at a time, keeping only its length (4 bytes a row); over-long ones are dropped with a
  warning, refused or kept for left truncation, exactly as :func:`fit_prompts` does for a list. Streamed rows
  are checked when they are read (:class:`grpo_core.row_stream.StreamedRows`): ``drop`` skips them (counted,
  warned about once), ``error`` stops the run at the first one, ``truncate`` keeps them (warned about once).
* :func:`fit_prompts`: the same rule over prompts and rows in lists (held-out rows, the TRL backend).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from grpo_core.data import DataError, format_prompt
from grpo_core.lazy_rows import Rows
from grpo_core.row_stream import StreamedRows

BATCH = 1024  # prompts tokenized at once when measuring


class Prompts(Sequence[str]):
    """The prompt text of each of ``rows``, formatted when read."""

    def __init__(self, rows: Any, data_cfg: Any, tokenizer: Any, tools: list[dict[str, Any]] | None = None) -> None:
        self.rows, self.cfg, self.tokenizer, self.tools = rows, data_cfg, tokenizer, tools

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        return format_prompt(self.rows[i], self.cfg, self.tokenizer, self.tools)

    def __iter__(self) -> Iterator[str]:
        for row in self.rows:
            yield format_prompt(row, self.cfg, self.tokenizer, self.tools)


def _kept(lengths: np.ndarray, limit: int, policy: str, where: str) -> np.ndarray | None:
    """The positions of the prompts kept under ``policy`` (None: all), warning or refusing as it says."""
    over = np.flatnonzero(lengths > limit)
    if not len(over):
        return None
    what = (f"data.max_prompt_length: {len(over)} of {len(lengths)} {where} prompts are longer than {limit} tokens "
            f"(longest {int(lengths.max())}; first: row {int(over[0])})")
    if policy == "error":
        raise DataError(f"{what}; raise max_prompt_length, or set data.overlong_prompts = \"drop\" or \"truncate\"")
    if policy == "truncate":
        warnings.warn(f"{what}; their beginnings (the system turn first) are cut off", stacklevel=3)
        return None
    if len(over) == len(lengths):
        raise DataError(f"{what}: none would be left to train on")
    warnings.warn(f"{what}; dropped", stacklevel=3)
    return np.flatnonzero(lengths <= limit)


def _lengths(prompts: list[str], tokenizer: Any, add_special_tokens: bool) -> list[int]:
    return [len(ids) for ids in tokenizer(prompts, add_special_tokens=add_special_tokens)["input_ids"]]


def fit_prompts(prompts: list[str], rows: list[dict[str, Any]], tokenizer: Any, limit: int | None, policy: str,
                add_special_tokens: bool, where: str) -> tuple[list[str], list[dict[str, Any]]]:
    """Prompts (and their rows) over ``limit`` tokens: dropped with a warning, refused (``ValueError``) or
    kept for left truncation (with a warning), as ``policy`` says (a refusal is a ``DataError``, a ValueError)."""
    if not limit or not prompts:
        return prompts, rows
    keep = _kept(np.asarray(_lengths(prompts, tokenizer, add_special_tokens)), limit, policy, where)
    if keep is None:
        return prompts, rows
    return [prompts[i] for i in keep], [rows[i] for i in keep]


def _stream_rule(rows: StreamedRows, data_cfg: Any, tokenizer: Any, special: bool,
                 tools: list[dict[str, Any]] | None) -> None:
    limit, policy, told = data_cfg.max_prompt_length, data_cfg.overlong_prompts, []

    def keep(row: dict[str, Any]) -> bool:
        n = _lengths([format_prompt(row, data_cfg, tokenizer, tools)], tokenizer, special)[0]
        if n <= limit:
            return True
        what = f"data.max_prompt_length: a streamed training prompt is longer than {limit} tokens ({n})"
        if policy == "error":
            raise DataError(f"{what}; raise max_prompt_length, or set data.overlong_prompts = \"drop\" or \"truncate\"")
        if not told:
            told.append(True)
            warnings.warn(f"{what}; such prompts are {'cut from the left' if policy == 'truncate' else 'dropped'} "
                          "as they are read (this warning is not repeated)", stacklevel=2)
        return policy == "truncate"

    rows.keep = keep


def fit_rows(rows: Any, data_cfg: Any, tokenizer: Any, special: bool, where: str,
             tools: list[dict[str, Any]] | None = None) -> tuple[Any, Prompts]:
    """The rows a run trains on under the prompt-length rule (see the module docs), and their :class:`Prompts`.
    ``special``: whether the generation backend adds special tokens (no chat template); ``tools``: the schemas
    the chat template renders into each prompt."""
    limit = data_cfg.max_prompt_length
    if isinstance(rows, StreamedRows):
        if limit:
            _stream_rule(rows, data_cfg, tokenizer, special, tools)
        return rows, Prompts(rows, data_cfg, tokenizer, tools)
    if limit and len(rows):
        lengths, batch = np.zeros(len(rows), dtype=np.int32), []
        for i, row in enumerate(rows):
            batch.append(format_prompt(row, data_cfg, tokenizer, tools))
            if len(batch) == BATCH or i == len(rows) - 1:
                lengths[i + 1 - len(batch): i + 1] = _lengths(batch, tokenizer, special)
                batch = []
        keep = _kept(lengths, limit, data_cfg.overlong_prompts, where)
        if keep is not None:
            rows = rows.pick(keep) if isinstance(rows, Rows) else [rows[i] for i in keep]
    return rows, Prompts(rows, data_cfg, tokenizer, tools)
