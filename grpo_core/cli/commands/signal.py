"""``grpo signal CONFIG [--set k=v]... [--prompts N] [--show N]``: groups sampled from the run's model and
scored, and a table of which rewards vary within a group (what GRPO can learn from; the work is in
:mod:`grpo_core.reward_signal`); trains nothing. Exit 1 when no reward varies in any group.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from grpo_core.cli.argument_types import add_overrides, at_least
from grpo_core.cli.checks import preflight
from grpo_core.config import load_config
from grpo_core.quiet import quiet_libraries
from grpo_core.reward_signal import measure_signal, no_signal, signal_table


def add_parser(subparsers: Any) -> None:
    """Add ``grpo signal`` to the ``grpo`` command's subparsers."""
    p = subparsers.add_parser("signal", help="sample groups from the run's model and show which rewards vary "
                                             "within a group (what GRPO can learn from); trains nothing")
    p.add_argument("config")
    add_overrides(p)
    p.add_argument("--prompts", type=at_least(1), default=8, metavar="N", help="groups to sample [8]")
    p.add_argument("--show", type=at_least(0), default=0, metavar="N", help="also print the first N completions")
    p.set_defaults(func=cmd_signal)


def cmd_signal(args: argparse.Namespace) -> int:
    """``grpo signal CONFIG``: grpo_core.reward_signal's table; exit 1 when no reward varies in any group."""
    from grpo_core.trainer import Trainer  # torch: loaded when the command runs

    cfg = load_config(args.config, args.overrides)
    quiet_libraries(cfg)
    preflight(cfg, model=True, run_folder=False, outputs=False)  # trains nothing: no tracker, no push
    trainer = Trainer(cfg)
    signals, texts = measure_signal(trainer, args.prompts)
    for text in texts[: args.show]:
        print(f"--- {text!r}")
    print(signal_table(signals, args.prompts, cfg.generation.num_generations))
    flat = no_signal(signals)
    for name in flat:
        if name != "total":
            print(f"warning: {name} took the same value across every group: it gives GRPO nothing to learn "
                  "on this model", file=sys.stderr)
    return 1 if "total" in flat else 0

