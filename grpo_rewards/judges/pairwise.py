"""Pairwise judging of one group: :class:`PairwiseJudge` (the ``pairwise_judge`` built-in, a group reward).

Every two completions of a prompt are shown to the judge side by side (``A`` and ``B``) with the rubric's
question or criteria, and the judge answers ``{"winner": "A"}``, ``{"winner": "B"}`` or ``{"winner": "tie"}``.
With ``both_orders`` (the default) each pair is asked in both orders, which cancels a judge's preference for a
position; a completion's score is its share of the comparisons it won (a tie is half a win), times ``value``:
``k`` completions cost ``k (k - 1)`` requests (half without ``both_orders``). A comparison without a verdict is
left out (counted as a parse failure); a completion left with none scores ``None``, and so does a group of one.
Requests, the cache, the concurrency limit, the template's escaping and the metrics are those of
:class:`~grpo_rewards.judges.reward.LLMJudge`.
"""

from __future__ import annotations

from typing import Any

from grpo_rewards.judges import prompt as judge_prompt
from grpo_rewards.judges.reward import LLMJudge, _text

WINNERS = {"a": 1.0, "b": 0.0, "tie": 0.5}


class PairwiseJudge(LLMJudge):
    """One group's completions ranked by pairwise verdicts (module docs; a module-level class: it pickles)."""

    __name__ = "pairwise_judge"
    slots = judge_prompt.PAIR_SLOTS

    def __init__(self, judge: Any, rubric: Any, *, both_orders: bool = True, **options: Any) -> None:
        options.setdefault("template", judge_prompt.DEFAULT_PAIR_TEMPLATE)
        super().__init__(judge, rubric, **options)
        self.both_orders = both_orders

    def __getstate__(self) -> dict[str, Any]:
        return {**super().__getstate__(), "both_orders": self.both_orders}

    def criterion_text(self) -> str:
        if self.rubric.question is not None:
            return self.rubric.question
        return "\n".join(f"- {c.name} (weight {c.weight:g}): {c.description}" for c in self.rubric.criteria)

    def output_format(self) -> str:
        return ('End your answer with one JSON object: {"winner": "A"} or {"winner": "B"} '
                '({"winner": "tie"} when neither is better).')

    def messages(self, prompt: str, first: str, second: str) -> list[dict[str, str]]:  # type: ignore[override]
        return judge_prompt.messages(self.template, self.criterion_text(), self.output_format(), prompt, first, second)

    def json_schema(self) -> dict[str, Any]:
        return {"type": "object", "properties": {"winner": {"enum": ["A", "B", "tie"]}}, "required": ["winner"]}

    def verdict_score(self, verdict: dict[str, Any]) -> float | None:
        winner = verdict.get("winner")
        return WINNERS.get(winner.strip().lower()) if isinstance(winner, str) else None

    def __call__(self, completions: list[Any], prompts: list[Any] | None = None, **_: Any) -> list[float | None]:
        n = len(completions)
        if n < 2:
            return [None] * n
        prompt = judge_prompt.message_text(prompts[0]) if prompts else ""
        texts = [_text(c) for c in completions]
        pairs = [(i, j) for i in range(n) for j in range(n) if i != j and (self.both_orders or i < j)]
        results = self.ask([(prompt, texts[i], texts[j]) for i, j in pairs])
        wins, counts = [0.0] * n, [0] * n
        for (i, j), share in zip(pairs, results, strict=True):
            if share is None:
                continue
            wins[i] += share
            wins[j] += 1.0 - share
            counts[i] += 1
            counts[j] += 1
        return [self.value * w / c if c else None for w, c in zip(wins, counts, strict=True)]
