"""``grpo demo``: the embedded demo from the command line (see :mod:`grpo_core.demo.run`); a plugin of its own
(entry point ``builtin_demo_cli``) adding the command through ``grpo_register_commands``, as any third party does."""

from __future__ import annotations

import argparse
from typing import Any

from grpo_rewards.hookspecs import hookimpl


@hookimpl
def grpo_register_commands(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "demo", help="train a tiny model on arithmetic with GRPO, on the CPU, nothing downloaded (~2-5 min)"
    )
    p.add_argument("--config", help="run config to use instead of the embedded examples/quickstart.toml")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override a config value, e.g. --set grpo.max_steps=50")
    p.add_argument("--output-dir", help="run folder (default: runs/quickstart)")
    p.add_argument("--overwrite", action="store_true", help="replace an earlier demo run in the run folder")
    p.add_argument("--threads", type=int, default=1,
                   help="torch CPU threads (default 1: for a model this small one thread is fastest)")
    p.set_defaults(func=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    from grpo_core.demo.run import run_demo  # torch: loaded when the command runs

    result = run_demo(config_path=args.config, overrides=args.overrides, output_dir=args.output_dir,
                      threads=args.threads, overwrite=args.overwrite)
    return 130 if result.get("interrupted") else 0
