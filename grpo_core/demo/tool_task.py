"""The tool example's task: products too large for the tiny model to work out, which the calculator gives exactly.

``"437*58"`` -> ``"25346"``. With the ``calculator`` tool the model writes a call, reads the tool's answer and
writes it back (``<answer>25346</answer>``); without it, it must write the product at once.

Registered as the dataset source ``demo:multiplication`` (``[data] source = "demo:multiplication"``), options
``?max_a=999&max_b=99&size=4000`` (both factors from 10); the splits (``train``, ``test``, ``warmup``,
``validation``) partition the problems as ``demo:arithmetic``'s do, so held-out rows are never trained on.

:func:`warmup_expressions` is what the tool warm-up shows the model calling: the row's own product for a share
``correct_rate`` of the rows, a slip (the last digit one more) for the rest. The warm-up teaches the call format
and reading the answer back, and shows the right call only that often: what GRPO learns is making the right call.
"""

from __future__ import annotations

import random
from typing import Any

from grpo_core.demo.task import SPLIT_SEEDS

DEFAULTS: dict[str, int] = {"max_a": 999, "max_b": 99, "size": 4000}
LOW = 10  # both factors start here: no one-digit shortcuts


def problem(a: int, b: int) -> dict[str, Any]:
    return {"prompt": f"{a}*{b}", "answer": str(a * b), "a": a, "b": b}


def make_split(split: str, *, max_a: int = 999, max_b: int = 99, size: int = 4000) -> list[dict[str, Any]]:
    """``size`` problems of ``split``; the problem space is partitioned so that splits never overlap."""
    if split not in SPLIT_SEEDS:
        raise ValueError(f"demo:multiplication has splits {', '.join(SPLIT_SEEDS)}, not {split!r}")
    if max_a < LOW or max_b < LOW:
        raise ValueError(f"demo:multiplication: max_a and max_b must be at least {LOW}")
    pool = [(a, b) for a in range(LOW, max_a + 1) for b in range(LOW, max_b + 1)]
    random.Random(0).shuffle(pool)
    index = list(SPLIT_SEEDS).index(split)
    pairs = pool[index :: len(SPLIT_SEEDS)]
    random.Random(SPLIT_SEEDS[split]).shuffle(pairs)
    return [problem(a, b) for a, b in pairs[:size]]


def parse_source(source: str) -> dict[str, int]:
    """Options of ``demo:multiplication?key=value&...`` merged over :data:`DEFAULTS`."""
    query = source.partition("?")[2]
    options = dict(DEFAULTS)
    for item in filter(None, query.split("&")):
        key, eq, value = item.partition("=")
        if key not in DEFAULTS or not eq:
            raise ValueError(f"demo:multiplication: bad option {item!r} (options: {', '.join(DEFAULTS)}, as key=value)")
        try:
            options[key] = int(value)
        except ValueError:
            raise ValueError(f"demo:multiplication: option {key!r} must be an integer, got {value!r}") from None
    return options


def load_source(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Loader of ``demo:multiplication`` (``spec`` is the ``[data]`` table plus ``split``)."""
    return make_split(spec.get("split") or "train", **parse_source(spec["source"]))


def warmup_expressions(rows: list[dict[str, Any]], correct_rate: float, seed: int) -> list[str]:
    """The expression the warm-up calls the calculator with for each row: the row's own for a share
    ``correct_rate`` of them (drawn with ``seed``), and for the rest the row's with a slip, its last digit one
    more (9 becomes 0): another problem, whose product the tool gives exactly, and wrongly for this row. The slip
    is the same every time, so it is the warm model's habit, greedy or sampled: GRPO has to unlearn it."""
    rng = random.Random(seed)
    out = []
    for row in rows:
        expression = row["prompt"]
        if rng.random() >= correct_rate:
            expression = expression[:-1] + str((int(expression[-1]) + 1) % 10)
        out.append(expression)
    return out
