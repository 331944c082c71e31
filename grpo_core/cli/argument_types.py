"""argparse types and options shared by the trainer's commands: each type refuses a bad value with argparse's
one-line error (exit 2)."""

from __future__ import annotations

import argparse
from typing import Any


def at_least(minimum: int) -> Any:
    """An argparse type: a whole number >= ``minimum`` (argparse prints the one-line error, exit 2)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = minimum - 1
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected a whole number >= {minimum}, got {text!r}")
        return value
    return parse


def add_overrides(p: argparse.ArgumentParser) -> None:
    """``--set SECTION.KEY=VALUE``, repeatable: the overrides of a run config (``grpo train``, ``grpo config
    validate``, ``grpo signal``)."""
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override a config value (TOML syntax, else a bare string); repeatable")
