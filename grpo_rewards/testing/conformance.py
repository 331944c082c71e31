"""RewardConformance: the contract every reward keeps, as a base class a plugin's tests subclass.

::

    class TestMyReward(RewardConformance):
        reward_name = "my_reward"
        params = {"value": 2.0}
        columns = {"answer": st.integers().map(str)}
        bounds = (0.0, 2.0)
"""

from __future__ import annotations

import math
import pickle
import time
from typing import Any, ClassVar

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grpo_rewards.testing import strategies as gs

_SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))


class RewardConformance:
    """Subclass and set ``reward_name``; each ``test_*`` below is one rule of the contract."""

    reward_name: ClassVar[str] = ""
    params: ClassVar[dict[str, Any]] = {}
    columns: ClassVar[dict[str, st.SearchStrategy]] = {}
    bounds: ClassVar[tuple[float, float] | None] = None
    seconds_per_row: ClassVar[float] = 1.0

    def make(self) -> Any:
        from grpo_rewards import reward

        return reward(self.reward_name, **self.params)

    def score(self, fn: Any, comps: list, cols: dict[str, list]) -> list:
        return list(fn(comps, **cols))

    @given(data=st.data())
    @_SETTINGS
    def test_one_finite_score_or_none_per_completion(self, data: st.DataObject) -> None:
        comps, cols = data.draw(gs.batches(self.columns))
        start = time.monotonic()
        out = self.score(self.make(), comps, cols)
        assert time.monotonic() - start <= self.seconds_per_row * len(comps) + 1.0
        assert len(out) == len(comps)
        for s in out:
            assert s is None or (isinstance(s, (int, float)) and math.isfinite(s)), s
            if s is not None and self.bounds is not None:
                assert self.bounds[0] <= s <= self.bounds[1], s

    @given(data=st.data())
    @_SETTINGS
    def test_deterministic_row_by_row_and_any_order(self, data: st.DataObject) -> None:
        comps, cols = data.draw(gs.batches(self.columns))
        fn = self.make()
        whole = self.score(fn, comps, cols)
        assert self.score(fn, comps, cols) == whole
        rows = [self.score(fn, [c], {k: [v[i]] for k, v in cols.items()})[0] for i, c in enumerate(comps)]
        assert rows == whole
        order = data.draw(st.permutations(range(len(comps))))
        shuffled = self.score(fn, [comps[i] for i in order], {k: [v[i] for i in order] for k, v in cols.items()})
        assert shuffled == [whole[i] for i in order]

    def test_picklable(self) -> None:
        fn = self.make()
        again = pickle.loads(pickle.dumps(fn))
        comps = ["<answer>1</answer>", "x"]
        cols = {k: [s.example() for _ in comps] for k, s in self.columns.items()}
        assert self.score(again, comps, cols) == self.score(fn, comps, cols)
