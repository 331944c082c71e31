"""A multi-turn rollout with a tool through the colocated vLLM engine (CPU build), on a tiny Llama that opens tool
calls often (``tests/core/tool_models.py``): each turn's requests are the token ids carried so far (the previous
context, the model's ids as vLLM returned them, the tool answer's ids as the chat template renders them alone), the
tools' tokens are masked out and carry no log-prob, and the trainer's log-probs of the model's tokens, over the
whole conversation at once, equal vLLM's sampled ones within ``LOGP_ATOL`` in every turn (the on-policy test,
multi-turn). The same loop with a scripted engine: ``tests/core/test_vllm_tool_rollouts.py``."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("vllm", reason="vLLM is not installed here (bash scripts/setup.sh --vllm makes .venv-vllm)")

import torch  # noqa: E402

from tests.core.tool_models import tool_calling_model, tool_tokenizer  # noqa: E402
from tests.vllm_lane.conftest import run_config  # noqa: E402
from tests.vllm_lane.test_engine import LOGP_ATOL, policy_logps  # noqa: E402

TEMPERATURE = 0.8


def test_a_tool_rollout_carries_ids_masks_tools_and_keeps_vllms_logprobs(tmp_path: Path) -> None:
    from grpo_core.data import format_prompt
    from grpo_core.generation.tools.formats import tool_suffix_ids
    from grpo_core.generation.vllm.engine import VLLMBackend
    from grpo_core.policy.models import load_model_and_tokenizer

    model_dir = tool_calling_model(tmp_path / "model", tool_tokenizer(), hidden=64, heads=2, kv_heads=1)
    cfg = run_config(model_dir, tmp_path, data={"max_prompt_length": 1024, "chat_template": True,
                                                "system_prompt": "Use the tools."},
                     generation={"num_generations": 4, "max_completion_length": 200, "temperature": TEMPERATURE},
                     tools={"names": ["calculator"], "max_tool_calling_iterations": 4, "max_output_chars": 10})
    model, tok = load_model_and_tokenizer(cfg)
    backend = VLLMBackend(cfg, model, tok)
    eos, k = backend.eos_ids, cfg.generation.num_generations
    calls: list[tuple[list[list[int]], list[list[list[int]]]]] = []  # each engine call: requests, their outputs
    generate = backend.engine.generate

    def recording(prompts: list[list[int]], params: list[dict[str, Any]], **kw: Any) -> Any:
        out = generate(prompts, params, **kw)
        calls.append(([list(p) for p in prompts], [[c.token_ids for c in comps] for comps in out]))
        return out

    backend.engine.generate = recording
    try:
        prompts = [format_prompt({"prompt": p}, cfg.data, tok, backend.tool_schemas)
                   for p in ("What is 6*7?", "Add 2 and 3.")]
        torch.manual_seed(0)
        batch = backend.generate(prompts, 4)
    finally:
        del backend
        gc.collect()
    facts = batch.tool_facts
    assert facts is not None and batch.tool_mask is not None and not batch.sampler_is_policy
    assert max(f["turns"] for f in facts) >= 3, facts  # a test of several turns, each re-batched
    assert len(calls) == max(f["turns"] for f in facts)
    # the ids each turn sent: the previous context, the model's ids as vLLM returned them, the tool answer's ids
    for r in range(len(facts)):
        prompt = batch.prompt_ids[r][batch.prompt_mask[r].bool()].tolist()
        completion = batch.completion_ids[r][batch.completion_mask[r].bool()].tolist()
        own = batch.tool_mask[r][batch.completion_mask[r].bool()].tolist()
        answers = [m for m in batch.conversations[r] if m["role"] == "tool"]
        context, at, answered = prompt, 0, 0
        for turn in range(facts[r]["turns"]):
            requests, outputs = calls[turn]
            if turn == 0:
                assert requests[r // k] == context
                sampled = outputs[r // k][r % k]
            else:
                index = [q for q in range(len(facts)) if facts[q]["turns"] > turn].index(r)  # the running rows
                assert requests[index] == context
                sampled = outputs[index][0]
            assert completion[at:at + len(sampled)] == sampled and own[at:at + len(sampled)] == [1] * len(sampled)
            context, at = context + sampled, at + len(sampled)
            if turn < facts[r]["turns"] - 1:  # a tool turn followed: its answers' ids, masked out
                messages = answers[answered:answered + _calls_in(batch.conversations[r], turn)]
                answered += len(messages)
                suffix = tool_suffix_ids(tok, messages, eos)
                assert completion[at:at + len(suffix)] == suffix and own[at:at + len(suffix)] == [0] * len(suffix)
                context, at = context + suffix, at + len(suffix)
        assert at == len(completion)
    tool_tokens = batch.completion_mask.bool() & (batch.tool_mask == 0)
    assert tool_tokens.any() and (batch.sampling_logps[tool_tokens] == 0).all()
    # the trainer's log-probs of the model's own tokens, after tool tokens included, are vLLM's
    mine = (batch.completion_mask * batch.tool_mask).bool()
    later = mine & (torch.cumsum(tool_tokens.int(), 1) > 0)
    assert later.sum() >= 8
    gap = (policy_logps(model, batch, TEMPERATURE) - batch.sampling_logps).abs()
    assert gap[mine].max().item() < LOGP_ATOL
    assert (policy_logps(model, batch, 1.0) - batch.sampling_logps).abs()[mine].max() > 10 * LOGP_ATOL  # control


def _calls_in(conversation: list[dict[str, Any]], turn: int) -> int:
    """How many tool messages answer the model's ``turn``-th turn (every call is answered, a malformed one too)."""
    assistants = [i for i, m in enumerate(conversation) if m["role"] == "assistant"]
    end = assistants[turn + 1] if turn + 1 < len(assistants) else len(conversation)
    return end - assistants[turn] - 1
