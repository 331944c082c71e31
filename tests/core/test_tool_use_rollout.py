"""What the rewards see of a scripted multi-turn rollout (grpo_core.generation.multi_turn): a conversation the model
never answers earns no correctness credit, and ``tool_use`` scores the rollout's own facts."""

from __future__ import annotations

from test_multi_turn_rollout import CALL, _run
from tool_models import tool_tokenizer

from grpo_rewards import reward
from grpo_rewards.completions import completion_text

BAD = "<answer>42</answer><tool_call>\n{not json}\n</tool_call><|im_end|>"


def test_a_rollout_that_stops_in_a_calling_turn_has_no_answer() -> None:
    """Rows that hit max_tool_calling_iterations with the reference written beside a call (valid or unreadable)
    score as no answer; a row that answers after its call scores as its answer; tool_use reads the facts."""
    tok = tool_tokenizer()
    rollout, _ = _run(tok, {0: [CALL.format("6*7"), "<answer>42</answer>" + CALL.format("6*7")],
                            1: [CALL.format("6*7"), BAD],
                            2: [CALL.format("6*7"), "<answer>42</answer><|im_end|>"]},
                      max_tool_calling_iterations=1)
    assert [f["stop"] for f in rollout.facts] == ["turns", "turns", "answer"]
    last = [c[-1] for c in rollout.conversations]
    assert "tool_calls" in last[0] and last[1]["invalid_tool_calls"][0]["text"] == "{not json}"
    assert [completion_text(c) for c in rollout.conversations] == ["", "", "<answer>42</answer>"]
    assert reward("exact_match")(rollout.conversations, answer=["42"] * 3) == [0.0, 0.0, 2.0]
    columns = {f"num_{k}": [f[k] for f in rollout.facts] for k in ("turns", "tool_calls", "tool_errors")}
    assert reward("tool_use")(rollout.conversations, **columns) == [0.0, 0.0, 1.0]
