"""The ``pairwise_judge`` group reward against scripted local endpoints: every two completions of a prompt
compared (in both orders by default, which cancels a judge's preference for a position), each completion scoring
its share of wins; comparisons without a verdict left out; the group reward conformance suite; the
prompt-injection probes for its two-span template; composed from TOML with weights."""

from __future__ import annotations

import json

import pytest
from hypothesis import strategies as st

from grpo_rewards import load_rewards, reward
from grpo_rewards.judges import probes
from grpo_rewards.judges import prompt as judge_prompt
from grpo_rewards.judges.scripted import ScriptedEndpoint
from grpo_rewards.testing import GroupRewardConformance


def _pair(body):
    text = body["messages"][-1]["content"]
    return judge_prompt.spans(text, "completion_a")[0], judge_prompt.spans(text, "completion_b")[0]


def longer_wins(body):
    a, b = _pair(body)
    return 200, "Comparing.\n" + json.dumps({"winner": "A" if len(a) > len(b) else "B" if len(b) > len(a) else "tie"})


def always_a(body):
    return 200, '{"winner": "A"}'


LONGER = ScriptedEndpoint(longer_wins).__enter__()  # serves the whole module (a daemon thread)


def test_each_completion_scores_its_share_of_wins():
    fn = reward("pairwise_judge", model="m", base_url=LONGER.base_url, cache_size=0)
    before = len(LONGER.requests)
    assert fn(["a", "aaa", "aa", "b", "bb"], prompts=["p", "p", "p", "q", "q"]) == [0.0, 1.0, 0.5, 0.0, 1.0]
    assert len(LONGER.requests) - before == 3 * 2 + 2 * 1  # k (k - 1) per group
    one = reward("pairwise_judge", model="m", base_url=LONGER.base_url, both_orders=False, cache_size=0)
    before = len(LONGER.requests)
    assert one(["a", "aaa", "aa"], prompts=["p"] * 3) == [0.0, 1.0, 0.5]
    assert len(LONGER.requests) - before == 3
    assert fn(["alone"], prompts=["r"]) == [None]  # a group of one has nobody to be compared with


def test_both_orders_cancel_a_judges_preference_for_a_position():
    with ScriptedEndpoint(always_a) as endpoint:
        assert reward("pairwise_judge", model="m", base_url=endpoint.base_url)(["x", "y", "z"], prompts=["p"] * 3) \
            == [0.5, 0.5, 0.5]
        biased = reward("pairwise_judge", model="m", base_url=endpoint.base_url, both_orders=False)
        assert biased(["x", "y", "z"], prompts=["p"] * 3) == [1.0, 0.5, 0.0]


def test_comparisons_without_a_verdict_are_left_out_and_counted():
    def picky(body):
        a, b = _pair(body)
        return (200, "no idea") if "?" in a + b else longer_wins(body)

    with ScriptedEndpoint(picky) as endpoint:
        fn = reward("pairwise_judge", model="m", base_url=endpoint.base_url, structured=True)
        assert fn(["a", "aaa", "?"], prompts=["p"] * 3) == [0.0, 1.0, None]
        m = fn.metrics()
        assert m["judgements"] == 6 and m["parse_failure_rate"] == pytest.approx(4 / 6)
        assert endpoint.requests[0]["response_format"]["json_schema"]["schema"]["required"] == ["winner"]


class TestPairwiseJudgeConformance(GroupRewardConformance):
    reward_name = "pairwise_judge"
    params = {"model": "m", "base_url": LONGER.base_url}
    completion = st.sampled_from(["a", "bb", "ccc", "<answer>4</answer>", ""])
    bounds = (0.0, 1.0)
    seconds_per_row = 3.0  # each of the large rows is compared with the 7 others in both orders, over HTTP


def test_the_probes_pass_and_catch_a_template_that_does_not_escape(monkeypatch):
    fn = reward("pairwise_judge", model="m", base_url="http://127.0.0.1:9/v1")
    assert probes.check_injections(fn) == {}
    monkeypatch.setattr(judge_prompt, "escape", lambda text: text)
    assert probes.check_injections(fn)["fake closing tags of a pairwise judge's spans"] == (1.0, 0.0)


def test_the_shown_example_and_composition_with_weights(tmp_path):
    from grpo_rewards import get_registry

    example = get_registry().reward("pairwise_judge").example.replace("http://localhost:8000/v1", LONGER.base_url)
    config = tmp_path / "r.toml"
    config.write_text(example + '[rewards.correct]\nuse = "exact_match"\nweight = 2.0\n')
    composed = load_rewards(str(config))
    try:
        comps = ["<answer>4</answer> because 2 + 2 = 4", "<answer>5</answer>"]
        scores = composed.score(comps, prompts=["p", "p"], answer=["4", "4"])
        assert scores.columns == {"preferred": [1.0, 0.0], "correct": [2.0, 0.0]}
        assert scores.total == pytest.approx([0.5 + 4.0, 0.0])
    finally:
        for e in composed.entries:
            e.fn.close()
