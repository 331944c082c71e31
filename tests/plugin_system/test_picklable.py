"""Rewards cross a process boundary: the built-ins, verifier wrappers, SafeReward and a composed reward built
from TOML pickle, and score the same in a freshly spawned process (a process pool, TRL's AsyncGRPOTrainer)."""

from __future__ import annotations

import multiprocessing
import pickle
from concurrent.futures import ProcessPoolExecutor

import pytest

from grpo_rewards import load_rewards, reward

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
