"""What a run shows on its console while it trains: one readable place, whatever stdout is.

On a terminal (``Console.is_terminal``): a live display of three lines, legible at 80 columns::

    GRPO ━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━   3/10  0:00:12 elapsed  0:00:28 left
    step 4: generating 8 prompts x 4 ... 0:00:05
    reward=0.5 kl=0.0012 length=42 step_time=1.2s tokens/s=310

the bar (a fixed-width first line, never squeezed by the numbers), the step in progress and what it is doing
with the time it has taken so far (``phase``: generating, scoring, updating, evaluating), and the last logged
step's numbers, folded onto more lines when the terminal is narrow.

Elsewhere (a pipe, a file, a cluster job's log, ``nohup``): no live display; one plain line per logged step,
written and flushed at once::

    step 3/10  reward=0.5  kl=0.0012  length=42  step_time=1.2s  tokens/s=310  elapsed=0:00:12  left=0:00:28

``console_print`` prints anything else (the samples) above the live display, or plainly.
"""

from __future__ import annotations

import sys
import time
from datetime import timedelta
from typing import Any

# shown after the bar and in each plain line when present, in this order, under these short names
SHOWN = (("reward/mean", "reward"), ("reward", "reward"), ("eval/reward/mean", "eval_reward"), ("kl", "kl"),
         ("completion_length/mean", "length"), ("step_time", "step_time"), ("tokens_per_s", "tokens/s"))


def _clock(seconds: float) -> str:
    return str(timedelta(seconds=int(max(0.0, seconds))))


def format_metrics(metrics: dict[str, Any]) -> str:
    """``reward=0.5  kl=0.0012 ...``: the numbers a person watches, from a step's metrics (missing ones left out)."""
    parts, seen = [], set()
    for key, name in SHOWN:
        value = metrics.get(key)
        if name in seen or not isinstance(value, (int, float)) or isinstance(value, bool):
            continue
        seen.add(name)
        text = f"{value:.3g}s" if name == "step_time" else f"{value:.4g}"
        parts.append(f"{name}={text}")
    return "  ".join(parts)


class ConsoleProgress:
    """The run's console (see the module docs). ``console``: a rich Console (default: stdout's)."""

    def __init__(self, total_steps: int | None, start_step: int = 0, console: Any = None):
        from rich.console import Console

        self.console = console if console is not None else Console(file=sys.stdout)
        self.total = total_steps
        self.start_step = self.step = start_step
        self.started = time.monotonic()
        self.info = ""
        self.phase_text = ""
        self.phase_started = self.started
        self.live: Any = None
        if self.console.is_terminal:
            from rich.live import Live

            self.live = Live(self, console=self.console, refresh_per_second=4, transient=False)
            self.live.start()

    # ---- what is shown

    def _left(self) -> float | None:
        done = self.step - self.start_step
        if not self.total or done <= 0:
            return None
        return (time.monotonic() - self.started) / done * max(0, self.total - self.step)

    def bar_line(self, width: int) -> Any:
        from rich.progress_bar import ProgressBar
        from rich.table import Table

        left = self._left()
        count = f"{self.step}/{self.total}" if self.total else str(self.step)
        elapsed = _clock(time.monotonic() - self.started)
        # the times as long as the width allows: words, then bare clocks, then none; the bar takes what is left
        fits = [f"{elapsed} elapsed" + (f"  {_clock(left)} left" if left is not None else ""),
                elapsed + (f"<{_clock(left)}" if left is not None else ""), ""]
        times = next((t for t in fits if 4 + len(count) + len(t) + 3 + 10 <= width), "")
        bar = max(5, min(40, width - 4 - len(count) - len(times) - 3))
        grid = Table.grid(padding=(0, 1))
        for _ in range(4 if times else 3):
            grid.add_column(no_wrap=True)
        cells = ["[bold]GRPO[/bold]", ProgressBar(total=self.total or None, completed=self.step, width=bar), count]
        grid.add_row(*cells, *([times] if times else []))
        return grid

    def __rich_console__(self, console: Any, options: Any) -> Any:
        from rich.text import Text

        yield self.bar_line(options.max_width)
        if self.phase_text:
            yield Text(f"{self.phase_text} ... {_clock(time.monotonic() - self.phase_started)}", overflow="fold")
        if self.info:
            yield Text(self.info, overflow="fold")

    # ---- what the trainer tells it

    def phase(self, text: str) -> None:
        """What the step in progress is doing now (``""``: nothing); shown with its running time on a terminal."""
        self.phase_text, self.phase_started = text, time.monotonic()
        if self.live is not None:
            self.live.refresh()

    def update(self, step: int, metrics: dict[str, Any], logged: bool) -> None:
        """Step ``step`` is done with ``metrics``; ``logged``: it is a logging step (a plain line is printed)."""
        self.step, self.info, self.phase_text = step, format_metrics(metrics), ""
        if self.live is not None:
            self.live.refresh()
        elif logged:
            left = self._left()
            count = f"{step}/{self.total}" if self.total else str(step)
            line = f"step {count}  {self.info}  elapsed={_clock(time.monotonic() - self.started)}"
            if left is not None:
                line += f"  left={_clock(left)}"
            self.console.file.write(line + "\n")
            self.console.file.flush()

    def print(self, *objects: Any) -> None:
        self.console.print(*objects)

    def stop(self) -> None:
        if self.live is not None:
            self.phase_text = ""
            self.live.stop()
            self.live = None
