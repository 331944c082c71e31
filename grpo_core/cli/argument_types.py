"""argparse types shared by the trainer's commands: each refuses a bad value with argparse's one-line error
(exit 2)."""

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
