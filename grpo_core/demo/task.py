"""The demo's arithmetic task: ``"37+45="`` -> ``"<reasoning>28</reasoning>\\n<answer>82</answer>"``.

The reasoning is the sum written ones digit first, the way one adds by hand (each digit depends
only on the digits to its right, so a tiny model can compute it left to right); the answer is
that number read back in the usual order.

Registered as the dataset source ``demo:arithmetic`` (``[data] source = "demo:arithmetic"``);
the split picks a disjoint, deterministic set of problems (``train``, ``test``, ``warmup``), so
held-out accuracy is measured on problems never trained on. Options after the scheme, e.g.
``demo:arithmetic?max_operand=99&ops=+-&size=4000``.
"""

from __future__ import annotations

import random
from typing import Any

DEFAULTS: dict[str, Any] = {"max_operand": 99, "ops": "+", "size": 4000}
SPLIT_SEEDS = {"train": 1, "test": 2, "warmup": 3, "validation": 4}


def problem(a: int, op: str, b: int) -> dict[str, Any]:
    value = a + b if op == "+" else a - b
    return {"prompt": f"{a}{op}{b}=", "answer": str(value), "a": a, "b": b, "op": op}


def completion(row: dict[str, Any]) -> str:
    """The target completion of a row: the digits ones-first as the reasoning, then the answer in tags."""
    return f"<reasoning>{row['answer'][::-1]}</reasoning>\n<answer>{row['answer']}</answer>"


def _key(row: dict[str, Any]) -> tuple[int, str, int]:
    return row["a"], row["op"], row["b"]


def all_problems(max_operand: int, ops: str) -> list[dict[str, Any]]:
    out = []
    for op in ops:
        for a in range(max_operand + 1):
            for b in range(max_operand + 1):
                if op == "-" and b > a:
                    continue  # answers stay non-negative integers
                out.append(problem(a, op, b))
    return out


def make_split(split: str, *, max_operand: int = 99, ops: str = "+", size: int = 4000) -> list[dict[str, Any]]:
    """``size`` problems of ``split``; the problem space is partitioned so that splits never overlap."""
    if split not in SPLIT_SEEDS:
        raise ValueError(f"demo:arithmetic has splits {', '.join(SPLIT_SEEDS)}, not {split!r}")
    if not ops or set(ops) - {"+", "-"}:
        raise ValueError(f"demo:arithmetic ops must use '+' and '-', got {ops!r}")
    pool = all_problems(max_operand, ops)
    random.Random(0).shuffle(pool)
    parts = {name: pool[i :: len(SPLIT_SEEDS)] for i, name in enumerate(SPLIT_SEEDS)}
    rows = parts[split]
    random.Random(SPLIT_SEEDS[split]).shuffle(rows)
    return rows[:size]


def parse_source(source: str) -> dict[str, Any]:
    """Options of ``demo:arithmetic?key=value&...`` merged over :data:`DEFAULTS`."""
    _, _, rest = source.partition(":")
    name, _, query = rest.partition("?")
    if name != "arithmetic":
        raise ValueError(f"unknown demo dataset {name!r}; the demo has 'demo:arithmetic' and 'demo:multiplication'")
    options = dict(DEFAULTS)
    for item in filter(None, query.split("&")):  # by hand: '+' is an operator here, not a space
        key, eq, value = item.partition("=")
        if key not in DEFAULTS or not eq:
            raise ValueError(f"demo:arithmetic: bad option {item!r} (options: {', '.join(DEFAULTS)}, as key=value)")
        try:
            options[key] = value if key == "ops" else int(value)
        except ValueError:
            raise ValueError(f"demo:arithmetic: option {key!r} must be an integer, got {value!r}") from None
    return options


def load_source(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Loader of ``demo:arithmetic`` (``spec`` is the ``[data]`` table plus ``split``)."""
    return make_split(spec.get("split") or "train", **parse_source(spec["source"]))
