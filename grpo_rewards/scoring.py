"""Score a JSONL file of completions with a composed reward (``grpo rewards score``).

Each input row holds ``completion`` (text or a list of chat messages) plus any
dataset columns the rewards read (``answer``, ``tests``, ...); ``prompt`` (text or chat messages) is
passed as TRL's ``prompts``. Each output row is the input row plus one field per reward
alias and ``total`` (and, with ``--explain``, ``explain``: why each verifier's reward
scored as it did).

The whole file is checked before any row is scored (:func:`check_input`), with the checks training data
gets (:mod:`grpo_rewards.columns`):

* a malformed row (not UTF-8, not JSON, not an object, no ``completion``, a ``prompt`` that is neither
  text nor chat messages, a JSON object or array where a reward reads a text reference) is reported by
  ``file:line`` and skipped; when more than half of the rows (:data:`MAX_BAD_SHARE`) are malformed the
  file is refused (it is not the file meant, or not in this format), as is a file with no row to score;
* a column a reward needs (``answer`` for ``exact_match`` or ``verify:*``, ``verification_info`` for
  ``code_execution``) that no row has (or every row holds ``null`` in) is refused, naming the column and
  the reward: every row would score ``None``; rows that lack it are counted in :attr:`ScoreSummary.gaps`.

Refusals are a :class:`RewardInputError`.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from grpo_rewards.columns import Need, count_gaps, needs, reference_columns, reference_problem
from grpo_rewards.compose import ComposedReward
from grpo_rewards.errors import Problem, RewardInputError
from grpo_rewards.files import json_value, read_bytes, text_lines

MAX_BAD_SHARE = 0.5  # more malformed rows than this share of the non-blank lines: the file is refused
MAX_LISTED = 10  # malformed rows listed when a file is refused


@dataclass
class ScoreSummary:
    scored: int = 0
    skipped: list[str] = field(default_factory=list)
    values: dict[str, list[float | None]] = field(default_factory=dict)
    gaps: dict[str, list[int]] = field(default_factory=dict)  # needed column -> lines of rows without it
    needs: list[Need] = field(default_factory=list)


def _messages_problem(value: Any, key: str) -> str | None:
    if isinstance(value, str):
        return None
    if isinstance(value, list) and all(isinstance(m, dict) and isinstance(m.get("content", ""), (str, list))
                                       for m in value):
        return None
    return f"{key!r} must be text or a list of chat messages ({{'role', 'content'}})"


def _row_problem(row: Any, references: dict[str, list[str]]) -> tuple[str, str] | None:
    """``(key, why)`` when ``row`` cannot be scored, else None."""
    if not isinstance(row, dict):
        return "", f"expected a JSON object, got {type(row).__name__}"
    if "completion" not in row:
        return "", "missing field 'completion'"
    if why := _messages_problem(row["completion"], "completion"):
        return "", why
    if row.get("prompt") is not None and (why := _messages_problem(row["prompt"], "prompt")):
        return "", why
    for column, aliases in references.items():
        if (why := reference_problem(row.get(column))) is not None:
            return column, f"{why} (reward {', '.join(map(repr, aliases))} compares answers with it as text)"
    return None


def _parse(path: str | Path, data: bytes, problems: list[Problem],
           references: dict[str, list[str]]) -> Iterator[tuple[int, dict[str, Any]]]:
    for number, line, undecodable in text_lines(data):
        if line is None:
            problems.append(Problem(str(path), number, "", undecodable))
            continue
        if not line.strip():
            continue
        row, why_not = json_value(line)
        if why_not:
            problems.append(Problem(str(path), number, "", why_not))
            continue
        if why := _row_problem(row, references):
            problems.append(Problem(str(path), number, *why))
            continue
        yield number, row


def _read(path: str | Path) -> bytes:
    data = read_bytes(path, RewardInputError)
    if b"\x00" in data[:65536]:
        raise RewardInputError("a binary file, not JSON lines", file=str(path))
    return data


def _present(row: dict[str, Any]) -> Iterator[str]:
    for key in row:
        if key != "completion":
            yield "prompts" if key == "prompt" else key


def check_input(composed: ComposedReward, path: str | Path) -> ScoreSummary:
    """Check every row of ``path`` against ``composed`` without scoring (module docs); returns a summary
    holding the malformed rows and the rows lacking a needed column. Raises :class:`RewardInputError`."""
    data = _read(path)
    problems: list[Problem] = []
    summary = ScoreSummary(needs=needs(composed))
    present: set[str] = set()
    good = 0
    rows = _parse(path, data, problems, reference_columns(composed))
    for number, row in rows:
        good += 1
        present.update(_present(row))
        count_gaps(summary.needs, [(number, _as_passed(row))], summary.gaps)
    summary.skipped = [str(p) for p in problems]
    if not good:
        skipped = f": all {len(problems)} rows are malformed (first: {problems[0]})" if problems else ""
        raise RewardInputError(f"no rows to score{skipped}", file=str(path))
    if len(problems) > MAX_BAD_SHARE * (len(problems) + good):
        listed = problems[:MAX_LISTED]
        more = [Problem(str(path), None, "", f"... and {len(problems) - len(listed)} more malformed rows")] \
            if len(problems) > len(listed) else []
        raise RewardInputError([
            Problem(str(path), None, "", f"{len(problems)} of {len(problems) + good} rows are malformed (more than "
                                         f"{MAX_BAD_SHARE:.0%}): not scored; is this the file meant?"),
            *listed, *more])
    absent = [n for n in summary.needs if len(summary.gaps.get(n.column, ())) == good]  # absent or null in all
    if absent:
        have = ", ".join(sorted(_shown(c) for c in present)) or "none"

        def why(n: Need) -> str:
            where = "every row holds null in" if n.column in present else "no row has"
            return f"{where} this column, which {n.who()} needs: every row would score None (the rows have: {have})"

        raise RewardInputError([Problem(str(path), None, _shown(n.column), why(n)) for n in absent])
    return summary


def _shown(column: str) -> str:
    """A column as the input file names it (``prompt``, which rewards get as ``prompts``)."""
    return "prompt" if column == "prompts" else column


def _as_passed(row: dict[str, Any]) -> dict[str, Any]:
    return {("prompts" if k == "prompt" else k): v for k, v in row.items()}


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
    """Check ``input_path`` (:func:`check_input`: nothing is written when it is refused), then score it into
    ``output`` in batches; with ``explain``, each row also gets an ``explain`` field and one line per reward
    that can say why it scored (``path:line: alias: status (answer): reason``) is written to ``explain``."""
    if batch_size < 1:
        raise RewardInputError(f"must be >= 1, got {batch_size}", file="--batch-size")
    summary = check_input(composed, input_path)
    summary.values = {a: [] for a in [*composed.aliases, "total"]}
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

    for number, row in _parse(input_path, _read(input_path), [], reference_columns(composed)):
        batch.append(row)
        numbers.append(number)
        if len(batch) >= batch_size:
            flush()
    flush()
    return summary


def gap_warnings(summary: ScoreSummary, path: str | Path) -> list[str]:
    """One line per needed column that some scored rows lack: how many, the first, and who scores them None."""
    lines = []
    for column, missing in summary.gaps.items():
        who = ", ".join(n.who() for n in summary.needs if n.column == column)
        lines.append(f"{path}: {_shown(column)}: {len(missing)} of {summary.scored} rows have no value here "
                     f"(first: line {missing[0]}); {who} scores them None")
    return lines


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
