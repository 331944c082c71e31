"""The example plugin is installed and found through its own entry point, and its rewards behave."""

from __future__ import annotations

import pytest
from grpo_reward_length import length_window, repetition_penalty
from hypothesis import given
from hypothesis import strategies as st

from grpo_rewards import load_registry, reward


def test_found_through_its_own_distribution_and_entry_point():
    registry = load_registry()
    info = next(p for p in registry.plugins if p.name == "length_rewards")
    assert info.distribution == "grpo-reward-length" and info.version == "0.1.0"
    assert info.registers == {"rewards": ["repetition_penalty", "length_window"]}
    assert registry.reward("repetition_penalty").plugin == "length_rewards"


def test_repetition_penalty_matches_open_r1_rule():
    fn = reward("repetition_penalty", ngram_size=2, max_penalty=-1.0)
    # "a b a b a b": bigrams ab ba ab ba ab -> 2 unique of 5 -> -(1 - 2/5)
    assert fn(["a b a b a b", "one two three", "short"]) == [pytest.approx(-0.6), 0.0, 0.0]


def test_length_window_slopes_outside_the_window():
    fn = length_window(min_words=2, max_words=4, slope_words=2)
    assert fn(["one", "one two", "a b c d", "a b c d e", "a b c d e f g"]) == [0.5, 1.0, 1.0, 0.5, 0.0]


def test_bad_parameters_are_one_line_errors():
    with pytest.raises(ValueError, match="max_penalty must be <= 0"):
        repetition_penalty(max_penalty=1.0)


@given(st.lists(st.text(max_size=200), max_size=8))
def test_scores_are_bounded_for_any_text(texts):
    for score in repetition_penalty(max_penalty=-2.0)(texts):
        assert -2.0 <= score <= 0.0
    for score in length_window(value=3.0)(texts):
        assert 0.0 <= score <= 3.0


@pytest.mark.parametrize("name", ["repetition_penalty", "length_window"])
def test_grpo_rewards_check_finds_no_hack(name):
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-m", "grpo_rewards", "rewards", "check", name],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.mark.parametrize(("unit", "times"), [("\n", 500), (" ok", 30), (" Let me check.", 8),
                                           (" 再检查一遍。", 30), (" تحقق مرة أخرى.", 8), (".", 900)])
def test_length_window_padding_buys_no_words(unit, times):
    short = "The answer is 41."  # four words, under the window
    fn = length_window(min_words=20, max_words=100, slope_words=20)
    raw = length_window(min_words=20, max_words=100, slope_words=20, measure="raw")
    assert fn([short + unit * times]) == fn([short + unit])
    if unit.strip(" .\n"):  # padding that adds words: counting every word pays for it
        assert raw([short + unit * times]) > raw([short + unit])


def test_length_window_still_counts_new_words():
    fn = length_window(min_words=5, max_words=100, slope_words=5)
    assert fn(["one two", "one two three four five"]) == [pytest.approx(0.4), 1.0]
