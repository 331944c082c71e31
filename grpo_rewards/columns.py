"""The dataset columns a composed reward needs, checked against rows before any row is scored.

One set of checks for every place rows meet rewards (``grpo rewards score`` input, a run's training data):

* a column a reward *needs* (:func:`needs`) that no row has, or every row holds ``null`` in, is an error:
  the reward would raise on every batch, or every row would score ``None``;
* rows that lack a needed column, or hold ``null`` there, score ``None`` for that reward: counted
  (:func:`count_gaps`), not refused, since a reward not applying to some rows is normal;
* a *text reference* (the column a ``reference_column`` key names: what a verifier compares the answer
  with) that holds a JSON object or array is refused for that row (:func:`reference_problem`): the text of
  a dict is not a reference. A number is a reference (``42`` reads as ``"42"``).

Whether a reward needs a column is asked of the reward itself (:func:`needed_columns`): it is called on an
empty batch with the columns given; one that raises ``KeyError`` or ``TypeError`` quoting a column it was
not given needs that column. The built-in rewards raise ``KeyError("column 'answer' is missing ...")``, a
TRL-style ``def reward(completions, answer, **kw)`` a ``TypeError`` quoting ``answer``. No row is scored,
and a reward that only reads a column when present (``completion_ids``, ``language``) needs nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from grpo_rewards.compose import ComposedReward, RewardEntry

_QUOTED = re.compile(r"""['"]([^'"\s]+)['"]""")
MAX_PROBES = 8  # columns discovered one at a time: a reward raises for the first it misses


def needed_columns(fn: Any, given: Iterable[str] = ()) -> list[str]:
    """The columns ``fn`` refuses to run without, beyond ``given``: ``fn([], **columns)`` is called with
    empty columns, each column it names in a ``KeyError``/``TypeError`` is added, until it runs."""
    have = dict.fromkeys(given, ())
    needed: list[str] = []
    for _ in range(MAX_PROBES):
        try:
            fn([], **{k: [] for k in have})
            break
        except (KeyError, TypeError) as exc:
            names = [n for n in _QUOTED.findall(str(exc)) if n not in have and n.isidentifier()]
            if not names:
                break
            needed.append(names[0])
            have[names[0]] = ()
        except Exception:  # noqa: BLE001 (a reward that fails on an empty batch: scoring will say why)
            break
    return needed


def _raw(entry: RewardEntry) -> Any:
    return getattr(entry.fn, "fn", entry.fn)


@dataclass(frozen=True)
class Need:
    """Reward ``alias`` (``use``) needs ``column``."""

    alias: str
    use: str
    column: str

    def who(self) -> str:
        return f"reward {self.alias!r}" + (f" ({self.use})" if self.use and self.use != self.alias else "")


def needs(composed: ComposedReward, given: Iterable[str] = ()) -> list[Need]:
    """Every column each reward of ``composed`` needs beyond ``given`` (the columns always passed)."""
    given = list(given)
    return [Need(e.alias, e.use, c) for e in composed.entries for c in needed_columns(_raw(e), given)]


def count_gaps(needs_: list[Need], rows: Iterable[tuple[int, dict[str, Any]]], counts: dict[str, list[int]]) -> None:
    """Add to ``counts[column]`` the line of each row lacking a needed column (absent or ``null``)."""
    columns = {n.column for n in needs_}
    for line, row in rows:
        for column in columns:
            if row.get(column) is None:
                counts.setdefault(column, []).append(line)


def reference_columns(composed: ComposedReward) -> dict[str, list[str]]:
    """``{column: [alias, ...]}``: the text references of ``composed`` (see module docs)."""
    out: dict[str, list[str]] = {}
    for e in composed.entries:
        if e.reference_column:
            out.setdefault(e.reference_column, []).append(e.alias)
    return out


def reference_problem(value: Any) -> str | None:
    """Why ``value`` cannot be a text reference (a JSON object or array), or None."""
    if isinstance(value, dict):
        return "holds a JSON object, not a text reference"
    if isinstance(value, (list, tuple)):
        return "holds a JSON array, not a text reference"
    return None
