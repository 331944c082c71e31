"""SafeReward: exceptions, wrong lengths, NaN and hangs are reported with the reward's name, never fatal."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from grpo_rewards import RewardError, SafeReward


def constant(value):
    def fn(completions, **kw):
        return [value] * len(completions)

    return fn


def test_good_scores_pass_through_as_floats():
    safe = SafeReward(lambda cs, **kw: [1, None, 2.5], "good")
    assert safe(["a", "b", "c"]) == [1.0, None, 2.5]
    assert safe.stats.failures == 0 and safe.stats.rows == 3


def test_exception_is_reported_with_the_name_and_scored_none(caplog):
    def broken(completions, **kw):
        raise ZeroDivisionError("division by zero")

    safe = SafeReward(broken, "my_reward", plugin="acme")
    with caplog.at_level(logging.WARNING, logger="grpo.rewards"):
        assert safe(["a", "b"]) == [None, None]
    assert "reward 'my_reward' (plugin 'acme')" in caplog.text and "ZeroDivisionError" in caplog.text
    assert safe.stats.failure_kinds == {"exception": 1}


@pytest.mark.parametrize("on_error, expected", [("none", [None, None]), ("zero", [0.0, 0.0])])
def test_wrong_length_follows_the_policy(on_error, expected):
    safe = SafeReward(lambda cs, **kw: [1.0], "short", on_error=on_error)
    assert safe(["a", "b"]) == expected
    assert "returned 1 scores for 2 completions" in safe.stats.last_failure


def test_nan_and_inf_are_replaced_row_by_row():
    safe = SafeReward(lambda cs, **kw: [1.0, float("nan"), float("inf"), "x"], "nan", on_error="zero")
    assert safe(list("abcd")) == [1.0, 0.0, 0.0, 0.0]
    assert "row 1: nan" in safe.stats.last_failure


def test_raise_policy_names_the_reward():
    safe = SafeReward(lambda cs, **kw: 3.0, "scalar", on_error="raise")
    with pytest.raises(RewardError, match="reward 'scalar': returned float"):
        safe(["a"])


def test_a_hanging_reward_times_out_and_is_not_called_again_while_stuck():
    release = threading.Event()
    calls = []

    def hangs(completions, **kw):
        calls.append(1)
        release.wait(10)
        return [1.0] * len(completions)

    safe = SafeReward(hangs, "hangs", timeout=0.2)
    start = time.perf_counter()
    assert safe(["a", "b"]) == [None, None]
    assert safe(["a"]) == [None]  # still stuck: not called a second time
    assert time.perf_counter() - start < 3
    assert len(calls) == 1 and safe.stats.failure_kinds == {"timeout": 2}
    release.set()
    time.sleep(0.1)
    assert safe(["a"]) == [1.0]  # recovered once the first call returned


def test_timeout_path_still_reports_exceptions():
    def broken(completions, **kw):
        raise KeyError("answer")

    safe = SafeReward(broken, "needs_answer", timeout=5)
    assert safe(["a"]) == [None]
    assert "KeyError" in safe.stats.last_failure


def test_unknown_policy_is_rejected():
    with pytest.raises(ValueError, match="on_error must be one of"):
        SafeReward(constant(1.0), "x", on_error="ignore")
