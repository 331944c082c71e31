"""Score a JSONL file of completions with a composed reward (``grpo rewards score``).

Each input row holds ``completion`` (text or a list of chat messages) plus any
dataset columns the rewards read (``answer``, ``tests``, ...); ``prompt`` is passed
as TRL's ``prompts``. Each output row is the input row plus one field per reward
alias and ``total`` (and, with ``--explain``, ``explain``: why each verifier's reward
scored as it did). A malformed row (not JSON, not UTF-8, no ``completion``) is reported by line
number and skipped; a file with no row to score is a :class:`RewardInputError`.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from grpo_rewards.compose import ComposedReward
from grpo_rewards.errors import RewardInputError
from grpo_rewards.files import read_bytes, text_lines


@dataclass
class ScoreSummary:
    scored: int = 0
    skipped: list[str] = field(default_factory=list)
    values: dict[str, list[float | None]] = field(default_factory=dict)


def _row_problem(row: Any) -> str | None:
    if not isinstance(row, dict):
        return f"expected a JSON object, got {type(row).__name__}"
    if "completion" not in row:
        return "missing field 'completion'"
    c = row["completion"]
    if isinstance(c, str):
        return None
    if isinstance(c, list) and all(isinstance(m, dict) and isinstance(m.get("content", ""), (str, list)) for m in c):
        return None
    return "'completion' must be text or a list of chat messages ({'role', 'content'})"


def read_rows(path: str | Path, problems: list[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, row)`` for each well-formed row; malformed ones go to ``problems``.
    A missing, unreadable or binary file raises :class:`RewardInputError` before any row is yielded."""
    data = read_bytes(path, RewardInputError)
    if b"\x00" in data[:65536]:
        raise RewardInputError("a binary file, not JSON lines", file=str(path))
    for number, line, undecodable in text_lines(data):
        if line is None:
            problems.append(f"{path}:{number}: {undecodable}")
            continue
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append(f"{path}:{number}: invalid JSON: {exc.msg} (column {exc.colno})")
            continue
        except RecursionError:
            problems.append(f"{path}:{number}: invalid JSON: nested too deeply")
            continue
        why = _row_problem(row)
        if why:
            problems.append(f"{path}:{number}: {why}")
            continue
        yield number, row


def _columns(rows: list[dict[str, Any]]) -> dict[str, list[Any]]:
    keys = {k for r in rows for k in r if k != "completion"}
    columns = {k: [r.get(k) for r in rows] for k in keys}
    if "prompt" in columns:
        columns["prompts"] = columns.pop("prompt")
    return columns


def score_rows(composed: ComposedReward, rows: list[dict[str, Any]], *, explain: bool = False) -> list[dict[str, Any]]:
    """Score a list of rows; returns each row with one field per alias and ``total`` (and, with ``explain``,
    an ``explain`` field: see :func:`explain_rows`)."""
    if not rows:
        return []
    completions, columns = [r["completion"] for r in rows], _columns(rows)
    scores = composed.score(completions, **columns)
    scored = [{**row, **extra} for row, extra in zip(rows, scores.rows(), strict=True)]
    if explain:
        for row, why in zip(scored, explain_rows(composed, completions, columns), strict=True):
            row["explain"] = why
    return scored


def explain_rows(composed: ComposedReward, completions: list[Any], columns: dict[str, Any]) -> list[dict[str, Any]]:
    """Per row, ``{alias: why}`` for each reward that can say why it scored (a verifier's reward, or any
    reward with an ``explain(completions, **columns)`` method: ``{"status", "answer", "parsed", "reason"}``
    per row, ``None`` where the row did not apply). The rewards are asked again, in this process."""
    out: list[dict[str, Any]] = [{} for _ in completions]
    for entry in composed.entries:
        explainer = getattr(entry.fn.fn, "explain", None)
        if not callable(explainer):
            continue
        try:
            whys = list(explainer(completions, **columns))
        except Exception as exc:  # a diagnosis must not lose the scores: say why there is none
            whys = [{"status": "error", "reason": f"{type(exc).__name__}: {exc}"}] * len(completions)
        for row, why in zip(out, whys, strict=True):
            row[entry.alias] = why
    return out


def score_file(
    composed: ComposedReward,
    input_path: str | Path,
    output: TextIO,
    *,
    batch_size: int = 1024,
    explain: TextIO | None = None,
) -> ScoreSummary:
    """Score ``input_path`` into ``output`` in batches; with ``explain``, each row also gets an ``explain``
    field and one line per reward that can say why it scored (``path:line: alias: status (answer): reason``)
    is written to ``explain``."""
    summary = ScoreSummary(values={a: [] for a in [*composed.aliases, "total"]})
    batch: list[dict[str, Any]] = []
    numbers: list[int] = []

    def flush() -> None:
        for number, row in zip(numbers, score_rows(composed, batch, explain=explain is not None), strict=True):
            output.write(json.dumps(row, ensure_ascii=False) + "\n")
            for key in summary.values:
                summary.values[key].append(row[key])
            if explain is not None:
                for alias, why in row["explain"].items():
                    explain.write(f"{input_path}:{number}: {alias}: {_why_line(why)}\n")
        summary.scored += len(batch)
        batch.clear()
        numbers.clear()

    if batch_size < 1:
        raise RewardInputError(f"must be >= 1, got {batch_size}", file="--batch-size")
    for number, row in read_rows(input_path, summary.skipped):
        batch.append(row)
        numbers.append(number)
        if len(batch) >= batch_size:
            flush()
    flush()
    if not summary.scored:
        skipped = f": all {len(summary.skipped)} rows are malformed (first: {summary.skipped[0]})" if summary.skipped else ""
        raise RewardInputError(f"no rows to score{skipped}", file=str(input_path))
    return summary


def _why_line(why: dict[str, Any] | None) -> str:
    if why is None:
        return "does not apply (no reference)"
    answer = f" ({why['answer']!r})" if why.get("answer") is not None else ""
    reason = f": {why['reason']}" if why.get("reason") else ""
    return f"{why.get('status', '?')}{answer}{reason}"


def describe(values: list[float | None]) -> dict[str, float]:
    present = [v for v in values if v is not None]
    return {
        "mean": statistics.fmean(present) if present else math.nan,
        "std": statistics.pstdev(present) if len(present) > 1 else (0.0 if present else math.nan),
        "none_share": 1 - len(present) / len(values) if values else math.nan,
    }
