"""The kit's fixtures build and compose rewards (loaded here with -p, as the pytest11 entry point does)."""

from __future__ import annotations

pytest_plugins = ["grpo_rewards.testing.pytest_plugin"]


def test_fixtures_build_and_compose(grpo_reward, grpo_compose) -> None:  # type: ignore[no-untyped-def]
    assert grpo_reward("exact_match")(["<answer>4</answer>", "<answer>5</answer>"], answer=["4", "4"]) == [2.0, 0.0]
    total = grpo_compose('[rewards.c]\nuse = "exact_match"\nvalue = 1.0\n')
    assert total(["<answer>4</answer>"], answer=["4"])[0] == 1.0
