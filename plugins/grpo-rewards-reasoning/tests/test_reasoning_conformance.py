"""The package as the toolkit sees it: found through its entry point, the kit's conformance suite for
every reward, ``grpo rewards check`` on each, and the scan that replaces open-r1's code-format regex."""

from __future__ import annotations

import re
import subprocess
import sys
import time

import pytest
from grpo_rewards_reasoning import code_format_matches
from hypothesis import given, settings
from hypothesis import strategies as st

from grpo_rewards import load_registry, reward
from grpo_rewards.hacking import PAIRED_TRICKS, TRICKS, check
from grpo_rewards.testing import RewardConformance
from grpo_rewards.testing.strategies import rendered_numbers

NAMES = ["think_format", "reasoning_steps", "code_format", "soft_overlong_punishment", "cosine_scaled",
         "ngram_repetition_penalty"]
_IDS = {"completion_ids": st.lists(st.integers(0, 200_000), max_size=150)}


def test_found_through_its_own_distribution_and_entry_point():
    registry = load_registry()
    info = next(p for p in registry.plugins if p.name == "reasoning_rewards")
    assert info.distribution == "grpo-rewards-reasoning"
    assert info.registers == {"rewards": NAMES}
    assert all(registry.reward(n).plugin == "reasoning_rewards" for n in NAMES)


class TestThinkFormat(RewardConformance):
    reward_name = "think_format"
    bounds = (0.0, 1.0)


class TestReasoningSteps(RewardConformance):
    reward_name = "reasoning_steps"
    bounds = (0.0, 1.0)


class TestCodeFormat(RewardConformance):
    reward_name = "code_format"
    bounds = (0.0, 1.0)


class TestSoftOverlongOnCharacters(RewardConformance):
    reward_name = "soft_overlong_punishment"
    params = {"max_completion_len": 100, "soft_punish_cache": 20}
    bounds = (-1.0, 0.0)


class TestSoftOverlongOnTokens(TestSoftOverlongOnCharacters):
    columns = _IDS


class TestRepetitionOnWords(RewardConformance):
    reward_name = "ngram_repetition_penalty"
    bounds = (-1.0, 0.0)


class TestRepetitionOnTokens(TestRepetitionOnWords):
    params = {"ngram_size": 2, "max_penalty": -0.5}
    columns = _IDS
    bounds = (-0.5, 0.0)


class TestCosineScaled(RewardConformance):
    reward_name = "cosine_scaled"
    params = {"max_len": 200}
    columns = {"answer": rendered_numbers().map(lambda vt: vt[1])}
    bounds = (-1.0, 1.0)


@pytest.mark.parametrize("name", [n for n in NAMES if n != "cosine_scaled"])
def test_grpo_rewards_check_finds_no_hack(name):
    run = subprocess.run([sys.executable, "-m", "grpo_rewards", "rewards", "check", name],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "no trick beats an honest wrong answer" in run.stdout


def test_cosine_scaled_check_flags_content_never_padding():
    """The cosine schedule pays a long wrong answer more than a short one (by design: "a longer wrong
    completion is penalized less, preserving exploration"), so a trick whose wrong answer holds more
    text than the honest one beats it: that is the documented exception. Padding buys nothing: no
    padding probe is flagged, in text or in token ids, unless ``measure = "raw"`` (the peers' schedule).
    With a flat wrong range the reward is as hackable as its verifier (``math_equivalence``), no more."""
    flat = check("cosine_scaled", min_value_wrong=-1.0, max_value_wrong=-1.0)
    assert set(flat) == set(check("math_equivalence"))
    padding = {t for t in PAIRED_TRICKS if "padded" in t}
    default = check("cosine_scaled")
    assert set(default) <= set(TRICKS)  # single tricks with more words than the honest answer, nothing paired
    raw = check("cosine_scaled", measure="raw")
    assert padding <= set(raw)
    assert {f"{t} (token ids)" for t in padding} <= set(raw)
    run = subprocess.run([sys.executable, "-m", "grpo_rewards", "rewards", "check", "cosine_scaled"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 1 and "padded" not in run.stdout


_OPEN_R1_CODE_FORMAT = r"^<think>\n.*?\n</think>\n<answer>\n.*?```{}.*?```.*?\n</answer>$"
_PIECES = ["<think>\n", "\n</think>\n<answer>\n", "```python", "```", "\n</answer>", "\n", "x", "<think>", "</answer>"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=9))
def test_code_format_scan_agrees_with_open_r1_regex(pieces):
    text = "".join(pieces)
    expected = bool(re.match(_OPEN_R1_CODE_FORMAT.format("python"), text, re.DOTALL | re.MULTILINE))
    assert code_format_matches(text, "python") == expected


@pytest.mark.parametrize("name", NAMES)
def test_hostile_long_completion_is_scored_quickly(name):
    # open-r1's code-format regex backtracks for minutes on this (30 000 characters)
    text = "<think>\n" + "\n</think>\n<answer>\n```python```" * 1000
    params = {"max_len": 200} if name == "cosine_scaled" else {}
    start = time.monotonic()
    out = reward(name, **params)([text, "Step 1: " * 20_000], answer=["42", "42"])
    assert len(out) == 2 and time.monotonic() - start < 5.0
