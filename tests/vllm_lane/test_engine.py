"""The colocated vLLM backend against the Hugging Face policy it serves (fp32 on CPU):

* greedy completions are the HF backend's token for token, and vLLM's log-prob of every sampled
  token equals the policy's own (``completion_logprobs``) within ``LOGP_ATOL``;
* sampling follows ``[generation]``: the group size, the length limit (truncated rows), EOS kept
  in the completion, a seeded run repeats itself, stop strings end a completion;
* after optimizer steps (full fine-tuning and LoRA) the engine's greedy output and log-probs
  are the updated policy's again, and without the sync they would not be (the control).

Skipped where vLLM is not installed (the main environment): run with
``.venv-vllm/bin/python -m pytest tests/vllm_lane`` after ``bash scripts/setup.sh --vllm``.
"""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("vllm", reason="vLLM is not installed here (bash scripts/setup.sh --vllm makes .venv-vllm)")

import torch  # noqa: E402

from tests.vllm_lane.conftest import PROMPTS, run_config  # noqa: E402

LOGP_ATOL = 1e-4  # fp32 on both sides; measured gaps are ~4e-6


def policy_logps(model: Any, batch: Any, temperature: float = 1.0) -> torch.Tensor:
    from grpo_core.policy.logprobs import completion_logprobs

    ids = torch.cat([batch.prompt_ids, batch.completion_ids], 1)
    mask = torch.cat([batch.prompt_mask, batch.completion_mask], 1)
    was = model.training
    model.eval()
    with torch.no_grad():
        out = completion_logprobs(model, ids, mask, batch.completion_ids.size(1), temperature=temperature)
    model.train(was)
    return out[0] if isinstance(out, tuple) else out


def max_gap(model: Any, batch: Any, temperature: float = 1.0) -> float:
    gap = (policy_logps(model, batch, temperature) - batch.sampling_logps).abs() * batch.completion_mask
    return gap.max().item()


class Setup:
    def __init__(self, model_dir: Path, tmp_path: Path, **sections: Any):
        from grpo_core.data import format_prompt
        from grpo_core.generation.transformers_backend import TransformersBackend
        from grpo_core.generation.vllm.engine import VLLMBackend
        from grpo_core.policy.models import load_model_and_tokenizer

        self.cfg = run_config(model_dir, tmp_path, **sections)
        self.model, self.tokenizer = load_model_and_tokenizer(self.cfg)
        self.vllm = VLLMBackend(self.cfg, self.model, self.tokenizer)
        self.hf = TransformersBackend(self.cfg, self.model, self.tokenizer)
        self.prompts = [format_prompt({"prompt": p}, self.cfg.data, self.tokenizer) for p in PROMPTS]

    def close(self) -> None:
        del self.vllm
        gc.collect()


@pytest.fixture(scope="module")
def full(tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    setup = Setup(tiny_dir, tmp_path_factory.mktemp("full"))
    yield setup
    setup.close()


def assert_engine_is_policy(setup: Setup) -> Any:
    ours = setup.vllm.generate(setup.prompts, 1, greedy=True)
    theirs = setup.hf.generate(setup.prompts, 1, greedy=True)
    assert torch.equal(ours.completion_ids, theirs.completion_ids)
    assert torch.equal(ours.completion_mask, theirs.completion_mask)
    assert ours.completions_text == theirs.completions_text
    assert max_gap(setup.model, ours) < LOGP_ATOL
    return ours


def test_greedy_equals_hf_and_logprobs_agree(full: Setup) -> None:
    batch = assert_engine_is_policy(full)
    assert batch.sampling_logps.shape == batch.completion_ids.shape
    assert (batch.sampling_logps[batch.completion_mask.bool()] < 0).all()


def test_sampling_follows_the_config(full: Setup) -> None:
    torch.manual_seed(7)
    first = full.vllm.generate(full.prompts, 4)
    assert first.completion_ids.shape[0] == len(full.prompts) * 4
    assert first.prompt_ids.shape[0] == len(full.prompts) * 4
    assert first.completion_ids.size(1) <= full.cfg.generation.max_completion_length
    lengths = first.completion_mask.sum(1)
    assert torch.equal(first.truncated, lengths == full.cfg.generation.max_completion_length)
    assert len({tuple(r.tolist()) for r in first.completion_ids}) > len(full.prompts)  # groups are not copies
    assert max_gap(full.model, first) < LOGP_ATOL  # temperature 1: the sampler's log-probs are the policy's
    torch.manual_seed(7)
    again = full.vllm.generate(full.prompts, 4)
    assert torch.equal(first.completion_ids, again.completion_ids)  # seeds come from torch's RNG


@pytest.mark.parametrize("greedy", [False, True])
def test_finished_groups_are_handed_over_while_the_rest_generates(full: Setup, greedy: bool) -> None:
    """Each run of finished groups reaches ``on_groups`` in order, as the rows of the batch ``generate`` returns,
    and the batch is the one generated without a hand-over (same seeds)."""
    assert full.vllm.hands_over_groups
    prompts = full.prompts * 2  # 6 groups
    backend, saved = full.vllm, full.vllm.eos_ids
    third = backend.generate(prompts[:1], 1, greedy=True).completion_ids[0, 2].item()
    backend.eos_ids = [*saved, third]  # the first prompt's greedy completion now ends at its third token
    handed: list[tuple[int, Any]] = []
    unfinished: list[int] = []
    engine = backend.engine.llm.llm_engine

    def on_groups(first: int, part: Any) -> None:
        handed.append((first, part))
        unfinished.append(engine.get_num_unfinished_requests())

    try:
        torch.manual_seed(11)
        plain = backend.generate(prompts, 4, greedy=greedy)
        torch.manual_seed(11)
        batch = backend.generate(prompts, 4, greedy=greedy, on_groups=on_groups)
    finally:
        backend.eos_ids = saved
    assert torch.equal(batch.completion_ids, plain.completion_ids)
    assert batch.completions_text == plain.completions_text
    assert [first for first, _ in handed] == [sum(len(p.completions_text) for _, p in handed[:i]) // 4
                                               for i in range(len(handed))]
    start = 0
    for _, part in handed:
        end, width = start + len(part.completions_text), part.completion_ids.size(1)
        assert part.completions_text == batch.completions_text[start:end]
        assert torch.equal(part.completion_ids * part.completion_mask,
                           (batch.completion_ids * batch.completion_mask)[start:end, :width])
        assert torch.equal(part.sampling_logps, batch.sampling_logps[start:end, :width])
        assert torch.equal(part.prompt_ids, batch.prompt_ids[start:end])
        start = end
    assert start == len(batch.completions_text)
    if greedy:  # the first group ended at its third token: handed over while the others still generated
        assert handed[0][1].completion_mask.sum(1).tolist() == [3] * 4 and unfinished[0] > 0


def test_a_failing_hand_over_leaves_the_engine_clean(full: Setup) -> None:
    def on_groups(first: int, part: Any) -> None:
        raise ValueError("scoring failed")

    with pytest.raises(ValueError, match="scoring failed"):
        full.vllm.generate(full.prompts * 2, 4, on_groups=on_groups)
    assert not full.vllm.engine.llm.llm_engine.has_unfinished_requests()
    assert full.vllm.generate(full.prompts, 2).completion_ids.shape[0] == len(full.prompts) * 2


def test_temperature_is_in_the_logprobs(full: Setup) -> None:
    full.vllm.gen.temperature = 0.7  # the backend reads [generation] at every call
    try:
        batch = full.vllm.generate(full.prompts, 2)
    finally:
        full.vllm.gen.temperature = 1.0
    assert max_gap(full.model, batch, temperature=0.7) < LOGP_ATOL
    assert max_gap(full.model, batch, temperature=1.0) > 10 * LOGP_ATOL  # the control


def test_stop_strings_end_completions(full: Setup) -> None:
    text = full.vllm.generate(full.prompts[:1], 1, greedy=True).completions_text[0]
    stop = next(text[i:i + 2] for i in range(2, len(text) - 2) if text[i:i + 2] not in text[:i + 1])
    full.vllm.gen.stop = [stop]
    try:
        batch = full.vllm.generate(full.prompts[:1], 1, greedy=True)
    finally:
        full.vllm.gen.stop = []
    assert batch.completions_text[0].startswith(text[:text.index(stop)]) and stop in batch.completions_text[0]
    assert batch.completion_mask.sum() < full.cfg.generation.max_completion_length and not batch.truncated[0]


def test_eos_ends_a_completion_and_stays_in_it(full: Setup) -> None:
    eos = full.tokenizer.eos_token_id
    backend = full.vllm
    saved = backend.eos_ids
    common = full.vllm.generate(full.prompts, 1, greedy=True).completion_ids[0, 2].item()
    backend.eos_ids = [*saved, common]  # a token the greedy completion emits third: a stop token now
    try:
        batch = backend.generate(full.prompts[:1], 1, greedy=True)
    finally:
        backend.eos_ids = saved
    assert batch.completion_mask.sum().item() == 3
    assert batch.completion_ids[0, 2].item() == common and not batch.truncated[0]
    assert eos in saved


def test_a_partial_push_does_not_log_the_layers_it_leaves(full: Setup) -> None:
    """A push naming one block keeps every other layer as it is; vLLM's own reload logs each kept layer and then
    lists them all (the control), the engine's push logs neither, and the engine stays the policy."""
    import logging

    from grpo_core.generation.vllm.quiet_reload import KEPT_LAYER_MESSAGES

    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    loggers = [logging.getLogger(name) for name in KEPT_LAYER_MESSAGES]
    for logger in loggers:
        logger.addHandler(handler)
    block = [(n, p.detach()) for n, p in full.model.named_parameters() if ".layers.0.mlp." in n]
    assert block
    try:
        full.vllm.engine.load_weights(block)
        quiet = [r.getMessage() for r in records]
        full.vllm.engine.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": block,
                                                                      "is_checkpoint_format": True})
        loud = [r.getMessage() for r in records[len(quiet):]]
    finally:
        for logger in loggers:
            logger.removeHandler(handler)
    assert not any(text in m for m in quiet for text in KEPT_LAYER_MESSAGES.values()), quiet
    assert any(m.endswith("Failed to load weights") for m in loud), loud
    assert any(m.startswith("Following weights were not loaded from checkpoint") and "norm" in m for m in loud), loud
    assert_engine_is_policy(full)


def test_weights_follow_full_fine_tuning(full: Setup) -> None:
    before = full.vllm.generate(full.prompts, 1, greedy=True).completion_ids
    saved = {n: p.detach().clone() for n, p in full.model.named_parameters()}
    with torch.no_grad():  # the control: a change the engine is not told about leaves it stale
        for p in full.model.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    full.vllm.weights.changed()  # marks everything as sent without sending it
    stale = full.vllm.generate(full.prompts, 1, greedy=True)
    assert max_gap(full.model, stale) > 100 * LOGP_ATOL
    with torch.no_grad():
        for n, p in full.model.named_parameters():
            p.copy_(saved[n])  # back to the weights the engine has (and a version bump: sent again)
    params = [p for p in full.model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=3e-2)
    target = before[:, :4].clone()
    for _ in range(3):  # push the policy towards other first tokens
        logits = full.model(input_ids=target).logits
        loss = logits.log_softmax(-1)[..., 5].mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    sent = full.vllm.sync_weights()
    assert sent == len(list(full.vllm.weights._entries()))  # full fine-tuning: every tensor changed
    after = assert_engine_is_policy(full)
    assert not torch.equal(before, after.completion_ids)  # the updates changed what greedy decoding says
    assert full.vllm.sync_weights() == 0  # nothing changed since: nothing sent


def test_weights_follow_lora(tiny_dir: Path, tmp_path: Path) -> None:
    setup = Setup(tiny_dir, tmp_path, lora={"enabled": True, "r": 4, "alpha": 16,
                                            "target_modules": ["q_proj", "v_proj", "up_proj"]})
    try:
        before = setup.vllm.generate(setup.prompts, 1, greedy=True).completion_ids
        total = len(list(setup.vllm.weights._entries()))
        params = [p for p in setup.model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(params, lr=5e-2)
        for _ in range(3):
            loss = setup.model(input_ids=before[:, :4]).logits.log_softmax(-1)[..., 5].mean()
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        sent = setup.vllm.sync_weights()
        assert 0 < sent < total  # the adapted blocks (with their fused siblings), not norms or embeddings
        assert not any(layer.merged for name, layer in _lora_layers(setup.model))  # never merged in place
        after = assert_engine_is_policy(setup)
        assert not torch.equal(before, after.completion_ids)
    finally:
        setup.close()


def _lora_layers(model: Any) -> list[tuple[str, Any]]:
    from peft.tuners.lora import LoraLayer

    return [(n, m) for n, m in model.named_modules() if isinstance(m, LoraLayer)]
