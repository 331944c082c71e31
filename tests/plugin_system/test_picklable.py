"""Rewards cross a process boundary: the built-ins, verifier wrappers, SafeReward and a composed reward built
from TOML pickle, and score the same in a freshly spawned process (a process pool, TRL's AsyncGRPOTrainer).
Every reward the built-in plugins and the example plugin register is in :data:`EVERY_BUILTIN`."""

from __future__ import annotations

import multiprocessing
import operator
import pickle
from concurrent.futures import ProcessPoolExecutor

import pytest

from grpo_rewards import load_rewards, reward
from grpo_rewards.judges.scripted import ScriptedEndpoint
from grpo_rewards.plugins import get_registry
from grpo_rewards.sandbox import probe

COMPLETIONS = [
    "<reasoning>\n2 + 2 = 4\n</reasoning>\n<answer>\n4\n</answer>\n",
    "<think>a\nb</think> <answer>5</answer> trailing",
    "Hi Ann,\nthe report is attached.\nBest regards,\nBob\n+1 415 555 2671\n",
    "no tags at all",
]
COLUMNS = {
    "answer": ["4", "4", "7", None],
    "keywords": ["report", "", "report, attached", None],
    "recipient": ["Ann", None, "Ann Lee", ""],
    "ideal": [None, None, None, None],
}

OWN = [
    ("strict_format", {}),
    ("soft_format", {"reasoning_tag": "think", "opened_in_prompt": False}),
    ("xml_count", {"mode": "lenient"}),
    ("xml_count", {"reasoning_tag": "think"}),
    ("email_rules", {"keyword_partial": True, "phone_region": "GB"}),
    ("verify:math", {"value": 2.0, "wrong_value": -1.0}),
]


def score_pickled(data: bytes, completions: list, columns: dict) -> list:
    return pickle.loads(data)(completions, **columns)


def in_spawned_process(fn, completions=COMPLETIONS, columns=COLUMNS) -> list:
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(score_pickled, pickle.dumps(fn), completions, columns).result(timeout=120)


@pytest.mark.parametrize("name, params", OWN, ids=[f"{n}-{i}" for i, (n, _) in enumerate(OWN)])
def test_builtin_reward_pickles_and_scores_the_same_in_a_spawned_process(name, params):
    fn = reward(name, **params)
    here = fn(COMPLETIONS, **COLUMNS)
    assert in_spawned_process(fn) == here
    assert fn.__name__ == pickle.loads(pickle.dumps(fn)).__name__


def test_a_composed_reward_from_toml_pickles_and_scores_the_same(tmp_path):
    path = tmp_path / "rewards.toml"
    path.write_text(
        '[rewards.fmt]\nuse = "strict_format"\nweight = 0.5\n\n'
        '[rewards.tags]\nuse = "xml_count"\nreasoning_tag = "think"\n\n'
        '[rewards.email]\nuse = "email_rules"\ntimeout = 30\non_error = "zero"\n\n'
        '[rewards.math]\nuse = "verify:math"\n'
    )
    composed = load_rewards(str(path))
    here = composed.score(COMPLETIONS, **COLUMNS)
    copy = pickle.loads(pickle.dumps(composed))
    assert [(e.alias, e.weight, e.fn.timeout, e.fn.on_error) for e in copy.entries] == [
        (e.alias, e.weight, e.fn.timeout, e.fn.on_error) for e in composed.entries]
    assert all(e.fn.isolation == "process" for e in composed.entries)
    assert in_spawned_process(composed) == here.total
    assert copy.score(COMPLETIONS, **COLUMNS) == here
    for c in (composed, copy):
        for e in c.entries:
            e.fn.close()


# Every reward the built-in plugins and the example plugin register, with parameters that exercise it, scored on
# a batch that reaches its number, math, format, email and code paths (a new built-in must add its row here).
ADD_TESTS = '{"language": "python", "test_cases": [{"input": "1 2\\n", "output": "3\\n"}]}'
EVERY_COMPLETION = [
    "<think>two and two</think>\n<answer>\n4\n</answer>\n",
    "<answer>50%</answer>",
    "The total is\n#### 1,000",
    "We get \\boxed{\\frac{3}{4}}.",
    "Dear Ana,\nthe report is attached and the meeting is on Monday.\n\nBest regards,\nBo\nbo@example.com",
    [{"role": "assistant", "content": "<answer>x + 1</answer>"}],
    "```python\na, b = map(int, input().split())\nprint(a + b)\n```",
    "the the the the the the the the",
]
EVERY_COLUMN = {
    "answer": ["4", "0.5", "1000", "0.75", "7", "1 + x", "3", None],
    "keywords": [["report"], None, "meeting, Monday", ["report"], ["report", "Monday"], None, None, "the"],
    "ideal": [None] * 8,
    "recipient": ["Ana", None, "Ana", "Ana", "Ana Lee", None, None, "Bo"],
    "verification_info": [ADD_TESTS] * 8,
    "prompts": ["What is 2 + 2?"] * 8,
}
CODE = {"cpu_seconds": 2.0, "wall_seconds": 4.0, "memory_mb": 512}
JUDGE = ScriptedEndpoint().__enter__()  # the judges' endpoint, for the whole module (a daemon thread)
# registered built-ins that do not pickle, on purpose
NOT_PICKLED = {"reward_model": "an alias calling its model process from a thread (test_reward_model_process.py)"}
EVERY_BUILTIN = {
    "majority_vote": {"min_group": 1, "by": "answer"},  # groups of one row: each its own majority
    "llm_judge": {"model": "m", "base_url": JUDGE.base_url, "question": "Is it right?"},
    "pairwise_judge": {"model": "m", "base_url": JUDGE.base_url},
    "exact_match": {},
    "integer_format": {"allow_negative": True},
    "numeric_proximity": {"mode": "tiered"},
    "math_equivalence": {"workers": 1},
    "xml_count": {},
    "strict_format": {},
    "soft_format": {},
    "final_answer_format": {"reasoning_end": "<end_working_out>", "answer_start": "<SOLUTION>",
                            "answer_end": "</SOLUTION>", "eos": "<|endoftext|>"},
    "xml_format": {"fields": ["reasoning", ["code", "answer"]]},
    "email_rules": {},
    "code_execution": CODE,
    "code_execution_binary": CODE,
    "repetition_penalty": {"ngram_size": 2},
    "length_window": {"min_words": 2, "max_words": 6, "slope_words": 4},
    "tool_use": {},
}
EVERY_VERIFIER = """
[rewards]
timeout = 120

[rewards.correct]
use = "exact_match"
[rewards.integer]
use = "integer_format"
weight = 0.5
[rewards.close]
use = "numeric_proximity"
[rewards.math]
use = "math_equivalence"
workers = 1
[rewards.numeric]
use = "verify:numeric"
[rewards.exact]
use = "verify:exact"
extract = "answer_tag"
[rewards.loops]
use = "repetition_penalty"
[rewards.length]
use = "length_window"
min_words = 3
"""


@pytest.fixture(scope="module")
def spawned():
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        yield pool


def test_every_registered_builtin_has_a_row():
    registry = get_registry()
    own = {p.name for p in registry.plugins if p.builtin or p.distribution == "grpo-reward-length"}
    assert {name for name, spec in registry.rewards.items() if spec.plugin in own} == \
        set(EVERY_BUILTIN) | set(NOT_PICKLED)


@pytest.mark.parametrize("name", sorted(EVERY_BUILTIN))
def test_every_registered_builtin_scores_the_same_in_a_spawned_process(spawned, name):
    if name.startswith("code_execution") and probe.probe().profile not in ("default", "hardened", "strict"):
        pytest.skip("no default sandbox profile on this machine")
    fn = reward(name, **EVERY_BUILTIN[name])
    here = fn(EVERY_COMPLETION, **EVERY_COLUMN)
    assert any(s is not None for s in here)
    there = spawned.submit(score_pickled, pickle.dumps(fn), EVERY_COMPLETION, EVERY_COLUMN).result(timeout=300)
    assert there == here


def test_a_toml_composed_reward_of_the_number_rewards_scores_the_same_in_a_spawned_process(spawned, tmp_path):
    path = tmp_path / "rewards.toml"
    path.write_text(EVERY_VERIFIER)
    composed = load_rewards(str(path))
    try:
        here = composed.score(EVERY_COMPLETION, **EVERY_COLUMN)
        there = spawned.submit(operator.methodcaller("score", EVERY_COMPLETION, **EVERY_COLUMN),
                               composed).result(timeout=300)
        assert there.columns == here.columns and there.total == here.total
        assert all(any(s is not None for s in column) for column in here.columns.values())
    finally:
        for e in composed.entries:
            e.fn.close()


def _score_math_then_exit(queue) -> None:
    queue.put(reward("math_equivalence", workers=1)(["<answer>x + 1</answer>"], answer=["1+x"]))


def test_a_spawned_process_that_used_math_equivalence_exits():
    # a multiprocessing child runs no atexit hooks and waits for its own children when it exits: the math
    # workers must be stopped before that, or the process (a pool worker, TRL's async trainer) never exits
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    child = ctx.Process(target=_score_math_then_exit, args=(queue,))
    child.start()
    try:
        assert queue.get(timeout=120) == [1.0]
        child.join(timeout=30)
        assert child.exitcode == 0, "the process did not exit"
    finally:
        if child.is_alive():
            child.kill()
