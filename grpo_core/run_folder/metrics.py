"""Run metrics with no external service: ``metrics.jsonl`` and ``samples.jsonl`` in the run folder, a live
rich progress bar, the curves PNG at the end; the experiment trackers of ``logging.report_to`` too
(grpo_core.outputs.trackers: a named one that cannot start is a ``ConfigError`` before anything is written).

``MetricsLogger(run_dir, logging_cfg, total_steps=..., start_step=..., console=None)``
    ``.log(step, metrics)``        one JSON line ``{"step", "time", **metrics}`` every ``log_every`` steps
                                   (non-finite values become ``null``), and the console moves: the bar on a
                                   terminal, one plain line per logged step elsewhere (grpo_core.run_folder.progress);
    ``.phase(text)``               what the step in progress is doing (generating, updating, ...), on a terminal;
    ``.log_samples(step, rows)``   every ``sample_every`` steps, the first ``num_samples`` rows (prompt,
                                   completion, each reward's score) to ``samples.jsonl`` and the console;
    ``.close()``                   stops the bar, closes the files, draws ``curves.png`` (``plot = true``).
``config`` (the resolved run config as a dict) is written to ``config.json`` and given to the trackers.
A resumed run (``start_step > 0``) first drops the lines of steps after its checkpoint, so the files
read as if the run had never stopped. A fresh run (``start_step == 0``) refuses a folder whose records
are not empty (:class:`~grpo_core.run_folder.checkpoints.RunFolderError`) unless ``overwrite=True``: an earlier run's
records are never truncated by accident.
"""

from __future__ import annotations

import json
import logging
import math
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grpo_core.outputs.trackers import start_trackers
from grpo_core.run_folder.checkpoints import RunFolderError, check_run_dir
from grpo_core.run_folder.layout import CONFIG_FILE, METRICS_FILE, SAMPLES_FILE, read_jsonl
from grpo_core.run_folder.plotting import plot_run
from grpo_core.run_folder.progress import ConsoleProgress
from grpo_rewards.errors import UserError
from grpo_rewards.files import atomic_write

if TYPE_CHECKING:
    from grpo_core.config import LoggingConfig

log = logging.getLogger("grpo.metrics")



def _clean(value: Any) -> Any:
    """JSON-safe: tensors and numpy scalars to Python numbers, NaN/inf to None."""
    if hasattr(value, "item") and getattr(value, "ndim", 0) == 0:
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def truncate_after(path: Path, step: int) -> None:
    """Keep only the records of ``path`` with ``record["step"] <= step`` (atomic rewrite)."""
    if not path.exists():
        return
    kept = [r for r in read_jsonl(path) if isinstance(r.get("step", 0), (int, float)) and r.get("step", 0) <= step]
    with atomic_write(path) as fh:
        fh.write("".join(json.dumps(r) + "\n" for r in kept))


def peak_memory_gb(device: Any = None) -> float:
    """Peak memory of this process in GiB: CUDA peak allocated on a GPU, else the peak resident set size."""
    try:
        import torch

        if torch.cuda.is_available() and (device is None or str(device).startswith("cuda")):
            return torch.cuda.max_memory_allocated(device) / 2**30
    except ImportError:
        pass
    import resource

    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return rss / (2**30 if sys.platform == "darwin" else 2**20)


def held_state_gb(model: Any, optimizer: Any) -> tuple[float, float]:
    """GiB of training state this process holds itself: ``(parameters, optimizer)``. A sharded parameter
    (FSDP2's DTensor) counts its local shard; the optimizer counts its state and any weights of its own (the
    fp32 partitions of DeepSpeed's ZeRO optimizer, wherever they live: offloaded to the CPU too), not the model's.
    What sharding saves per rank, measured rather than estimated."""

    def size(t: Any) -> int:
        local = t.to_local() if hasattr(t, "to_local") else t
        return local.numel() * local.element_size()

    params = {id(p): p for p in model.parameters()}
    inner = getattr(optimizer, "optimizer", optimizer)  # a ZeRO optimizer wraps the one that steps
    own = {id(p): p for group in inner.param_groups for p in group["params"] if id(p) not in params}
    state = [v for per_param in inner.state.values() for v in per_param.values() if hasattr(v, "numel")]
    return (sum(map(size, params.values())) / 2**30,
            (sum(map(size, own.values())) + sum(map(size, state))) / 2**30)


TEXT_KEYS = ("prompt", "completion", "answer")


def render_sample(step: int, index: int, row: dict[str, Any], width: int = 600) -> Any:
    """One sample as a rich panel: its scores in the title, the prompt's end, the completion, the answer."""
    from rich.markup import escape
    from rich.panel import Panel

    scores = "  ".join(f"{k}={v:.3g}" if isinstance(v, (int, float)) and not isinstance(v, bool) else f"{k}={v}"
                       for k, v in row.items() if k not in TEXT_KEYS)
    parts = []
    if "prompt" in row:
        parts.append(f"[dim]prompt:[/dim] {escape(('...' if len(str(row['prompt'])) > 200 else '') + str(row['prompt'])[-200:])}")
    if "completion" in row:
        text = str(row["completion"])
        parts.append(f"[bold]completion:[/bold] {escape(text[:width] + ('...' if len(text) > width else ''))}")
    if "answer" in row:
        parts.append(f"[dim]answer:[/dim] {escape(str(row['answer'])[-120:])}")
    return Panel("\n".join(parts), title=f"step {step} sample {index}: {escape(scores)}", title_align="left")


class MetricsLogger:
    """See the module docs."""

    def __init__(self, run_dir: str | Path, logging_cfg: LoggingConfig, *, total_steps: int | None = None,
                 start_step: int = 0, config: dict[str, Any] | None = None, overwrite: bool = False,
                 console: Any = None):
        self.run_dir = Path(run_dir)
        if start_step == 0 and not overwrite:
            check_run_dir(self.run_dir)
        elif self.run_dir.exists() and not self.run_dir.is_dir():
            raise RunFolderError(f"{self.run_dir} is a file, not a folder", key="logging.output_dir")
        self.run_dir.mkdir(parents=True, exist_ok=True)

        self._trackers = start_trackers(self.run_dir, logging_cfg, config, resume=start_step > 0)  # before any file
        for line in self._trackers.locations():
            print(f"tracker {line}", file=sys.stderr, flush=True)
        self.cfg = logging_cfg
        self.total_steps = total_steps
        self.metrics_path = self.run_dir / METRICS_FILE
        self.samples_path = self.run_dir / SAMPLES_FILE
        if start_step > 0:
            truncate_after(self.metrics_path, start_step)
            truncate_after(self.samples_path, start_step)
            mode = "a"
        else:
            mode = "w"
        if config is not None:  # the resolved run config, for reproducing the run
            with atomic_write(self.run_dir / CONFIG_FILE) as fh:
                fh.write(json.dumps(config, indent=2, default=str) + "\n")
        if mode == "w":  # emptied, then appended to (O_APPEND: each line lands at the end, whoever else wrote)
            for path in (self.metrics_path, self.samples_path):
                path.write_text("", encoding="utf-8")
        self._metrics = open(self.metrics_path, "a", encoding="utf-8")  # noqa: SIM115 (open for the run)
        self._samples = open(self.samples_path, "a", encoding="utf-8")  # noqa: SIM115
        self._closed = False
        self._progress: Any = None
        if logging_cfg.progress:
            self._progress = ConsoleProgress(total_steps, start_step, console)

    def console_print(self, *objects: Any) -> None:
        if self._progress is not None:
            self._progress.print(*objects)

    def phase(self, text: str) -> None:
        """What the step in progress is doing now (shown with its running time on a terminal)."""
        if self._progress is not None:
            self._progress.phase(text)

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        clean = {k: _clean(v) for k, v in metrics.items()}
        logged = step % self.cfg.log_every == 0 or step == self.total_steps
        if logged:
            self._write(self._metrics, json.dumps({"step": step, "time": time.time(), **clean}) + "\n")
            self._trackers.log(step, clean)
        if self._progress is not None:
            self._progress.update(step, clean, logged)

    @staticmethod
    def _write(fh: Any, text: str) -> None:
        """Append ``text`` and flush; a failure (a full disk) names the file."""
        try:
            fh.write(text)
            fh.flush()
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, fh.name) from exc

    def should_sample(self, step: int) -> bool:
        return self.cfg.num_samples > 0 and step % self.cfg.sample_every == 0

    def log_samples(self, step: int, rows: list[dict[str, Any]]) -> None:
        """Write the first ``num_samples`` rows on sampling steps (``should_sample``); other steps: nothing."""
        if not self.should_sample(step):
            return
        rows = rows[: self.cfg.num_samples]
        self._write(self._samples, "".join(json.dumps({"step": step, **_clean(row)}, default=str) + "\n"
                                           for row in rows))
        if self._progress is not None and rows:
            for i, row in enumerate(rows):
                self.console_print(render_sample(step, i, row))

    def close(self) -> Path | None:
        """Finish the run's logs; returns the curves PNG when one was drawn."""
        if self._closed:
            return None
        self._closed = True
        if self._progress is not None:
            self._progress.stop()
        for fh in (self._metrics, self._samples):
            try:
                fh.close()
            except OSError as exc:  # a full disk: what the run was doing when it hit it is what gets reported
                log.warning("could not finish %s: %s", fh.name, exc)
        self._trackers.finish()
        if self.cfg.plot and read_jsonl(self.metrics_path):
            try:
                return plot_run(self.run_dir)
            except (UserError, OSError) as exc:  # nothing numeric logged, or no room: the run itself is fine
                log.warning("no curves drawn: %s", exc)
        return None

    def __enter__(self) -> MetricsLogger:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
