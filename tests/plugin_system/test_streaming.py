"""One batch scored part by part (grpo_rewards.streaming, SafeReward.in_parts): the scores of scoring it whole,
in order; the parts of a batch are one call for the reward's contract (one timeout, one count towards
max_consecutive_failures); a reward that raises under on_error = "raise" is raised by result()."""

from __future__ import annotations

import math
import threading
import time

import pytest

from grpo_rewards.compose import compose
from grpo_rewards.contract import RewardError, SafeReward
from grpo_rewards.streaming import StreamingScore

TEXTS = [f"completion {i} " + "x" * (i % 5) for i in range(12)]
ANSWERS = [str(i % 3) for i in range(12)]
PARTS = [(0, 3), (3, 4), (4, 9), (9, 12)]


def length(completions, **kw):
    return [float(len(c)) for c in completions]


def answer_in(completions, answer, **kw):
    return [None if a == "0" else float(a in c) for c, a in zip(completions, answer, strict=True)]


def raises_on_four(completions, **kw):
    if any("x" * 4 in c for c in completions):
        raise ValueError("four x")
    return [1.0] * len(completions)


def streamed(composed, parts=PARTS):
    with StreamingScore(composed) as stream:
        for a, b in parts:
            stream.add(TEXTS[a:b], answer=ANSWERS[a:b])
        return stream.result()


@pytest.mark.parametrize("concurrent", [True, False])
def test_parts_score_as_the_whole_batch(concurrent):
    composed = compose({"length": (length, 0.5), "answer": answer_in, "raises": (raises_on_four, 2.0)})
    whole = composed.score(TEXTS, answer=ANSWERS)
    composed.concurrent = concurrent
    parts = streamed(composed)
    assert parts.total == whole.total and parts.columns == whole.columns
    assert list(parts.columns) == ["length", "answer", "raises"]
    assert parts.columns["raises"] == [None if "xxxx" in t else 1.0 for t in TEXTS]


def test_each_reward_sees_the_parts_in_order_one_at_a_time():
    seen: list[tuple[int, int]] = []
    running = threading.Event()

    def slow_first(completions, **kw):
        assert not running.is_set()  # never two calls of one reward at once
        running.set()
        time.sleep(0.05 if completions[0] == TEXTS[0] else 0)
        seen.append((TEXTS.index(completions[0]), len(completions)))
        running.clear()
        return [0.0] * len(completions)

    streamed(compose({"slow": slow_first, "length": length}))
    assert seen == [(a, b - a) for a, b in PARTS]


def test_a_batch_in_parts_is_one_call_towards_max_consecutive_failures():
    def always_fails(completions, **kw):
        return []  # a wrong length: every call fails

    composed = compose({"broken": SafeReward(always_fails, max_consecutive_failures=2), "length": length})
    scores = streamed(composed)  # one batch of four failing parts: one failed call, the run goes on
    stats = composed.entries[0].fn.stats
    assert (stats.calls, stats.failures, stats.failed_rows, stats.consecutive_failures) == (1, 1, 12, 1)
    assert scores.columns["broken"] == [None] * 12
    with pytest.raises(RewardError, match="failed 2 calls in a row"):
        streamed(composed)  # the second failed batch reaches the limit


def test_the_parts_share_one_timeout():
    def slow(completions, **kw):
        time.sleep(0.4)
        return [1.0] * len(completions)

    composed = compose({"slow": slow}, timeout=1.0)
    start = time.monotonic()
    scores = streamed(composed)
    took = time.monotonic() - start
    # parts 1 and 2 score (0.8 s), part 3 runs out of the second left, part 4 finds none left: not 4 timeouts
    assert scores.columns["slow"] == [1.0] * 4 + [None] * 8
    assert took < 2.5
    stats = composed.entries[0].fn.stats
    assert (stats.calls, stats.failures, stats.consecutive_failures) == (1, 1, 0)
    time.sleep(0.5)  # the timed-out call's thread returns


def test_on_error_raise_is_raised_by_result():
    def broken(completions, **kw):
        raise ValueError("boom")

    composed = compose({"broken": broken, "length": length}, on_error="raise")
    with pytest.raises(RewardError, match="broken"):
        streamed(composed)


def test_the_unscored_warning_names_rows_of_the_whole_batch(caplog):
    def none_after_five(completions, answer, **kw):
        return [None if int(c.split()[1]) >= 5 else 1.0 for c in completions]

    with caplog.at_level("WARNING", logger="grpo.rewards"):
        scores = streamed(compose({"late": none_after_five}))
    assert [i for i, t in enumerate(scores.total) if t is None] == list(range(5, 12))
    assert "row(s) 5, 6, 7, 8, 9, 10, 11 of 12" in caplog.text
    assert not any(math.isnan(t) for t in scores.total if t is not None)
