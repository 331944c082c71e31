"""What a judge is asked, and how its verdict becomes a score: :class:`Rubric`.

A rubric is one ``question`` or a list of ``criteria`` (each a ``name``, a ``description`` and a ``weight``), and a
``scale`` (``[low, high]``, default 0 to 10) the judge answers on. The judge returns ``{"score": n}`` for a question
or ``{"scores": {"<criterion>": n, ...}}`` for criteria; the reward is the weighted mean of the scores mapped to
``[0, 1]`` (``low`` -> 0, ``high`` -> 1). A verdict that misses a criterion or leaves the scale is no verdict.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Criterion:
    name: str
    description: str
    weight: float = 1.0


@dataclass(frozen=True)
class Rubric:
    question: str | None
    criteria: tuple[Criterion, ...]
    scale: tuple[float, float] = (0.0, 10.0)

    def text(self) -> str:
        """The rubric as the judge's prompt states it."""
        low, high = (f"{v:g}" for v in self.scale)
        if self.question is not None:
            return f"{self.question}\nAnswer with a score from {low} (worst) to {high} (best)."
        lines = [f"- {c.name} (weight {c.weight:g}): {c.description}" for c in self.criteria]
        return f"Score each criterion from {low} (worst) to {high} (best):\n" + "\n".join(lines)

    def output_format(self) -> str:
        """The JSON the judge must end its answer with."""
        if self.question is not None:
            return 'End your answer with one JSON object: {"score": <number>}'
        names = ", ".join(f'"{c.name}": <number>' for c in self.criteria)
        return f'End your answer with one JSON object: {{"scores": {{{names}}}}}'

    def json_schema(self) -> dict[str, Any]:
        """The verdict's JSON schema (for servers with structured outputs)."""
        number = {"type": "number", "minimum": self.scale[0], "maximum": self.scale[1]}
        if self.question is not None:
            return {"type": "object", "properties": {"score": number}, "required": ["score"]}
        inner = {"type": "object", "properties": {c.name: number for c in self.criteria},
                 "required": [c.name for c in self.criteria]}
        return {"type": "object", "properties": {"scores": inner}, "required": ["scores"]}

    def fingerprint(self) -> str:
        return json.dumps([self.question, [(c.name, c.description, c.weight) for c in self.criteria],
                           list(self.scale)], ensure_ascii=False)

    def _in_scale(self, value: Any) -> float | None:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return None
        low, high = self.scale
        return float(value) if low <= value <= high else None

    def score(self, verdict: dict[str, Any]) -> float | None:
        """The verdict mapped to ``[0, 1]``, or ``None`` when it is not a verdict of this rubric."""
        low, high = self.scale
        if self.question is not None:
            value = self._in_scale(verdict.get("score"))
            return None if value is None else (value - low) / (high - low)
        scores = verdict.get("scores")
        if not isinstance(scores, dict):
            return None
        total = 0.0
        for c in self.criteria:
            value = self._in_scale(scores.get(c.name))
            if value is None:
                return None
            total += c.weight * (value - low) / (high - low)
        return total / sum(c.weight for c in self.criteria)


def make_rubric(question: str | None, criteria: list[Any] | None, scale: list[float] | None) -> Rubric:
    """A :class:`Rubric` from a reward's parameters; ``ValueError`` saying what is wrong."""
    if (question is None) == (not criteria):
        raise ValueError("give the judge either a `question` or a list of `criteria` (one of them)")
    low, high = (0.0, 10.0) if scale is None else (tuple(scale) + (None, None))[:2]
    if not isinstance(low, (int, float)) or not isinstance(high, (int, float)) or not low < high or \
            (scale is not None and len(scale) != 2):
        raise ValueError(f"scale must be [low, high] with low < high, got {scale!r}")
    parsed: list[Criterion] = []
    for i, item in enumerate(criteria or []):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"].strip():
            raise ValueError(f"criteria[{i}] must be a table with a `name` (and `description`, `weight`)")
        weight = item.get("weight", 1.0)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight <= 0:
            raise ValueError(f"criteria[{i}].weight must be a number > 0, got {weight!r}")
        unknown = set(item) - {"name", "description", "weight"}
        if unknown:
            raise ValueError(f"criteria[{i}] has unknown keys: {', '.join(sorted(unknown))}")
        parsed.append(Criterion(item["name"].strip(), str(item.get("description", "")), float(weight)))
    if len({c.name for c in parsed}) != len(parsed):
        raise ValueError("criteria names must differ")
    return Rubric(question, tuple(parsed), (float(low), float(high)))
