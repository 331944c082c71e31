"""The options the peers do not have: another verifier for cosine_scaled, the length unit, junk id cells."""

from __future__ import annotations

import pytest

from grpo_rewards import reward


def test_cosine_scaled_takes_any_registered_verifier():
    fn = reward("cosine_scaled", verifier="exact", max_len=100, measure="raw")  # ids of one repeated token are padding
    out = fn(["<answer>Paris</answer>", "<answer>Lyon</answer>"], answer=["paris", "paris"],
             completion_ids=[[1] * 50, [1] * 50])
    assert out == [pytest.approx(0.75), pytest.approx(-0.75)]


def test_length_unit_forces_tokens_or_characters():
    text = "x" * 90
    tokens = reward("soft_overlong_punishment", max_completion_len=100, soft_punish_cache=20, length_unit="tokens")
    chars = reward("soft_overlong_punishment", max_completion_len=100, soft_punish_cache=20, length_unit="chars")
    assert tokens([text], completion_ids=[[1] * 10]) == [0.0]
    assert chars([text], completion_ids=[[1] * 10]) == [pytest.approx(-0.5)]
    with pytest.raises(KeyError, match="completion_ids"):
        tokens([text])


def test_a_cell_that_is_not_token_ids_scores_none():
    fn = reward("ngram_repetition_penalty", ngram_size=2)
    assert fn(["a a a", "a a a", "a a a"], completion_ids=[None, "5 5 5", [5, 5, 5]]) == [None, None, -0.5]


def test_bad_parameters_are_one_line_errors():
    for name, params, message in [
        ("soft_overlong_punishment", {"max_completion_len": 10, "soft_punish_cache": 20}, "soft_punish_cache"),
        ("cosine_scaled", {"max_len": 0}, "max_len must be positive"),
        ("cosine_scaled", {"length_unit": "words"}, "length_unit must be one of"),
        ("reasoning_steps", {"target_steps": 0}, "target_steps"),
        ("think_format", {"tag": "<think>"}, "tag must be a tag name"),
        ("code_format", {"language": "py thon"}, "language must be"),
    ]:
        with pytest.raises(ValueError, match=message):
            reward(name, **params)
