"""Value types for ``grpo`` command-line options: a bad value is argparse's one-line usage error (exit 2)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def positive(kind: type[int] | type[float]) -> Callable[[str], int | float]:
    """An argparse ``type=`` accepting only a finite number > 0 of ``kind`` (``int`` or ``float``)."""
    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a{'n integer' if kind is int else ' number'}, "
                                             f"got {text!r}") from None
        if not math.isfinite(value) or value <= 0:
            raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
        return value

    parse.__name__ = f"positive {kind.__name__}"
    return parse
