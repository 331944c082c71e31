"""Rewards scored concurrently give the scores of scoring them one after another, overlap in time, keep
their isolation (a reward that raises or hangs), and a function shared by two aliases is never entered twice
at once."""

from __future__ import annotations

import threading
import time
from typing import Any

from grpo_rewards.compose import compose

COMPLETIONS = ["a", "bb", "", "dddd", "ee"]


def lengths(completions: list[Any], **_: Any) -> list[float | None]:
    return [None if not c else float(len(c)) / 3 for c in completions]


def vowels(completions: list[Any], **_: Any) -> list[float | None]:
    return [sum(ch in "ae" for ch in c) * 0.1 for c in completions]


def boom(completions: list[Any], **_: Any) -> list[float | None]:
    raise RuntimeError("broken reward")


def both_ways(rewards: dict[str, Any]) -> tuple[Any, Any]:
    composed = compose(rewards)
    composed.concurrent = False
    sequential = composed.score(COMPLETIONS)
    composed.concurrent = True
    return sequential, composed.score(COMPLETIONS)


def test_concurrent_scores_are_bit_identical() -> None:
    seq, con = both_ways({"len": (lengths, 0.7), "vow": (vowels, 1.3), "len2": (lengths, -0.1)})
    assert con.total == seq.total and con.columns == seq.columns
    assert list(con.columns) == ["len", "vow", "len2"]
    assert con.total[2] is not None  # vowels scores the empty row: 0.0 * 1.3


def test_a_raising_reward_keeps_its_on_error() -> None:
    seq, con = both_ways({"len": lengths, "boom": boom})
    assert con.columns == seq.columns and con.columns["boom"] == [None] * 5


def test_rewards_overlap_in_time() -> None:
    def slow(completions: list[Any], **_: Any) -> list[float]:
        time.sleep(0.4)  # waits like a reward on its sandbox or worker processes
        return [1.0] * len(completions)

    def slow2(completions: list[Any], **_: Any) -> list[float]:
        time.sleep(0.4)
        return [2.0] * len(completions)

    composed = compose({"a": slow, "b": slow2}, timeout=30)
    composed.concurrent = False
    t0 = time.perf_counter()
    composed.score(COMPLETIONS)
    sequential = time.perf_counter() - t0
    composed.concurrent = True
    t0 = time.perf_counter()
    scores = composed.score(COMPLETIONS)
    concurrent = time.perf_counter() - t0
    assert sequential >= 0.8
    assert concurrent < 0.75, (sequential, concurrent)
    assert scores.total == [3.0] * 5


def test_a_hanging_reward_times_out_without_holding_the_others() -> None:
    def hang(completions: list[Any], **_: Any) -> list[float]:
        time.sleep(3)
        return [1.0] * len(completions)

    composed = compose({"hang": hang, "len": lengths}, timeout=0.5)
    t0 = time.perf_counter()
    scores = composed.score(COMPLETIONS)
    assert time.perf_counter() - t0 < 2.5
    assert scores.columns["hang"] == [None] * 5 and scores.columns["len"] == lengths(COMPLETIONS)


def test_a_function_shared_by_two_aliases_is_not_entered_twice_at_once() -> None:
    inside, most = [0], [0]
    lock = threading.Lock()

    class Stateful:
        def __call__(self, completions: list[Any], **_: Any) -> list[float]:
            with lock:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            time.sleep(0.2)
            with lock:
                inside[0] -= 1
            return [0.5] * len(completions)

    shared = Stateful()
    composed = compose({"x": shared, "y": (shared, 2.0), "len": lengths}, timeout=30)
    scores = composed.score(COMPLETIONS)
    assert most[0] == 1
    assert scores.columns["y"] == [0.5] * 5
