"""Module-level rewards for the Python API tests: they pickle, so each runs in its own worker process, and
this module imports nothing heavy, so a worker restarted after a timeout starts at once."""

from __future__ import annotations

import time
from typing import Any


def length_reward(completions: list[Any], **kwargs: Any) -> list[float]:
    return [-0.1 * len(c) for c in completions]


def sleepy_reward(completions: list[Any], **kwargs: Any) -> list[float]:
    time.sleep(30)
    return [0.0] * len(completions)
