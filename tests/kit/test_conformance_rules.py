"""Each rule of RewardConformance and VerifierConformance fails a reward or verifier that breaks it, and only
that one (plus the rules it breaks along the way), while a reward and a verifier that keep the contract pass all.

The suites run in a pytest subprocess on rewards registered in an in-process registry (the ``registry``
class attribute), as a plugin's own tests would run them.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SUBJECTS = '''
import math
import time

from hypothesis import Phase, settings, strategies as st

# before the suites are imported (they read it): fewer examples, and no shrinking of the failures
settings.register_profile("rules", max_examples=10, phases=[Phase.explicit, Phase.generate], database=None)
settings.load_profile("rules")

from grpo_rewards import RewardSpec, VerifierSpec, Verdict, completion_text, extract_answer, hookimpl, load_registry
from grpo_rewards.testing import RewardConformance, VerifierConformance


def _answer(c):
    return extract_answer(completion_text(c)) or ""


class Good:
    __name__ = "good"
    def __call__(self, completions, answer=None, **_):
        refs = answer or [None] * len(completions)
        return [None if not isinstance(r, str) or not r.strip() else float(_answer(c).strip() == r.strip())
                for c, r in zip(completions, refs)]


class OutOfBounds(Good):
    def __call__(self, completions, **cols):
        return [None if s is None else s + 5.0 for s in super().__call__(completions, **cols)]


class NotFinite(Good):
    def __call__(self, completions, **_):
        return [math.nan for _ in completions]


class Stateful(Good):
    calls = 0
    def __call__(self, completions, **_):
        Stateful.calls += 1
        return [float(Stateful.calls % 2) for _ in completions]


class BatchSized(Good):
    def __call__(self, completions, **_):
        return [float(len(completions)) for _ in completions]


class RaisesOnMissing(Good):
    def __call__(self, completions, answer=None, **_):
        return [float(_answer(c) == r.strip()) for c, r in zip(completions, answer)]


class SlowOnLarge(Good):
    def __call__(self, completions, **cols):
        for c in completions:
            if len(completion_text(c)) > 90_000:  # the budget test's largest rows; no other draw is this long
                time.sleep(0.5)
        return super().__call__(completions, **cols)


class WithPair(Good):
    def __init__(self, pair):
        self.pair = tuple(pair)


def closure():
    good = Good()
    return lambda completions, **cols: good(completions, **cols)


class SameText:
    def __init__(self, fold=True):
        self.fold = fold
    def __call__(self, a, b):
        a, b = " ".join(a.split()), " ".join(b.split())
        if self.fold:
            a, b = a.casefold(), b.casefold()
        return Verdict.correct(a) if a == b else Verdict.wrong(a)


class AtLeast:
    def __call__(self, a, b):
        return Verdict.correct(a) if a.split() >= b.split() else Verdict.wrong(a)


class NeverOk:
    def __call__(self, a, b):
        return Verdict.wrong(a)


class FloatParse:
    def __call__(self, a, b):
        return Verdict.correct(a) if float(a) == float(b) else Verdict.wrong(a)


@hookimpl
def grpo_register_rewards(register):
    for name, factory in [("good", Good), ("out_of_bounds", OutOfBounds), ("not_finite", NotFinite),
                          ("stateful", Stateful), ("batch_sized", BatchSized), ("raises_on_missing", RaisesOnMissing),
                          ("slow_on_large", SlowOnLarge), ("closure", closure)]:
        register(RewardSpec(name=name, factory=factory))
    register(RewardSpec(name="with_pair", factory=lambda pair=(0, 1): WithPair(pair)))


@hookimpl
def grpo_register_verifiers(register):
    register(VerifierSpec(name="same_text", factory=SameText))
    register(VerifierSpec(name="at_least", factory=AtLeast))
    register(VerifierSpec(name="never_ok", factory=NeverOk))
    register(VerifierSpec(name="float_parse", factory=FloatParse))


import sys
REGISTRY = load_registry(entry_points=False, extra_plugins=[("subjects", sys.modules[__name__])])
assert not REGISTRY.problems, REGISTRY.problems
ANSWER = {"answer": st.sampled_from(["1", "2", "x y"])}
WORDS = st.lists(st.sampled_from(["a", "b", "Cd", "EF"]), min_size=1, max_size=3)


def spaced(words):
    return st.sampled_from([" ", "  ", "\\t"]).map(lambda sep: sep.join(words))


def cased(words):
    return st.sampled_from([str.lower, str.upper]).map(lambda f: " ".join(f(w) for w in words))


class R(RewardConformance):
    registry = REGISTRY
    columns = ANSWER
    bounds = (0.0, 1.0)


class TestGood(R): reward_name = "good"
class TestOutOfBounds(R): reward_name = "out_of_bounds"
class TestNotFinite(R): reward_name = "not_finite"
class TestStateful(R): reward_name = "stateful"
class TestBatchSized(R):
    reward_name = "batch_sized"
    bounds = None
class TestRaisesOnMissing(R): reward_name = "raises_on_missing"
class TestSlowOnLarge(R):
    reward_name = "slow_on_large"
    seconds_per_row = 0.1
class TestClosure(R): reward_name = "closure"
class TestWithPair(R):
    reward_name = "with_pair"
    params = {"pair": (2, 3)}


class V(VerifierConformance):
    registry = REGISTRY
    values = WORDS
    symmetric = True

    def render(self, value):
        return spaced(value)

    def oracle(self, a, b):
        return a == b


class TestGoodVerifier(V): verifier_name = "same_text"
class TestAsymmetric(V): verifier_name = "at_least"
class TestNotReflexive(V): verifier_name = "never_ok"
class TestRaisesOnText(V):
    verifier_name = "float_parse"
    values = st.integers(0, 9)
    def render(self, value):
        return st.just(str(value))
class TestDisagreesWithOracle(V):
    verifier_name = "same_text"
    params = {"fold": False}
    def render(self, value):
        return cased(value)
    def oracle(self, a, b):
        return [w.lower() for w in a] == [w.lower() for w in b]
'''

R_RULES = {"test_one_finite_score_or_none_per_completion", "test_deterministic_row_by_row_and_any_order",
           "test_same_result_in_any_batch_split", "test_never_raises_on_junk", "test_within_time_budget",
           "test_picklable", "test_parameters_round_trip_through_toml"}
V_RULES = {"test_reflexive_on_rendered_values", "test_agrees_with_the_oracle", "test_symmetric_where_declared",
           "test_never_raises_on_junk", "test_picklable"}

# the rules each subject breaks; every other rule of its suite must pass
EXPECTED_FAILURES = {
    "TestGood": set(),
    "TestOutOfBounds": {"test_one_finite_score_or_none_per_completion", "test_never_raises_on_junk",
                        "test_within_time_budget"},
    # the same NaN object each time: lists of it compare equal, so only the finiteness rules catch it
    "TestNotFinite": {"test_one_finite_score_or_none_per_completion", "test_never_raises_on_junk",
                      "test_within_time_budget"},
    "TestStateful": {"test_deterministic_row_by_row_and_any_order", "test_same_result_in_any_batch_split",
                     "test_picklable", "test_parameters_round_trip_through_toml"},
    "TestBatchSized": {"test_deterministic_row_by_row_and_any_order", "test_same_result_in_any_batch_split"},
    "TestRaisesOnMissing": {"test_never_raises_on_junk"},
    "TestSlowOnLarge": {"test_within_time_budget"},
    "TestClosure": {"test_picklable"},
    "TestWithPair": {"test_parameters_round_trip_through_toml"},
    "TestGoodVerifier": set(),
    "TestAsymmetric": {"test_symmetric_where_declared", "test_agrees_with_the_oracle"},
    "TestNotReflexive": {"test_reflexive_on_rendered_values", "test_agrees_with_the_oracle"},
    "TestRaisesOnText": {"test_never_raises_on_junk"},
    "TestDisagreesWithOracle": {"test_agrees_with_the_oracle"},
}


@pytest.mark.slow
def test_each_rule_fails_the_subject_that_breaks_it(tmp_path: Path) -> None:
    (tmp_path / "test_subjects.py").write_text(textwrap.dedent(SUBJECTS))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "GRPO_"))}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfE", "--tb=no",
                          "--hypothesis-seed=0", "test_subjects.py"],
                         cwd=tmp_path, capture_output=True, text=True, env=env, timeout=900)
    summary = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else run.stderr
    assert run.returncode in (0, 1) and "error" not in summary, run.stdout[-3000:] + run.stderr[-3000:]
    failed = re.findall(r"^FAILED test_subjects\.py::(\w+)::(\w+)", run.stdout, re.M)
    got = {cls: set() for cls in EXPECTED_FAILURES}
    for cls, rule in failed:
        got[cls].add(rule)
    assert got == EXPECTED_FAILURES, run.stdout[-3000:]
    for cls, rules in EXPECTED_FAILURES.items():  # the rules asserted on are real rules of the suites
        assert rules <= (V_RULES if cls in ("TestGoodVerifier", "TestAsymmetric", "TestNotReflexive",
                                            "TestRaisesOnText", "TestDisagreesWithOracle") else R_RULES), cls
