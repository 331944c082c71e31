"""The curves of a run: ``RUN_DIR/metrics.jsonl`` -> ``RUN_DIR/curves.png`` (one panel per metric).

Drawn with matplotlib's Agg canvas on a standalone ``Figure`` (no pyplot, no display, thread-safe);
``grpo plot RUN_DIR`` draws it on demand, ``MetricsLogger.close()`` at the end of a run.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from grpo_core.metrics import METRICS_FILE, read_jsonl

PNG = "curves.png"
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
            if key in SKIP or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            xs, ys = series.setdefault(key, ([], []))
            xs.append(r.get("step", len(xs)))
            ys.append(float(value))
    return series


def plot_run(run_dir: str | Path, out: str | Path | None = None) -> Path:
    """Draw every metric of ``run_dir/metrics.jsonl`` against the step; returns the PNG path."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    run_dir = Path(run_dir)
    records = read_jsonl(run_dir / METRICS_FILE)
    if not records:
        raise FileNotFoundError(f"{run_dir / METRICS_FILE}: no metrics to plot")
    series = metric_series(records)
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
    fig.suptitle(run_dir.name)
    out = Path(out) if out else run_dir / PNG
    tmp = out.with_name(out.name + ".tmp.png")
    fig.savefig(tmp, dpi=90)
    os.replace(tmp, out)
    return out
