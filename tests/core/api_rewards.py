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


async def async_logging_reward(completions: list[Any], log_metric: Any, log_extra: Any, **kwargs: Any) -> list[float]:
    """TRL's async reward with its loggers, run in a worker process."""
    log_metric("mean_chars", sum(len(c) for c in completions) / len(completions))
    log_extra("chars", [len(c) for c in completions])
    return [float(len(c) % 2) for c in completions]
