"""Group rewards (grpo_rewards.group_reward): rows grouped by prompt wherever they sit, each group scored alone,
a failing group losing only its own rows under SafeReward (retried group by group, never row by row), pickling by
name into a worker process; and the ``majority_vote`` built-in."""

from __future__ import annotations

import pickle

import pytest

from grpo_rewards import GroupReward, SafeReward, compose, group_reward, reward
from grpo_rewards.completions import completion_text
from grpo_rewards.group_reward import group_rows

SEEN: list[list[str]] = []


@group_reward
def share_of_group(completions, **columns):
    """Each completion's share of its group: equal texts count together."""
    texts = [completion_text(c) for c in completions]
    return [texts.count(t) / len(texts) for t in texts]


@group_reward
def breaks_on_boom(completions, **columns):
    if any("boom" in completion_text(c) for c in completions):
        raise RuntimeError("boom in this group")
    return [float(len(completions))] * len(completions)


@group_reward(by="question_id")
def group_size(completions, **columns):
    SEEN.append(list(columns["question_id"]))
    return [float(len(completions))] * len(completions)


def test_rows_are_grouped_by_prompt_wherever_they_sit():
    comps = ["a", "b", "a", "a", "c", "a"]
    prompts = ["p", "q", "p", "q", "p", "q"]
    assert share_of_group(comps, prompts=prompts) == [2 / 3, 1 / 3, 2 / 3, 2 / 3, 1 / 3, 2 / 3]
    chat = [[{"role": "user", "content": "p"}], [{"role": "user", "content": "q"}]]
    assert share_of_group(comps, prompts=[chat[0], chat[1], chat[0], chat[1], chat[0], chat[1]]) == \
        share_of_group(comps, prompts=prompts)
    assert group_rows(["x", "y", "x", ["m"], ["m"]]) == [[0, 2], [1], [3, 4]]


def test_each_group_gets_its_own_columns_and_another_grouping_column():
    SEEN.clear()
    assert group_size(["a", "b", "c"], question_id=[7, 8, 7], prompts=["same"] * 3) == [2.0, 1.0, 2.0]
    assert SEEN == [[7, 7], [8]]


def test_the_grouping_column_is_required_and_a_wrong_length_refused():
    with pytest.raises(KeyError, match="column 'prompts' is missing"):
        share_of_group(["a"], answer=["1"])

    @group_reward
    def short(completions, **_):
        return [1.0]

    with pytest.raises(ValueError, match="returned 1 scores for a group of 2"):
        short(["a", "b"], prompts=["p", "p"])


def test_a_failing_group_loses_only_its_rows_and_is_never_scored_as_groups_of_one():
    safe = SafeReward(breaks_on_boom, timeout=30)
    comps = ["x", "boom", "y", "z", "w", "v"]
    prompts = ["p", "p", "q", "q", "q", "r"]
    assert safe(comps, prompts=prompts) == [None, None, 3.0, 3.0, 3.0, 1.0]  # a row alone would score 1.0
    assert safe.stats.failed_rows == 2 and safe.stats.failure_kinds == {"exception": 1}
    assert safe(["boom", "boom"], prompts=["p", "p"]) == [None, None]  # one group: the call failed


def test_a_decorated_reward_pickles_by_name_and_runs_in_a_worker_process():
    assert pickle.loads(pickle.dumps(share_of_group)) is share_of_group
    safe = SafeReward(share_of_group, timeout=60)
    try:
        assert safe.isolation == "process"
        assert safe(["a", "a", "b"], prompts=["p", "p", "p"]) == [2 / 3, 2 / 3, 1 / 3]
    finally:
        safe.close()
    # an instance around a module-level callable pickles by value
    built = reward("majority_vote")
    again = pickle.loads(pickle.dumps(built))
    assert isinstance(again, GroupReward) and again.by == "prompts"


def test_composed_with_a_row_reward_and_weights():
    total = compose({"vote": (reward("majority_vote"), 2.0), "fmt": (reward("integer_format"), 0.5)})
    comps = ["<answer>4</answer>", "<answer>4</answer>", "<answer>5</answer>"]
    scores = total.score(comps, prompts=["p"] * 3)
    assert scores.columns["vote"] == [1.0, 1.0, 0.0]
    fmt = scores.columns["fmt"]
    assert scores.total == pytest.approx([2.0 * v + 0.5 * f for v, f in zip([1.0, 1.0, 0.0], fmt)])


# ---- majority_vote -------------------------------------------------------------------------------------------


def _vote(comps, prompts=None, **params):
    return reward("majority_vote", **params)(comps, prompts=prompts or ["p"] * len(comps))


def test_majority_vote_rewards_the_groups_most_common_answer():
    comps = ["<answer>1,000</answer>", "The answer is 1000.", "<answer>$1000.00</answer>", "<answer>7</answer>",
             "no answer at all", "<answer>41 or 42</answer>"]
    assert _vote(comps) == [1.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    assert _vote(["<answer>Paris</answer>", "<answer> paris </answer>", "<answer>Lyon</answer>"]) == [1.0, 1.0, 0.0]
    assert _vote(["<answer>3</answer>", "<answer>4</answer>"] * 2, prompts=["a", "a", "b", "b"]) == [None] * 4  # ties


def test_majority_vote_gives_no_pseudo_label_where_there_is_no_clear_majority():
    comps = ["<answer>1</answer>", "<answer>1</answer>", "<answer>2</answer>", "<answer>3</answer>", "x"]
    assert _vote(comps) == [1.0, 1.0, 0.0, 0.0, 0.0]
    assert _vote(comps, min_share=0.5) == [None] * 5  # 2 of 5
    assert _vote(comps, min_share=0.4) == [1.0, 1.0, 0.0, 0.0, 0.0]
    assert _vote(["<answer>9</answer>"]) == [None]  # a group of one is its own majority: no signal
    assert _vote(["<answer>9</answer>"], min_group=1) == [1.0]
    assert _vote(["none", "at all"]) == [None, None]
    assert _vote(comps, value=2.0, wrong_value=-1.0) == [2.0, 2.0, -1.0, -1.0, -1.0]


@pytest.mark.parametrize(("params", "message"), [
    ({"min_share": 1.5}, "min_share must be within"),
    ({"min_group": 0}, "min_group must be >= 1"),
    ({"extract": "regex"}, "needs a 'pattern'"),
])
def test_majority_vote_refuses_bad_parameters(params, message):
    with pytest.raises(ValueError, match=message):
        reward("majority_vote", **params)


def test_the_shown_example_composes_and_scores(tmp_path):
    from grpo_rewards import get_registry, load_rewards

    config = tmp_path / "r.toml"
    config.write_text(get_registry().reward("majority_vote").example)
    composed = load_rewards(str(config))
    scores = composed.score(["<answer>4</answer>", "The answer is 4.", "<answer>5</answer>"], prompts=["p"] * 3)
    assert scores.columns == {"consensus": [1.0, 1.0, 0.0]}
