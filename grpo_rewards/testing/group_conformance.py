"""The conformance suite of a group reward (:mod:`grpo_rewards.group_reward`): :class:`GroupRewardConformance`.

A group reward scores one prompt's completions together, so the per-row rules of
:class:`~grpo_rewards.testing.RewardConformance` (a row scored alone scores as in its batch, any split of the
batch) do not hold for it. These rules take their place:

* permuting the rows of a batch (within and across groups) permutes the scores;
* groups are independent: a group scored alone, or beside any other groups, scores the same;
* two calls, and two instances, score a batch the same;
* junk completions and junk dataset cells score without raising.

The other rules (finite scores within ``bounds``, the time budget, pickling, parameters through TOML) are
inherited; a batch given without ``prompts`` is scored as one group (one prompt)::

    class TestMyGroupReward(GroupRewardConformance):
        reward_name = "my_group_reward"
        completion = st.sampled_from(["<answer>1</answer>", "<answer>2</answer>", "no answer"])
"""

from __future__ import annotations

from typing import Any, ClassVar

from hypothesis import given
from hypothesis import strategies as st

from grpo_rewards.group_reward import group_rows
from grpo_rewards.testing import strategies as gs
from grpo_rewards.testing.conformance import _SETTINGS, RewardConformance, _rows


class GroupRewardConformance(RewardConformance):
    """Subclass and set ``reward_name`` (and ``params``, ``columns``, ``bounds``, ``completion``: the strategy
    of one completion, default any completion); each ``test_*`` is one rule (module docs)."""

    completion: ClassVar[st.SearchStrategy | None] = None
    # the per-row rules of RewardConformance do not hold for a group reward (module docs)
    test_deterministic_row_by_row_and_any_order = None  # type: ignore[assignment]
    test_same_result_in_any_batch_split = None  # type: ignore[assignment]

    def score(self, fn: Any, comps: list, cols: dict[str, list]) -> list:
        if "prompts" not in cols:  # one group: every row of the batch answers one prompt
            cols = {**cols, "prompts": ["the prompt"] * len(comps)}
        return list(fn(comps, **cols))

    def _batch(self, data: st.DataObject, **kw: Any) -> tuple[list, dict[str, list]]:
        return data.draw(gs.group_batches(self.columns, completion=self.completion, **kw), label="batch")

    @given(data=st.data())
    @_SETTINGS
    def test_one_finite_score_or_none_per_completion(self, data: st.DataObject) -> None:
        comps, cols = self._batch(data)
        self.check_scores(self.score(self.make(), comps, cols), comps)

    @given(data=st.data())
    @_SETTINGS
    def test_deterministic_and_permuting_rows_permutes_scores(self, data: st.DataObject) -> None:
        comps, cols = self._batch(data)
        fn = self.make()
        whole = self.score(fn, comps, cols)
        assert self.score(fn, comps, cols) == whole, "two calls on the same batch differ"
        assert self.score(self.make(), comps, cols) == whole, "a second instance scores the batch differently"
        order = data.draw(st.permutations(range(len(comps))), label="order")
        shuffled = self.score(fn, [comps[i] for i in order], _rows(cols, order))
        assert shuffled == [whole[i] for i in order], "the same rows in another order score differently"

    @given(data=st.data())
    @_SETTINGS
    def test_groups_are_independent(self, data: st.DataObject) -> None:
        comps, cols = self._batch(data, max_groups=4)
        fn = self.make()
        whole = self.score(fn, comps, cols)
        groups = group_rows(cols["prompts"])
        for index in groups:  # each group alone
            alone = self.score(fn, [comps[i] for i in index], _rows(cols, index))
            assert alone == [whole[i] for i in index], "a group scored alone scores differently than in its batch"
        kept = sorted(i for g in data.draw(st.sets(st.sampled_from(range(len(groups))), min_size=1), label="groups")
                      for i in groups[g])  # any subset of the groups, rows in batch order
        part = self.score(fn, [comps[i] for i in kept], _rows(cols, kept))
        assert part == [whole[i] for i in kept], "a group scores differently beside other groups"

    @given(data=st.data())
    @_SETTINGS
    def test_never_raises_on_junk(self, data: st.DataObject) -> None:
        comps, cols = self._batch(data)
        junk = data.draw(st.lists(gs.junk_completions(), min_size=len(comps), max_size=len(comps)), label="junk")
        cells = {k: data.draw(st.lists(st.one_of(s, gs.junk_values()), min_size=len(comps), max_size=len(comps)))
                 for k, s in self.columns.items()}
        self.check_scores(self.score(self.make(), junk, {**cols, **cells}), junk)
