"""``grpo plot RUN_DIR [--out PNG]``: a run's metric curves drawn to a PNG (:mod:`grpo_core.run_folder.plotting`);
prints the PNG's path.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from grpo_core.run_folder.plotting import plot_run


def add_parser(subparsers: Any) -> None:
    """Add ``grpo plot`` to the ``grpo`` command's subparsers."""
    p = subparsers.add_parser("plot", help="draw a run's metric curves to a PNG")
    p.add_argument("run_dir")
    p.add_argument("--out", help="PNG path (default RUN_DIR/curves.png)")
    p.set_defaults(func=cmd_plot)


def cmd_plot(args: argparse.Namespace) -> int:
    out = plot_run(args.run_dir, args.out, warn=lambda line: print(f"warning: {line}", file=sys.stderr))
    print(out)
    return 0
