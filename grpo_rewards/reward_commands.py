"""Built-in ``grpo`` commands for the reward side: ``plugins`` and ``rewards list|show|check|score``.

Registered through the ``grpo`` entry-point group (``builtin_cli``) like any plugin's commands. ``rich`` is
imported by the commands that print tables, not when the plugin loads (every ``grpo`` run loads it).
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
from typing import Any

from grpo_rewards import hacking
from grpo_rewards.errors import ConfigError, RewardInputError
from grpo_rewards.files import atomic_write, check_output, read_bytes
from grpo_rewards.hookspecs import hookimpl
from grpo_rewards.plugins import get_registry
from grpo_rewards.reward_config import load_rewards, verifier_reward_params
from grpo_rewards.scoring import describe, gap_warnings, score_file
from grpo_rewards.specs import REQUIRED
from grpo_rewards.tables import Column, doc_text, print_table


@hookimpl
def grpo_register_commands(subparsers: Any) -> None:
    p = subparsers.add_parser("plugins", help="list installed plugins and what each registers")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_plugins)

    rewards = subparsers.add_parser("rewards", help="list, inspect and run rewards")
    rsub = rewards.add_subparsers(dest="rewards_command", metavar="SUBCOMMAND", required=True)
    p = rsub.add_parser("list", help="list registered rewards and verifiers")
    p.set_defaults(func=cmd_rewards_list)
    p = rsub.add_parser("show", help="parameters, defaults and an example of one reward")
    p.add_argument("name")
    p.set_defaults(func=cmd_rewards_show)
    p = rsub.add_parser("check", help="try known reward hacks and the metamorphic properties; exit 1 on a hack or a "
                                         "broken property")
    p.add_argument("name")
    p.add_argument("params", nargs="*", metavar="KEY=VALUE", help="reward parameters, values in TOML")
    p.set_defaults(func=lambda a: hacking.main([a.name, *a.params]))
    p = rsub.add_parser("score", help="score a JSONL file of completions with a reward config")
    p.add_argument("config", help="TOML file with [rewards.<alias>] tables")
    p.add_argument("--input", "-i", required=True, help="JSONL rows with 'completion' and dataset columns")
    p.add_argument("--output", "-o", help="JSONL output, written when complete (default: stdout); never the input")
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--explain", action="store_true",
                   help="say why each verifier's reward scored each row (an `explain` field in the output, "
                        "and one line per row and reward on stderr)")
    p.add_argument("--fail-on-error", action="store_true",
                   help="exit 1 when any reward raised on any row (the output is still written)")
    p.set_defaults(func=cmd_rewards_score)


def cmd_plugins(args: argparse.Namespace) -> int:
    registry = get_registry()
    if args.json:
        print(json.dumps([p.__dict__ for p in registry.plugins], indent=2))
        return 0
    from rich.console import Console  # lazy: see the module docs
    from rich.text import Text

    rows = []
    for p in registry.plugins:
        what: str | Text = "; ".join(f"{kind}: {', '.join(names)}" for kind, names in p.registers.items())
        if not what:
            what = ", ".join(h for h in p.hooks if not h.startswith("grpo_register_")) or ", ".join(p.hooks)
        if p.error:
            what = Text(f"FAILED: {p.error}", style="red")
        rows.append([p.name, p.distribution, p.version, what])
    columns = [Column("plugin", key=True), Column("distribution", key=True), Column("version"), Column("registers")]
    print_table(Console(), "grpo plugins", columns, rows)
    for problem in registry.problems:
        print(f"warning: {problem}", file=sys.stderr)
    return 0


def cmd_rewards_list(args: argparse.Namespace) -> int:
    from rich.console import Console  # lazy: see the module docs

    registry = get_registry()
    rows = [[name, spec.plugin, doc_text(spec.summary)] for name, spec in sorted(registry.rewards.items())]
    rows += [[f"verify:{name}", spec.plugin, doc_text(spec.summary)] for name, spec in sorted(registry.verifiers.items())]
    columns = [Column("name", key=True), Column("plugin"), Column("description", label=False)]
    print_table(Console(), 'rewards (use = NAME) and verifiers (use = "verify:NAME")', columns, rows)
    return 0


def cmd_rewards_show(args: argparse.Namespace) -> int:

    registry = get_registry()
    name = args.name.removeprefix("verify:")
    spec = registry.verifier(name) if args.name.startswith("verify:") else registry.reward(name)
    print(f"{args.name}  (plugin {spec.plugin})")
    doc = inspect.getdoc(spec.factory) or spec.summary
    print()
    print(doc_text(doc))
    print("\nparameters:")
    for p in spec.params.values():
        default = "(required)" if p.default is REQUIRED else f"= {p.default!r}"
        print(f"  {p.name}: {p.annotation} {default}")
    if args.name.startswith("verify:"):
        print("\nkeys of the reward around the verifier (use = \"verify:...\"):")
        for p in verifier_reward_params(spec).values():
            print(f"  {p.name}: {p.annotation} = {p.default!r}{f'  ({doc_text(p.doc)})' if p.doc else ''}")
        print("  weight, on_error, timeout, max_consecutive_failures: as for any reward")
    if getattr(spec, "columns", ()):
        print(f"\ndataset columns read: {', '.join(spec.columns)}")
    if spec.example:
        print("\nexample:\n" + spec.example.strip("\n"))
    return 0


def cmd_rewards_score(args: argparse.Namespace) -> int:
    from rich.console import Console  # lazy: see the module docs

    if args.batch_size < 1:
        raise ConfigError(f"must be >= 1, got {args.batch_size}", file="--batch-size")
    composed = load_rewards(args.config)
    read_bytes(args.input, RewardInputError)  # missing, a folder, unreadable: before any output is touched
    explain = sys.stderr if getattr(args, "explain", False) else None
    if args.output:  # written to a temporary file and renamed when complete: a failure leaves the old file
        out = check_output(args.output, [args.input, args.config], RewardInputError)
        with atomic_write(out, error=RewardInputError, label="--output") as fh:
            summary = score_file(composed, args.input, fh, batch_size=args.batch_size, explain=explain)
    else:
        summary = score_file(composed, args.input, sys.stdout, batch_size=args.batch_size, explain=explain)
    for problem in summary.skipped:
        print(f"skipped {problem}", file=sys.stderr)
    for line in gap_warnings(summary, args.input):
        print(f"warning: {line}", file=sys.stderr)
    rows = []
    for entry in composed.entries:
        d = describe(summary.values[entry.alias])
        st = entry.fn.stats
        rows.append([entry.alias, entry.use, f"{entry.weight:g}", f"{d['mean']:.4f}", f"{d['std']:.4f}",
                     f"{d['none_share']:.1%}", str(st.failures), f"{st.seconds:.3f}"])
    d = describe(summary.values["total"])
    rows.append(["total", "", "", f"{d['mean']:.4f}", f"{d['std']:.4f}", f"{d['none_share']:.1%}", "", ""])
    columns = [Column("reward", key=True), Column("use", key=True),
               *(Column(h, justify="right") for h in ("weight", "mean", "std", "None", "failures", "time (s)"))]
    print_table(Console(stderr=args.output is None), f"{summary.scored} rows scored, {len(summary.skipped)} skipped",
                columns, rows)
    failed = [e for e in composed.entries if e.fn.stats.failed_rows]
    if getattr(args, "fail_on_error", False) and failed:
        for e in failed:
            print(f"error: reward {e.alias!r} ({e.use}) failed on {e.fn.stats.failed_rows} row(s) "
                  f"(last: {e.fn.stats.last_failure})", file=sys.stderr)
        return 1
    return 0
