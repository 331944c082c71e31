"""The conformance suites: the contract every reward and every verifier keeps, as base classes a plugin's
tests subclass (pytest collects each ``test_*`` rule).

::

    class TestMyReward(RewardConformance):
        reward_name = "my_reward"
        params = {"value": 2.0}
        columns = {"answer": st.integers().map(str)}
        bounds = (0.0, 2.0)

    class TestMyVerifier(VerifierConformance):
        verifier_name = "my_verifier"
        values = gs.numbers()                     # the values the verifier compares
        symmetric = True                          # verify(a, b) and verify(b, a) agree

        def render(self, value):                  # the texts that must be read as `value`
            return gs.renderings(value)

        def oracle(self, answer, reference):      # the truth, computed another way (default: ==)
            return answer == reference

Rewards and verifiers are looked up in the process-wide registry (every installed plugin); set
``registry`` on the class (a :class:`~grpo_rewards.Registry`) to use another.
"""

from __future__ import annotations

import math
import pickle
import time
from typing import Any, ClassVar

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import grpo_rewards  # grpo_rewards.reward looked up at each call: a test may patch it
from grpo_rewards.plugins import get_registry
from grpo_rewards.reward_config import rewards_from_doc
from grpo_rewards.testing import strategies as gs
from grpo_rewards.tomlfile import parse_toml, toml_value
from grpo_rewards.verdict import Status, Verdict

# Up to 30 examples a rule; fewer when the hypothesis profile loaded before this import asks for fewer
# (``pytest --hypothesis-profile=...``).
_EXAMPLES = min(30, settings.default.max_examples)
_SETTINGS = settings(max_examples=_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
_FEW = settings(max_examples=min(3, _EXAMPLES), deadline=None, suppress_health_check=list(HealthCheck))
# Rows of huge inputs the time budget is measured on: a long answer, a long reasoning, many tags.
_LARGE = [
    "<answer>" + "9" * 100_000 + "</answer>",
    "<reasoning>" + "step " * 40_000 + "</reasoning><answer>4</answer>",
    "<answer>1</answer>" * 10_000,
    "\\boxed{" * 5_000 + "1" + "}" * 5_000,
]


def _draw_columns(data: st.DataObject, columns: dict[str, st.SearchStrategy], n: int) -> dict[str, list]:
    return {k: data.draw(st.lists(s, min_size=n, max_size=n), label=k) for k, s in columns.items()}


def _rows(cols: dict[str, list], index: list[int]) -> dict[str, list]:
    return {k: [v[i] for i in index] for k, v in cols.items()}


class RewardConformance:
    """Subclass and set ``reward_name``; each ``test_*`` below is one rule of the contract.

    ``params`` are the reward's parameters, ``columns`` a strategy per dataset column it reads,
    ``bounds`` the ``(low, high)`` every score lies in, ``seconds_per_row`` its time budget.
    """

    reward_name: ClassVar[str] = ""
    params: ClassVar[dict[str, Any]] = {}
    columns: ClassVar[dict[str, st.SearchStrategy]] = {}
    bounds: ClassVar[tuple[float, float] | None] = None
    seconds_per_row: ClassVar[float] = 1.0
    registry: ClassVar[Any] = None

    def make(self) -> Any:
        return grpo_rewards.reward(self.reward_name, registry=self.registry, **self.params)

    def score(self, fn: Any, comps: list, cols: dict[str, list]) -> list:
        return list(fn(comps, **cols))

    def check_scores(self, out: list, comps: list) -> None:
        assert len(out) == len(comps), f"{len(out)} scores for {len(comps)} completions"
        for s in out:
            assert s is None or (isinstance(s, (int, float)) and not isinstance(s, bool) and math.isfinite(s)), \
                f"a score must be a finite number or None, got {s!r}"
            if s is not None and self.bounds is not None:
                assert self.bounds[0] <= s <= self.bounds[1], f"{s} is outside the declared bounds {self.bounds}"

    @given(data=st.data())
    @_SETTINGS
    def test_one_finite_score_or_none_per_completion(self, data: st.DataObject) -> None:
        comps, cols = data.draw(gs.batches(self.columns))
        self.check_scores(self.score(self.make(), comps, cols), comps)

    @given(data=st.data())
    @_SETTINGS
    def test_deterministic_row_by_row_and_any_order(self, data: st.DataObject) -> None:
        comps, cols = data.draw(gs.batches(self.columns))
        fn = self.make()
        whole = self.score(fn, comps, cols)
        assert self.score(fn, comps, cols) == whole, "two calls on the same batch differ"
        assert self.score(self.make(), comps, cols) == whole, "a second instance scores the batch differently"
        rows = [self.score(fn, [c], _rows(cols, [i]))[0] for i, c in enumerate(comps)]
        assert rows == whole, "scored one row at a time, the batch scores differently"
        order = data.draw(st.permutations(range(len(comps))))
        shuffled = self.score(fn, [comps[i] for i in order], _rows(cols, order))
        assert shuffled == [whole[i] for i in order], "the same rows in another order score differently"

    @given(data=st.data())
    @_SETTINGS
    def test_same_result_in_any_batch_split(self, data: st.DataObject) -> None:
        comps, cols = data.draw(gs.batches(self.columns, max_size=8))
        fn = self.make()
        whole = self.score(fn, comps, cols)
        cuts = sorted(data.draw(st.sets(st.integers(1, max(1, len(comps) - 1)), max_size=3)))
        edges = [0, *[c for c in cuts if c < len(comps)], len(comps)]
        parts: list = []
        for lo, hi in zip(edges, edges[1:]):
            parts += self.score(fn, comps[lo:hi], _rows(cols, list(range(lo, hi))))
        assert parts == whole, f"split at {edges[1:-1]}, the batch scores differently"

    @given(data=st.data())
    @_SETTINGS
    def test_never_raises_on_junk(self, data: st.DataObject) -> None:
        n = data.draw(st.integers(1, 6))
        comps = data.draw(st.lists(gs.junk_completions(), min_size=n, max_size=n))
        cols = {k: data.draw(st.lists(st.one_of(s, gs.junk_values()), min_size=n, max_size=n))
                for k, s in self.columns.items()}
        self.check_scores(self.score(self.make(), comps, cols), comps)

    @given(data=st.data())
    @_FEW
    def test_within_time_budget(self, data: st.DataObject) -> None:
        fn = self.make()
        comps = [*_LARGE, *[[{"role": "assistant", "content": c}] for c in _LARGE]]
        cols = _draw_columns(data, self.columns, len(comps))
        start = time.monotonic()
        out = self.score(fn, comps, cols)
        took = time.monotonic() - start
        budget = self.seconds_per_row * len(comps)
        assert took <= budget, f"{len(comps)} large completions took {took:.2f} s, over {budget:.2f} s"
        self.check_scores(out, comps)

    @given(data=st.data())
    @_FEW
    def test_picklable(self, data: st.DataObject) -> None:
        fn = self.make()
        again = pickle.loads(pickle.dumps(fn))
        comps = ["<answer>1</answer>", "x", "<reasoning>r</reasoning><answer>2</answer>"]
        cols = _draw_columns(data, self.columns, len(comps))
        assert self.score(again, comps, cols) == self.score(fn, comps, cols)

    @given(data=st.data())
    @_FEW
    def test_parameters_round_trip_through_toml(self, data: st.DataObject) -> None:
        import tomllib

        lines = ["[rewards.under_test]", f"use = {toml_value(self.reward_name)}"]
        lines += [f"{toml_value(k)} = {toml_value(v)}" for k, v in self.params.items()]
        text = "\n".join(lines) + "\n"
        table = tomllib.loads(text)["rewards"]["under_test"]
        assert {k: v for k, v in table.items() if k != "use"} == dict(self.params), text
        doc = parse_toml(text, "<conformance>")
        composed = rewards_from_doc(doc, self.registry or get_registry())
        assert not doc.problems, "\n".join(str(p) for p in doc.problems)
        assert composed is not None
        from_toml = composed.entries[0].fn.fn  # the reward itself, not its process-isolating wrapper
        comps = ["<answer>1</answer>", "<answer>\n2\n</answer>", "3", ""]
        cols = _draw_columns(data, self.columns, len(comps))
        assert self.score(from_toml, comps, cols) == self.score(self.make(), comps, cols)


class VerifierConformance:
    """Subclass and set ``verifier_name`` and ``values``; override ``render`` and ``oracle``.

    ``values`` draws the values the verifier compares; ``render(value)`` draws texts the verifier must read
    as ``value`` (default: ``str(value)``); ``oracle(answer, reference)`` says whether two values are equal
    the way the verifier should judge them (``True``/``False``; ``None``: it must be undecided), computed
    another way than the verifier does. ``symmetric = True`` declares that ``verify(a, b)`` and
    ``verify(b, a)`` agree.
    """

    verifier_name: ClassVar[str] = ""
    params: ClassVar[dict[str, Any]] = {}
    values: ClassVar[st.SearchStrategy] = st.nothing()
    symmetric: ClassVar[bool] = False
    registry: ClassVar[Any] = None

    def render(self, value: Any) -> st.SearchStrategy[str]:
        return st.just(str(value))

    def oracle(self, answer: Any, reference: Any) -> bool | None:
        return bool(answer == reference)

    def make(self) -> Any:
        return (self.registry or get_registry()).verifier(self.verifier_name).factory(**self.params)

    def verdict(self, verify: Any, answer: str, reference: str) -> Any:
        out = verify(answer, reference)
        assert isinstance(out, Verdict), f"verify({answer!r}, {reference!r}) returned {out!r}, not a Verdict"
        return out

    def _pair(self, data: st.DataObject) -> tuple[Any, Any, str, str]:
        a = data.draw(self.values, label="answer value")
        b = data.draw(st.one_of(st.just(a), self.values), label="reference value")
        return a, b, data.draw(self.render(a), label="answer text"), data.draw(self.render(b), label="reference text")

    @given(data=st.data())
    @_SETTINGS
    def test_reflexive_on_rendered_values(self, data: st.DataObject) -> None:
        verify = self.make()
        text = data.draw(self.render(data.draw(self.values)))
        v = self.verdict(verify, text, text)
        assert v.ok, f"verify({text!r}, {text!r}) is {v.status.value}: {v.reason}"

    @given(data=st.data())
    @_SETTINGS
    def test_agrees_with_the_oracle(self, data: st.DataObject) -> None:
        a, b, ta, tb = self._pair(data)
        expected = self.oracle(a, b)
        want = Status.UNDECIDED if expected is None else Status.OK if expected else Status.WRONG
        v = self.verdict(self.make(), ta, tb)
        assert v.status is want, (f"verify({ta!r}, {tb!r}) is {v.status.value} ({v.reason}); the oracle says "
                                  f"{want.value} for {a!r} and {b!r}")

    @given(data=st.data())
    @_SETTINGS
    def test_symmetric_where_declared(self, data: st.DataObject) -> None:
        if not self.symmetric:
            return
        _, _, ta, tb = self._pair(data)
        verify = self.make()
        there, back = self.verdict(verify, ta, tb), self.verdict(verify, tb, ta)
        assert there.status is back.status, f"verify({ta!r}, {tb!r}) is {there.status.value}, the reverse {back.status.value}"

    @given(answer=st.one_of(gs.adversarial(), gs.words(200)), reference=st.one_of(gs.adversarial(), gs.words(60)))
    @_SETTINGS
    def test_never_raises_on_junk(self, answer: str, reference: str) -> None:
        verify = self.make()
        first, again = self.verdict(verify, answer, reference), self.verdict(verify, answer, reference)
        assert first.status is again.status, f"verify({answer!r}, {reference!r}) is {first.status.value}, then {again.status.value}"

    @given(data=st.data())
    @_FEW
    def test_picklable(self, data: st.DataObject) -> None:
        verify = self.make()
        again = pickle.loads(pickle.dumps(verify))
        _, _, ta, tb = self._pair(data)
        for a, b in ((ta, ta), (ta, tb), (tb, ta)):
            assert self.verdict(again, a, b).status is self.verdict(verify, a, b).status
