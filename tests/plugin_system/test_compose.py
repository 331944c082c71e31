"""Weighted composition: totals, per-reward columns, None handling, TRL hand-off."""

from __future__ import annotations

import pytest

from grpo_rewards import compose


def col(values):
    def fn(completions, **kw):
        return list(values)

    return fn


def test_weighted_total_and_columns():
    composed = compose({"a": (col([1.0, 0.0, None]), 2.0), "b": col([0.5, None, None])})
    scores = composed.score(["x", "y", "z"])
    assert scores.columns == {"a": [1.0, 0.0, None], "b": [0.5, None, None]}
    assert scores.total == [2.5, 0.0, None]  # None is skipped; all-None rows stay None
    assert composed(["x", "y", "z"]) == scores.total
    assert scores.rows()[0] == {"a": 1.0, "b": 0.5, "total": 2.5}


def test_columns_are_passed_to_every_reward():
    seen = {}

    def needs_answer(completions, answer, **kw):
        seen["answer"] = answer
        return [float(c == a) for c, a in zip(completions, answer)]

    composed = compose({"exact": needs_answer})
    assert composed(["4", "5"], answer=["4", "4"], prompts=["p", "q"]) == [1.0, 0.0]
    assert seen["answer"] == ["4", "4"]


def test_trl_reward_funcs_are_named_by_alias():
    composed = compose({"fmt": (col([1.0]), 0.5), "correct": col([2.0])})
    funcs, weights = composed.trl_reward_funcs()
    assert [f.__name__ for f in funcs] == ["fmt", "correct"]
    assert weights == [0.5, 1.0]


def test_a_failing_reward_does_not_sink_the_others():
    def broken(completions, **kw):
        raise RuntimeError("oops")

    composed = compose({"ok": col([1.0, 1.0]), "broken": broken})
    assert composed(["a", "b"]) == [1.0, 1.0]


def test_aliases_must_be_unique_and_non_empty():
    from grpo_rewards import ComposedReward

    with pytest.raises(ValueError, match="at least one"):
        ComposedReward([])


def test_a_wrapped_reward_keeps_its_own_timeout_policy_and_plugin():
    from grpo_rewards import SafeReward

    own = SafeReward(col([1.0]), "inner", on_error="zero", timeout=7, plugin="acme", max_consecutive_failures=9)
    composed = compose({"mine": own, "plain": col([2.0])}, on_error="raise", timeout=3)
    mine, plain = (e.fn for e in composed.entries)
    assert (mine.__name__, mine.on_error, mine.timeout, mine.plugin, mine.max_consecutive_failures) == (
        "mine", "zero", 7.0, "acme", 9)
    assert (plain.on_error, plain.timeout) == ("raise", 3.0)


@pytest.mark.parametrize("weight", [float("inf"), float("-inf"), float("nan"), "2"])
def test_non_finite_or_non_numeric_weights_are_refused(weight):
    with pytest.raises(ValueError, match="weight of reward 'a' must be a"):
        compose({"a": (col([1.0]), weight)})


def test_the_alias_total_is_reserved():
    with pytest.raises(ValueError, match="'total' is reserved"):
        compose({"total": col([1.0])})


def test_rows_no_reward_could_score_are_named_in_a_warning(caplog):
    import logging

    composed = compose({"a": col([1.0, None, None]), "b": col([None, 2.0, None])})
    with caplog.at_level(logging.WARNING, logger="grpo.rewards"):
        assert composed(["x", "y", "z"]) == [1.0, 2.0, None]
    assert "All reward functions returned None for row(s) 2 of 3 (a, b)" in caplog.text
