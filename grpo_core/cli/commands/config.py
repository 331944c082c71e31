"""``grpo config validate CONFIG [--set k=v]... [--print] [--data]``: a run config checked without running it
and without the network (the checks ``grpo train`` makes, :func:`grpo_core.cli.checks.run_checks`; an
earlier run in the run folder is a warning here), then its one-line summary and the step plan this machine would
train it by (grpo_core.policy.step_plan; when the model's config is local); exit 0, or 2 with one line per
problem.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from grpo_core.cli.argument_types import add_overrides
from grpo_core.cli.checks import run_checks, summary
from grpo_core.config import load_config


def add_parser(subparsers: Any) -> None:
    """Add ``grpo config`` and its subcommand ``validate`` to the ``grpo`` command's subparsers."""
    config = subparsers.add_parser("config", help="check run configs")
    csub = config.add_subparsers(dest="config_command", metavar="SUBCOMMAND", required=True)
    p = csub.add_parser("validate", help="check a run config without running it (no network)")
    p.add_argument("config")
    add_overrides(p)
    p.add_argument("--print", dest="print_config", action="store_true", help="print the resolved config as JSON")
    p.add_argument("--data", dest="check_data", action="store_true",
                   help="also load rows from the hub or a plugin source (a local file's rows are always checked)")
    p.set_defaults(func=cmd_config_validate)


def _print_plan(cfg: Any) -> None:
    """The step plan for this machine, when the model's config is at hand without the network; else one line."""
    from grpo_core.cli.commands.train import step_plan  # torch: loaded when a plan is printed

    try:
        print(step_plan(cfg, offline=True).table())
    except OSError:
        print(f"step plan: not shown ({cfg.model.name_or_path!r} is not a local folder or in the hub cache; "
              "`grpo train --dry-run` fetches its config)")


def cmd_config_validate(args: argparse.Namespace) -> int:
    cfg = load_config(args.config, args.overrides)
    rows = run_checks(cfg, all_sources=args.check_data, validate=True)
    if rows and args.check_data:
        first = str(rows[0][cfg.data.prompt_field]).replace("\n", " ")
        print(f"data: {len(rows)} rows from {cfg.data.source} [{cfg.data.split}]; columns {', '.join(map(str, rows[0]))}; "
              f"first prompt: {first[:80]!r}")
    print(f"ok: {summary(cfg)}")
    if cfg.trainer.backend == "grpo_core":
        _print_plan(cfg)
    if args.print_config:
        print(json.dumps(cfg.to_dict(), indent=2, default=str))
    return 0

