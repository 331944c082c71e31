"""verify:<name> rewards: a row without a reference does not apply (None), whatever the answer says."""

from __future__ import annotations

import pytest

from grpo_rewards import Verdict, reward_from_verifier


def same_text(answer: str, reference: str) -> Verdict:
    return Verdict.correct() if answer.strip() == reference.strip() else Verdict.wrong()


@pytest.mark.parametrize("missing", [None, float("nan"), "", "   "])
def test_a_missing_reference_scores_none_even_for_a_matching_answer(missing):
    fn = reward_from_verifier(same_text)
    answers = ["<answer>None</answer>", "<answer>nan</answer>", "<answer></answer>", "<answer>4</answer>"]
    assert fn(answers, answer=[missing] * 4) == [None] * 4
    assert fn(["<answer>4</answer>", "<answer>5</answer>"], answer=["4", "4"]) == [1.0, 0.0]


def test_scoring_and_explaining_survive_numbers_python_cannot_print():
    from grpo_rewards import reward

    big = "7" * 5000  # over Python's 4,300-digit str(int) limit
    fn = reward("exact_match", value=1.0)
    rows = [f"<answer>{big}</answer>", "<answer>3/4</answer>", "<answer>1/3</answer>"]
    assert fn(rows, answer=[big, "0.75", "0.75"]) == [1.0, 1.0, 0.0]
    why = fn.explain(rows, answer=[big, "0.75", "0.75"])
    assert why[0]["status"] == "ok" and why[0]["parsed"] == big
    assert [w["parsed"] for w in why[1:]] == ["0.75", "1/3"]
