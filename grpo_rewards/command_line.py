"""The ``grpo`` command line: a thin argparse shell whose sub-commands come from plugins.

Every command (ours included) is added through the ``grpo_register_commands`` hook,
so a plugin can add ``grpo <its-command>`` the same way. This is the one place errors are
printed: bad input (any :class:`~grpo_rewards.errors.UserError`, a :class:`PluginError`) prints
one ``file:line: key: what is wrong`` line per problem and exits with status 2; anything
else is a bug, printed as one line (``--debug`` shows the traceback) with status 1. A plugin
that fails to load is a one-line warning with its file:line; ``--debug`` prints its traceback.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import logging
import platform
import sys
import traceback

from grpo_rewards.errors import ServiceError, UserError
from grpo_rewards.extras import MissingExtra
from grpo_rewards.plugins import OWN_DISTRIBUTION, PluginError, get_registry


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="grpo", description="GRPO toolkit: reward plugins and a lean trainer.")
    parser.add_argument("--strict-plugins", action="store_true", help="fail if any plugin cannot be loaded")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser.add_argument("--debug", action="store_true",
                        help="show the traceback of an unexpected error or of a plugin that failed to load")
    parser.add_argument("--version", action="version", version=version_line())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    get_registry().hook.grpo_register_commands(subparsers=sub)
    return parser


def version_line() -> str:
    """``grpo-toolkit 0.1.0 (Python 3.11.7)``: the installed distribution's version."""
    try:
        version = importlib.metadata.version(OWN_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        version = "unknown (not installed)"
    return f"{OWN_DISTRIBUTION} {version} (Python {platform.python_version()})"


def print_plugin_tracebacks() -> None:
    """``--debug``: the full traceback of each plugin that failed to load (its one-line reason is a warning)."""
    for info in get_registry().plugins:
        if info.traceback:
            print(f"traceback of plugin {info.label}:\n{info.traceback}", file=sys.stderr, end="")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    logging.basicConfig(
        level=logging.DEBUG if ("-v" in argv or "--verbose" in argv) else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        if "--strict-plugins" in argv:  # before the parser is built: loading the plugins builds it
            get_registry(reload=True, strict=True)
        parser = build_parser()
        if "--debug" in argv:
            print_plugin_tracebacks()
        args = parser.parse_args(argv)
        if not getattr(args, "func", None):
            parser.print_help()
            return 0
        return int(args.func(args) or 0)
    except UserError as exc:
        for problem in exc.problems:  # ``file:line: key: what``; "error: key: what" when no file is to blame
            print(problem if problem.file else f"error: {problem}", file=sys.stderr)
        return 2
    except (PluginError, MissingExtra) as exc:  # MissingExtra: "... pip install 'grpo-toolkit[math]'"
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ServiceError as exc:  # not bad input, not a bug: a server the run used stopped answering
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a bug, not bad input: one line, the traceback on request
        if "--debug" in argv:
            traceback.print_exc()
        text = str(exc).strip().splitlines()
        print(f"internal error: {type(exc).__name__}: {text[0] if text else ''} "
              "(a bug: please report it; run again with --debug for the traceback)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
