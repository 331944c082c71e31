"""What GRPO can learn from each reward on a model, measured before training: ``grpo signal CONFIG``.

GRPO's advantage is a reward's deviation from its group's mean, so a reward teaches the policy something
only where it *differs within a group* of completions of the same prompt. A reward the model never earns
(a format it never writes) or always earns gives every completion an advantage of 0: nothing to learn,
however long the run. :func:`measure_signal` samples ``prompts`` groups from the run's own model, generation
settings and prompts (the seeded training order, as step 1 would) and scores them with the run's rewards;
per reward it reports

* ``mean``            the mean score over the scored completions,
* ``nonzero``         the fraction of completions scored other than 0,
* ``varied_groups``   the fraction of groups whose scores are not all equal: where GRPO has a signal,
* ``unscored``        the fraction scored ``None`` (the reward abstained or failed),

and the same for the weighted total. Nothing is trained and nothing is written.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RewardSignal:
    """One reward's (or the total's) numbers over the sampled groups."""

    name: str
    mean: float
    nonzero: float
    varied_groups: float
    unscored: float


def signal_of(name: str, scores: list[float | None], group_size: int) -> RewardSignal:
    """:class:`RewardSignal` of ``scores``, consecutive groups of ``group_size`` completions (None: unscored;
    NaN counts as unscored too)."""
    present = [s for s in scores if s is not None and not math.isnan(s)]
    groups = [scores[i:i + group_size] for i in range(0, len(scores), group_size)]
    varied = sum(len({s for s in g if s is not None and not math.isnan(s)}) > 1 for g in groups)
    n = len(scores) or 1
    return RewardSignal(
        name=name,
        mean=sum(present) / len(present) if present else math.nan,
        nonzero=sum(s != 0 for s in present) / n,
        varied_groups=varied / (len(groups) or 1),
        unscored=(len(scores) - len(present)) / n,
    )


def measure_signal(trainer: Any, prompts: int) -> tuple[list[RewardSignal], list[str]]:
    """Sample ``prompts`` groups with ``trainer``'s backend (its training prompts in the seeded order) and
    return one :class:`RewardSignal` per reward, then the total's, and the sampled completions."""
    k = trainer.cfg.generation.num_generations
    signals: dict[str, list[float | None]] = {}
    total: list[float | None] = []
    texts: list[str] = []
    done = 0
    while done < prompts:
        rows = trainer.next_rows()[: prompts - done]
        batch, rewards, columns = trainer.sample_and_score(rows)
        for alias, values in columns.items():
            signals.setdefault(alias, []).extend(values)
        total.extend(rewards.tolist())
        texts.extend(batch.completions_text)
        done += len(rows)
    out = [signal_of(alias, values, k) for alias, values in signals.items()]
    return out + [signal_of("total", total, k)], texts


def signal_table(signals: list[RewardSignal], prompts: int, group_size: int) -> str:
    """The report ``grpo signal`` prints: one line per reward, then the total."""
    width = max(len(s.name) for s in signals)
    lines = [f"{prompts} prompts x {group_size} completions",
             f"{'reward':<{width}}  {'mean':>7}  {'nonzero':>7}  {'varied groups':>13}  {'unscored':>8}"]
    for s in signals:
        lines.append(f"{s.name:<{width}}  {s.mean:>7.3f}  {s.nonzero:>7.1%}  {s.varied_groups:>13.1%}  "
                     f"{s.unscored:>8.1%}")
    return "\n".join(lines)


def no_signal(signals: list[RewardSignal]) -> list[str]:
    """The names of the rewards (and "total") that varied in no group: nothing for GRPO to learn from them."""
    return [s.name for s in signals if s.varied_groups == 0]
