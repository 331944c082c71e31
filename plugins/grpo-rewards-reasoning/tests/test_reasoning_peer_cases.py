"""Each reward against its peers' own test cases, transcribed as data.

* TRL: huggingface/trl, tests/test_rewards.py at commit f2cd57710ae345ea6428ae95363267fcf38a3dc8
  (TestThinkFormatReward, TestSoftOverlongPunishmentReward, TestRepetitionPenaltyReward,
  TestCosineScaledReward).
* open-r1: huggingface/open-r1, tests/test_rewards.py at commit 1416fa0cf21595d2083b399a2a0bbddd7f6e9563
  (test_reasoning_steps_reward, test_cosine_scaled_reward, TestRepetitionPenaltyReward,
  test_soft_overlong_punishment_*, TestCodeFormat).

Completions are passed as the peers pass them, ``[{"content": ...}]``; ``cosine_scaled`` runs with
``measure = "raw"``, the peers' exact schedule (its default leaves padding out of the length, and
open-r1's cases make their lengths with spaces). Left out: open-r1's
``language="zh"`` repetition case (jieba word splitting; this package splits on whitespace or
uses token ids) and its cosine behaviour for an unparseable solution (1.0 there, ``None`` here and
in TRL).
"""

from __future__ import annotations

import pickle

import pytest
from grpo_rewards_reasoning import ngram_repetition_penalty

from grpo_rewards import reward


def chat(text: str) -> list[dict[str, str]]:
    return [{"content": text}]


# --- think_format: TRL TestThinkFormatReward (test_valid_format, test_invalid_format, test_mixed_format)
THINK_FORMAT_CASES = [
    ("<think>This is my reasoning.</think>This is my answer.", 1.0),
    ("<think>\nThis is my reasoning.\n</think>\nThis is my answer.", 1.0),
    ("<think>\nThis is\nmy reasoning.\n</think>\nThis is my answer.", 1.0),
    ("<think>\nThis is <some tag> my reasoning.</think>\nThis is my answer.", 1.0),
    ("<think></think>\nThis is my answer.", 1.0),
    ("<think>\nThis is my reasoning.\nThis is my answer.", 0.0),
    ("<think>This is my reasoning.\nThis is my answer.", 0.0),
    ("This is my reasoning. This is my answer.", 0.0),
    ("This is my reasoning.\nThis is my answer.", 0.0),
    ("This is my reasoning.</think>\nThis is my answer.", 0.0),
    ("This is my reasoning.</think>This is my answer.", 0.0),
    ("This<think>is my reasoning.</think>\nThis is my answer.", 0.0),
    ("<think>This is<think>my reasoning.</think></think>This is my answer.", 0.0),
    ("<think>This is</think>\nmy\n<think>reasoning.</think>\nThis is my answer.", 0.0),
    # test_mixed_format
    ("<think>This is my reasoning.</think>This is my answer.", 1.0),
    ("<think>\nThis is my reasoning.\n</think>\nThis is my answer.", 1.0),
    ("<think>This is my reasoning.\nThis is my answer.", 0.0),
    ("This is my reasoning. This is my answer.", 0.0),
]


def test_think_format_matches_trl_cases():
    texts = [t for t, _ in THINK_FORMAT_CASES]
    assert reward("think_format")([chat(t) for t in texts]) == [v for _, v in THINK_FORMAT_CASES]


# --- reasoning_steps: open-r1 test_reasoning_steps_reward
REASONING_STEPS_CASES = [
    ("Step 1: First step\nStep 2: Second step\nStep 3: Third step", 1.0),
    ("First, we do this.\nSecond, we do that.\nFinally, we conclude.", 1.0),
    ("Step 1: Only step", 1 / 3),
    ("First, we do this.\nFinally, we conclude.", 2 / 3),
    ("Just plain text without any clear steps", 0.0),
]


def test_reasoning_steps_matches_open_r1_cases():
    out = reward("reasoning_steps")([chat(t) for t, _ in REASONING_STEPS_CASES])
    assert out == [pytest.approx(v) for _, v in REASONING_STEPS_CASES]


# --- code_format: open-r1 TestCodeFormat, as (completion, language, expected)
CODE_FORMAT_CASES = [
    ("<think>\nLet's solve this\nStep 1: First step\n</think>\n<answer>\n```python\ndef hello():\n"
     "    print('world')\n```\n</answer>", "python", 1.0),
    ("```python\ndef hello():\n    print('world')\n```", "python", 0.0),
    ("<think>Some thinking</think><answer>Just plain text</answer>", "python", 0.0),
    ("<think>Analysis</think><answer>```javascript\nconsole.log('hello');\n```</answer>", "python", 0.0),
    ("<think>Analysis</think><answer>```\ndef hello(): pass\n```</answer>", "python", 0.0),
    ("<answer>```python\ndef hello(): pass\n```</answer><think>Analysis</think>", "python", 0.0),
    ("<think>\nHere's an example:\n```python\nx = 1\n```\nNow the solution:\n</think>\n<answer>\n```python\n"
     "def solution():\n    return 42\n```\n</answer>", "python", 1.0),
    ("<think>\nAnalysis\n</think>\n<answer>\n```javascript\nconsole.log('hello');\n```\n</answer>", "javascript", 1.0),
    ("<think>\nAnalysis\n</think>\n<answer>\n```javascript\nconsole.log('hello');\n```\n</answer>", "python", 0.0),
    ("<think>\nHere's the analysis\n</think>\n<answer>\n```python\nclass Solution:\n    def __init__(self):\n"
     "        self.value = 42\n        \n    def get_value(self):\n        return self.value\n```\n</answer>",
     "python", 1.0),
]


@pytest.mark.parametrize(("text", "language", "expected"), CODE_FORMAT_CASES)
def test_code_format_matches_open_r1_cases(text, language, expected):
    assert reward("code_format", language=language)([chat(text)]) == [expected]


def test_code_format_language_column_overrides_the_parameter():
    # open-r1: "if there is a language field, use it instead of the default language"
    text = CODE_FORMAT_CASES[7][0]  # a javascript answer
    assert reward("code_format", language="python")([chat(text)] * 2, language=["javascript", "python"]) == [1.0, 0.0]


# --- soft_overlong_punishment: TRL TestSoftOverlongPunishmentReward = open-r1 test_soft_overlong_punishment_*
SOFT_OVERLONG_CASES = [(50, 0.0), (110, -1.0), (90, -0.5)]


def test_soft_overlong_punishment_matches_trl_and_open_r1_cases():
    fn = reward("soft_overlong_punishment", max_completion_len=100, soft_punish_cache=20)
    ids = [[1] * n for n, _ in SOFT_OVERLONG_CASES]
    assert fn(["x"] * len(ids), completion_ids=ids) == [pytest.approx(v, abs=1e-4) for _, v in SOFT_OVERLONG_CASES]


# --- ngram_repetition_penalty on token ids: TRL TestRepetitionPenaltyReward, as (ngram_size, max_penalty, ids, expected)
TOKEN_REPETITION_CASES = [
    (2, -1.0, [1, 2, 3, 4], 0.0),  # test_no_repetition_yields_zero
    (2, -1.0, [5, 5, 5, 5, 5], -0.75),  # test_full_repetition_approaches_max_penalty
    (2, -1.0, [1, 2, 1, 2, 1, 2], -0.6),  # test_partial_repetition
    (3, -1.0, [1, 2], 0.0),  # test_completion_shorter_than_ngram_size_yields_zero
    (3, -1.0, [1, 2, 3], 0.0),  # test_completion_exactly_ngram_size_yields_zero
    (3, -1.0, [], 0.0),  # test_empty_completion_yields_zero
    (2, -0.5, [5, 5, 5, 5, 5], -0.375),  # test_max_penalty_scales_reward
    (2, -1.0, [1, 2, 3, 1, 2, 3], -0.4),  # test_ngram_size_changes_reward
    (3, -1.0, [1, 2, 3, 1, 2, 3], -0.25),
    (2, -1.0, [9], 0.0),  # test_batch_of_completions (its other rows are cases above)
]


@pytest.mark.parametrize(("n", "penalty", "ids", "expected"), TOKEN_REPETITION_CASES)
def test_token_repetition_matches_trl_cases(n, penalty, ids, expected):
    fn = reward("ngram_repetition_penalty", ngram_size=n, max_penalty=penalty)
    # the text disagrees with the ids on purpose: with completion_ids given, only the ids count
    assert fn([chat("a a a a a a a a")], completion_ids=[ids]) == [pytest.approx(expected)]


def test_token_repetition_batch_extra_columns_and_pickle_as_trl():
    fn = reward("ngram_repetition_penalty", ngram_size=2, max_penalty=-1.0)
    ids = [[1, 2, 3, 4], [5, 5, 5, 5, 5], [9]]
    assert fn(["x"] * 3, completion_ids=ids, prompts=["x"] * 3) == [0.0, pytest.approx(-0.75), 0.0]
    again = pickle.loads(pickle.dumps(fn))
    assert again(["x"], completion_ids=[[5, 5, 5, 5, 5]]) == [pytest.approx(-0.75)]


def test_positive_max_penalty_is_refused_as_by_both_peers():
    with pytest.raises(ValueError, match="max_penalty 1.5 should not be positive"):
        ngram_repetition_penalty(ngram_size=2, max_penalty=1.5)


# --- ngram_repetition_penalty on words: open-r1 TestRepetitionPenaltyReward, as (ngram_size, max_penalty, text, expected)
WORD_REPETITION_CASES = [
    (2, -1.0, "this is a test sentence", 0.0),  # test_no_repetition
    (2, -1.0, "this this this this this", -0.75),  # test_full_repetition
    (2, -1.0, "this is a this is a test", -1 / 3),  # test_partial_repetition
    (3, -0.5, "this is a test", 0.0),  # test_multiple_completions
    (3, -0.5, "test test test test", -0.25),
    (2, -1.0, "", 0.0),  # test_empty_completion
    (3, -2.0, "this is a this is a test", -0.4),  # test_different_ngram_size
    (3, -1.0, "word", 0.0),  # test_one_word_completion
    (3, -1.0, "two words", 0.0),  # test_two_word_completion
    (3, -1.0, "three different words", 0.0),  # test_three_word_completion
    (3, -1.0, "word word word word", -0.5),  # test_three_word_repetition_completion
    (3, -1.0, "one two one two", 0.0),  # test_four_word_completion_with_repetition
    (3, -0.5, "A B C A B", 0.0),  # test_five_word_completion_with_repetition
    (3, -1.0, "A B C A B C", -0.25),  # test_six_word_completion_with_repetition
    (3, -1.0, "A B C A B C E F G A B C A B C", -0.3846),  # test_long_completion_with_repetition (places=4)
    (3, -1.0, "A B C D E F G H I J K L", 0.0),  # test_long_completion_without_repetition
    (2, -1.0, "that that that that that", -0.75),  # test_full_repetition_with_language (en)
]


@pytest.mark.parametrize(("n", "penalty", "text", "expected"), WORD_REPETITION_CASES)
def test_word_repetition_matches_open_r1_cases(n, penalty, text, expected):
    fn = reward("ngram_repetition_penalty", ngram_size=n, max_penalty=penalty)
    assert fn([chat(text)]) == [pytest.approx(expected, abs=1e-4)]


def test_word_repetition_ignores_case_as_open_r1():  # test_mixed_case
    fn = reward("ngram_repetition_penalty", ngram_size=2, max_penalty=-1.0)
    a, b = fn([chat("This is A Test"), chat("this IS a test")])
    assert a == b


# --- cosine_scaled on token ids: TRL TestCosineScaledReward, as (params, [(completion, solution, n_ids, expected)])
_THIRD, _HALF = r"\boxed{\frac{1}{3}}", r"\boxed{\frac{1}{2}}"
COSINE_TRL_CASES = [
    ({}, [(_THIRD, r"\frac{1}{3}", 25, 0.92678), (_THIRD, r"\frac{1}{3}", 75, 0.57322)]),  # correct_shorter
    ({}, [(_HALF, r"\frac{1}{3}", 25, -0.92678), (_HALF, r"\frac{1}{3}", 75, -0.57322)]),  # wrong_longer
    ({}, [(_THIRD, r"\frac{1}{3}", 50, 0.75), (_HALF, r"\frac{1}{3}", 50, -0.75)]),  # midpoint_values
    ({}, [(_THIRD, r"\frac{1}{3}", 0, 1.0), (_THIRD, r"\frac{1}{3}", 100, 0.5)]),  # correct_boundary_values
    ({}, [(_HALF, r"\frac{1}{3}", 0, -1.0), (_HALF, r"\frac{1}{3}", 100, -0.5)]),  # wrong_boundary_values
    ({}, [(_THIRD, r"\frac{1}{3}", 200, 0.5), (_HALF, r"\frac{1}{3}", 200, -0.5)]),  # exceeding max_len: clamped
    ({"min_value_correct": 0.0, "max_value_correct": 2.0}, [(_THIRD, r"\frac{1}{3}", 50, 1.0)]),  # custom bounds
]


@pytest.mark.parametrize(("params", "rows"), COSINE_TRL_CASES)
def test_cosine_scaled_matches_trl_cases(params, rows):
    fn = reward("cosine_scaled", max_len=100, reference_column="solution", measure="raw", **params)
    out = fn([chat(c) for c, _, _, _ in rows], solution=[s for _, s, _, _ in rows],
             completion_ids=[[1] * n for _, _, n, _ in rows])
    assert out == [pytest.approx(e, abs=1e-4) for _, _, _, e in rows]


def test_cosine_scaled_unparseable_solution_is_none_as_trl():  # test_unparsable_gold_yields_none
    fn = reward("cosine_scaled", max_len=100, reference_column="solution")
    assert fn([chat(r"\boxed{42}")], solution=["no number or formula here"], completion_ids=[[1] * 50]) == [None]


def test_cosine_scaled_reads_a_gold_in_number_words_where_trl_gives_none():
    # TRL's own case uses "forty two" as its unparseable gold; the number grammar reads English number words
    # (docs/answers.md), so here it is the deliberate difference recorded in tests/conformance (number_words)
    fn = reward("cosine_scaled", max_len=100, reference_column="solution", measure="raw")
    assert fn([chat(r"\boxed{42}")], solution=["forty two"], completion_ids=[[1] * 50]) == [pytest.approx(0.75)]


def test_cosine_scaled_pickles_as_trl():  # test_reward_is_picklable
    fn = pickle.loads(pickle.dumps(reward("cosine_scaled", max_len=100, reference_column="solution", measure="raw")))
    assert fn([chat(_THIRD)], solution=[r"\frac{1}{3}"], completion_ids=[[1] * 50]) == [pytest.approx(0.75)]


# --- cosine_scaled on characters: open-r1 test_cosine_scaled_reward, as (completion, solution, padded length, expected)
COSINE_OPEN_R1_CASES = [
    (r"\boxed{\frac{63}{400}}", r"\frac{63}{400}", 20, 0.943),
    (r"\boxed{\frac{63}{400}}", r"\frac{63}{400}", 80, 0.547),
    (r"\boxed{\frac{64}{400}}", r"\frac{63}{400}", 20, -0.942),
    (r"\boxed{\frac{64}{400}}", r"\frac{63}{400}", 80, -0.547),
]


@pytest.mark.parametrize(("content", "solution", "length", "expected"), COSINE_OPEN_R1_CASES)
def test_cosine_scaled_matches_open_r1_cases(content, solution, length, expected):
    fn = reward("cosine_scaled", max_len=100, min_value_wrong=-1.0, max_value_wrong=-0.5,
                min_value_correct=0.5, max_value_correct=1.0, reference_column="solution", measure="raw")
    padded = content + " " * (length - len(content))
    assert fn([chat(padded)], solution=[solution]) == [pytest.approx(expected, abs=0.005)]  # assertAlmostEqual places=2
