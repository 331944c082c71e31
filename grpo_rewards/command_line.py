"""The ``grpo`` command line: a thin argparse shell whose sub-commands come from plugins.

Every command (ours included) is added through the ``grpo_register_commands`` hook,
so a plugin can add ``grpo <its-command>`` the same way. This is the one place errors are
printed: bad input (any :class:`~grpo_rewards.errors.UserError`, a :class:`PluginError`) prints
one ``file:line: key: what is wrong`` line per problem and exits with status 2; anything
else is a bug, printed as one line naming where it was raised (the innermost frame of the project's code,
else of the caller's: ``at grpo_core/trainer.py:651 in _accumulate``, so a bug seen once in a log can be
found) with status 1; ``--debug`` shows the traceback. A plugin
that fails to load is a one-line warning with its file:line; ``--debug`` prints its traceback.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import logging
import os
import platform
import sys
import sysconfig
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
        print(f"internal error: {type(exc).__name__}: {text[0] if text else ''}{raised_at(exc)} "
              "(a bug: please report it; run again with --debug for the traceback)", file=sys.stderr)
        return 1


_PROJECT = ("grpo_core", "grpo_rewards")
_LIBRARIES = ("site-packages", "dist-packages")


def _project_frame(path: str) -> bool:
    """The project's own code, or code that is neither the standard library nor an installed library."""
    parts = os.path.normpath(path).split(os.sep)
    if any(name in parts for name in _PROJECT):
        return True
    stdlib = os.path.normpath(sysconfig.get_paths()["stdlib"])
    return not any(name in parts for name in _LIBRARIES) and not path.startswith(stdlib) and not path.startswith("<")


def _short(path: str) -> str:
    """``path`` from the import root it was found under (``grpo_core/trainer.py``), else as it is."""
    roots = sorted((os.path.abspath(r or os.getcwd()) for r in sys.path), key=len, reverse=True)
    for root in roots:
        if path.startswith(root + os.sep):
            return os.path.relpath(path, root)
    return path


def raised_at(exc: BaseException) -> str:
    """`` at FILE:LINE in FUNCTION``: the innermost frame of ``exc``'s traceback in the project's code (else the
    innermost frame); empty without a traceback."""
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if _project_frame(f.filename)]
    if not frames:
        return ""
    frame = (ours or frames)[-1]
    return f" at {_short(frame.filename)}:{frame.lineno} in {frame.name}"


if __name__ == "__main__":
    raise SystemExit(main())
