"""The curves of a run: ``RUN_DIR/metrics.jsonl`` -> ``RUN_DIR/curves.png`` (one panel per metric).

Drawn with matplotlib's Agg canvas on a standalone ``Figure`` (no pyplot, no display, thread-safe);
``grpo plot RUN_DIR`` draws it on demand, ``MetricsLogger.close()`` at the end of a run. The PNG is
written atomically and never over an input: ``--out`` must name a ``.png`` file outside the run's records.
Lines of ``metrics.jsonl`` that are not JSON objects, or whose ``step`` is not a finite number, are skipped
and reported through ``warn`` (``file:line: key: why``). An output that cannot be written (a read-only
place, a full disk) is a one-line :class:`UserError` naming ``--out``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from grpo_core.run_folder.layout import CURVES_FILE, METRICS_FILE, read_jsonl
from grpo_rewards.errors import UserError
from grpo_rewards.files import atomic_write, check_output

PNG = CURVES_FILE
SKIP = {"step", "time", "epoch"}
# panels in this order first (when present), then the rest alphabetically
FIRST = ("reward/mean", "reward/std", "kl", "loss", "clip_ratio/region_mean", "entropy", "completion_length/mean",
         "grad_norm", "learning_rate", "step_time", "tokens_per_s", "peak_memory_gb")
MAX_PANELS = 30


def metric_series(records: list[dict[str, Any]]) -> dict[str, tuple[list[float], list[float]]]:
    """``{name: (steps, values)}`` for every numeric metric (nulls skipped)."""
    series: dict[str, tuple[list[float], list[float]]] = {}
    for r in records:
        for key, value in r.items():
            if key in SKIP or isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                continue
            xs, ys = series.setdefault(key, ([], []))
            step = r.get("step")
            xs.append(step if isinstance(step, (int, float)) and not isinstance(step, bool) else len(xs))
            ys.append(float(value))
    return series


def plot_run(run_dir: str | Path, out: str | Path | None = None,
             warn: Callable[[str], None] | None = None) -> Path:
    """Draw every metric of ``run_dir/metrics.jsonl`` against the step; returns the PNG path. Raises
    :class:`UserError` for a missing run or metrics file, nothing to plot, or an output that cannot be used."""
    run_dir = Path(run_dir)
    metrics = run_dir / METRICS_FILE
    if not run_dir.is_dir():
        raise UserError("not a run folder" if run_dir.exists() else "folder not found", file=str(run_dir))
    if not metrics.is_file():
        raise UserError(f"no {METRICS_FILE}: not a run folder, or the run logged nothing yet", file=str(run_dir))
    out = Path(out) if out else run_dir / PNG
    if out.suffix.lower() != ".png":
        raise UserError(f"{out}: the plot is a PNG; name a .png file", file="--out")
    check_output(out, [metrics, *(p for p in run_dir.iterdir() if p.suffix != ".png")], UserError, label="--out")
    problems: list[str] = []
    numbers: list[int] = []
    records = read_jsonl(metrics, problems, numbers)
    records = [r for r, n in zip(records, numbers, strict=True) if not _bad_step(r, metrics, n, problems)]
    for line in sorted(problems, key=_line_of):
        if warn is not None:
            warn(line)
    series = metric_series(records)
    if not series:
        raise UserError(f"no metrics to plot ({len(records)} records, {len(problems)} bad lines)", file=str(metrics))
    return _draw(series, run_dir.name, out)


def _bad_step(record: dict[str, Any], path: Path, line: int, problems: list[str]) -> bool:
    """A record whose ``step`` is not a finite number is refused (it cannot be placed on the x axis)."""
    step = record.get("step")
    if isinstance(step, (int, float)) and not isinstance(step, bool) and math.isfinite(step):
        return False
    why = "missing" if "step" not in record else f"not a number ({step!r})"
    problems.append(f"{path}:{line}: step: {why}; line skipped")
    return True


def _line_of(problem: str) -> int:
    head = problem.split(": ", 1)[0]
    number = head.rpartition(":")[2]
    return int(number) if number.isdigit() else 0


def _draw(series: dict[str, tuple[list[float], list[float]]], title: str, out: Path) -> Path:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    names = [k for k in FIRST if k in series] + sorted(k for k in series if k not in FIRST)
    names = names[:MAX_PANELS]
    cols = min(3, max(1, len(names)))
    rows = max(1, math.ceil(len(names) / cols))
    fig = Figure(figsize=(4.2 * cols, 2.8 * rows), layout="constrained")
    FigureCanvasAgg(fig)
    for i, name in enumerate(names):
        ax = fig.add_subplot(rows, cols, i + 1)
        xs, ys = series[name]
        ax.plot(xs, ys, lw=1.2, marker="." if len(xs) < 40 else None)
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("step", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    fig.suptitle(title)
    with atomic_write(out, "wb", error=UserError, label="--out") as fh:
        fig.savefig(fh, format="png", dpi=90)
    return out
