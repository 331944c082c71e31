"""Tool rollouts through the vLLM backend, without vLLM: a scripted engine writes each request's turn (tool calls,
answers), so what the backend sends it each turn and what the batch holds are known exactly. The shared loop
(grpo_core.generation.multi_turn) is the transformers backend's; here its vLLM side: the contexts go to the engine
as the carried token ids (never re-tokenized), one request per running row after the first turn, each asking only
what its row has room for; the batch holds the engine's log-probs of the model's tokens, 0 and masked out on the
tools'; and the trainer's sampler correction counts the model's tokens only. The real engine:
``tests/vllm_lane/test_tool_rollouts.py``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from tool_models import tool_calling_model, tool_tokenizer

from grpo_core.config import config_from_dict
from grpo_core.generation.tools.formats import tool_suffix_ids
from grpo_core.generation.vllm.completion import Completion
from grpo_core.generation.vllm.engine import VLLMBackend
from grpo_rewards.errors import UserError

CALL = '<tool_call>\n{{"name": "calculator", "arguments": {{"expression": "{}"}}}}\n</tool_call><|im_end|>'
PROMPTS = ["What is 6*7?", "Add 2 and 3."]


def _logps(call: int, request: int, index: int, n: int) -> list[float]:
    """Distinct log-probs for every token the engine writes: where each one lands in the batch is checked."""
    return [-(1 + call + 0.1 * request + 0.01 * index + 0.001 * t) for t in range(n)]


class ScriptedEngine:
    """``script[call][request][index]``: the text each completion of each request writes in each engine call; records
    every call's requests (token ids) and sampling fields."""

    hands_over = True

    def __init__(self, tokenizer: Any, script: list[list[list[str]]]):
        self.tok, self.script = tokenizer, script
        self.calls: list[tuple[list[list[int]], list[dict[str, Any]], list[list[Completion]]]] = []
        self.sleeps = 0

    def wake(self) -> bool:
        return False

    def sleep(self) -> None:
        self.sleeps += 1

    def load_weights(self, weights: Any) -> int:
        return len(list(weights))

    def generate(self, prompts: list[list[int]], params: list[dict[str, Any]], on_finished: Any = None
                 ) -> list[list[Completion]]:
        call = len(self.calls)
        out = []
        for r, (texts, p) in enumerate(zip(self.script[call], params, strict=True)):
            assert len(texts) == p["n"]
            done = []
            for j, text in enumerate(texts):
                ids = self.tok(text, add_special_tokens=False)["input_ids"][: p["max_tokens"]]
                done.append(Completion(ids, _logps(call, r, j, len(ids)), "stop"))
            out.append(done)
        self.calls.append(([list(ids) for ids in prompts], [dict(p) for p in params], out))
        return out


@pytest.fixture(scope="module")
def tool_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tool_calling_model(tmp_path_factory.mktemp("tool_model"), tool_tokenizer())


def _backend(model_dir: Path, tmp_path: Path, script: list[list[list[str]]], **generation: Any
             ) -> tuple[VLLMBackend, list[str]]:
    from grpo_core.data import format_prompt
    from grpo_core.policy.models import load_model_and_tokenizer

    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in PROMPTS))
    cfg = config_from_dict({
        "model": {"name_or_path": str(model_dir), "dtype": "float32"},
        "data": {"source": str(data), "max_prompt_length": 1024, "chat_template": True},
        "generation": {"backend": "vllm", "vllm_mode": "server", "num_generations": 2,
                       "max_completion_length": 300, **generation},
        "rewards": {"fmt": {"use": "xml_count"}},
        "logging": {"output_dir": str(tmp_path / "run")},
        "tools": {"names": ["calculator"], "max_tool_calling_iterations": 4},
    })
    model, tok = load_model_and_tokenizer(cfg)
    backend = VLLMBackend(cfg, model, tok, engine=ScriptedEngine(tok, script))
    return backend, [format_prompt({"prompt": p}, cfg.data, tok, backend.tool_schemas) for p in PROMPTS]


# rows 0, 1: the first prompt's group; rows 2, 3: the second's. Row 0 calls then answers, row 1 answers at once, row
# 2 calls twice then answers, row 3 calls once then answers
SCRIPT = [[[CALL.format("6*7"), "42<|im_end|>"], [CALL.format("2+3"), CALL.format("5")]],  # one request per prompt
          [["It is 42.<|im_end|>"], [CALL.format("5*1")], ["5<|im_end|>"]],  # rows 0, 2, 3
          [["Five.<|im_end|>"]]]  # row 2
# the row each (call, request, completion) of SCRIPT writes for
OWNER = {(0, 0, 0): 0, (0, 0, 1): 1, (0, 1, 0): 2, (0, 1, 1): 3, (1, 0, 0): 0, (1, 1, 0): 2, (1, 2, 0): 3,
         (2, 0, 0): 2}


def test_each_turn_sends_the_carried_ids_and_the_batch_keeps_the_engines_logps(tool_model_dir, tmp_path,
                                                                             use_core_registry):
    backend, prompts = _backend(tool_model_dir, tmp_path, SCRIPT)
    engine, tok, eos = backend.engine, backend.tokenizer, backend.eos_ids
    assert not backend.hands_over_groups  # a multi-turn batch is scored whole
    torch.manual_seed(0)
    batch = backend.generate(prompts, 2)
    assert engine.sleeps == 1
    prompt_ids = [tok(p, add_special_tokens=False)["input_ids"] for p in prompts]
    written: dict[int, list[Completion]] = {r: [] for r in range(4)}  # each row's turns, as the engine wrote them
    for (call, request, index), row in sorted(OWNER.items()):
        written[row].append(engine.calls[call][2][request][index])
    # turn 0: one request per prompt, its group as n; later turns: one request per running row, n = 1, own seed
    (first, first_params, _), (second, second_params, _), (third, third_params, _) = engine.calls
    assert first == prompt_ids and [p["n"] for p in first_params] == [2, 2]
    assert [p["n"] for p in second_params + third_params] == [1] * 4
    assert len({p["seed"] for p in first_params + second_params + third_params}) == 6
    assert all(p["max_tokens"] == 300 for p in first_params)
    # each later context is the previous one, the model's ids as the engine returned them, and the tool answer's ids
    # as the chat template renders them alone: carried, never re-tokenized
    answers = {r: [m for m in batch.conversations[r] if m["role"] == "tool"] for r in range(4)}
    for i, r in enumerate([0, 2, 3]):
        assert second[i] == prompt_ids[r // 2] + written[r][0].token_ids + tool_suffix_ids(tok, answers[r][:1], eos)
        # it asks only what the row has room for
        assert second_params[i]["max_tokens"] == 300 - (len(second[i]) - len(prompt_ids[r // 2]))
    assert third == [second[1] + written[2][1].token_ids + tool_suffix_ids(tok, answers[2][1:], eos)]
    # the batch: each row's completion is its turns and the tool answers between them; the tools' tokens are masked
    # out and have no log-prob, the model's carry the engine's
    for r in range(4):
        n = int(batch.completion_mask[r].sum())
        completion, mask = [], []
        for i, done in enumerate(written[r]):
            suffix = tool_suffix_ids(tok, answers[r][i:i + 1], eos) if i < len(written[r]) - 1 else []
            completion += done.token_ids + suffix
            mask += [1] * len(done.token_ids) + [0] * len(suffix)
        assert batch.completion_ids[r, :n].tolist() == completion
        assert batch.tool_mask[r, :n].tolist() == mask
        own = batch.tool_mask[r, :n].bool()
        assert torch.equal(batch.sampling_logps[r, :n][own],
                           torch.tensor([lp for done in written[r] for lp in done.logprobs]))
        assert (batch.sampling_logps[r, :n][~own] == 0).all()
    assert [f["tool_calls"] for f in batch.tool_facts] == [1, 0, 2, 1]
    assert [f["stop"] for f in batch.tool_facts] == ["answer"] * 4
    assert not batch.sampler_is_policy  # vLLM's log-probs: the trainer corrects for them
    assert batch.conversations[0][1] == {"role": "tool", "name": "calculator", "content": "42"}


def test_a_row_short_of_room_asks_for_less_and_the_context_limit_holds(tool_model_dir, tmp_path, use_core_registry):
    """``vllm_max_model_len`` is the rollout's context: a row near it asks the engine only for what is left (and is
    cut there, truncated); a tool answer that would leave no room ends the row before it."""
    long_answer = "It is forty-two, as the tool said.<|im_end|>"
    backend, prompts = _backend(tool_model_dir, tmp_path, [[[CALL.format("6*7")] * 2] * 2, [[long_answer]] * 4] * 2)
    tok, eos, engine = backend.tokenizer, backend.eos_ids, backend.engine
    prompt = max(len(tok(p, add_special_tokens=False)["input_ids"]) for p in prompts)
    call = len(tok(CALL.format("6*7"), add_special_tokens=False)["input_ids"])
    suffix = len(tool_suffix_ids(tok, [{"role": "tool", "name": "calculator", "content": "42"}], eos))
    backend.gen.vllm_max_model_len = prompt + call + suffix + 5  # read at each call, as the engine's length
    batch = backend.generate(prompts, 2)
    assert [p["max_tokens"] for p in engine.calls[0][1]] == [call + suffix + 5] * 2
    contexts, params, _ = engine.calls[1]
    assert len(contexts) == 4 and all(len(c) + p["max_tokens"] == prompt + call + suffix + 5
                                      for c, p in zip(contexts, params, strict=True))
    assert [p["max_tokens"] for p in params] == [5] * 4
    assert [f["stop"] for f in batch.tool_facts] == ["length"] * 4 and batch.truncated.all()
    assert (batch.completion_mask.sum(1) == call + suffix + 5).all()
    # the tool answer does not fit: the row ends after the call, without it
    backend.gen.vllm_max_model_len = prompt + call + suffix - 1
    batch = backend.generate(prompts, 2)
    assert len(engine.calls) == 3 and [f["stop"] for f in batch.tool_facts] == ["context"] * 4
    assert (batch.completion_mask.sum(1) == call).all() and (batch.tool_mask * batch.completion_mask).sum() == 4 * call
    assert not batch.truncated.any()


def test_stop_strings_are_refused_with_tools(tool_model_dir, tmp_path, use_core_registry):
    backend, _ = _backend(tool_model_dir, tmp_path, [])
    backend.gen.stop = ["</answer>"]
    with pytest.raises(UserError, match="generation.stop"):
        backend.set_tools([])
    backend.gen.stop, backend.gen.top_p = [], 0.9  # vLLM's sampler is corrected for: top_p is its to take
    backend.set_tools([])
    assert backend.tools is not None


def test_the_sampler_correction_counts_the_models_tokens_only():
    """A sequence-level correction over a tool rollout: the tools' tokens have no sampler log-prob (0) and a trainer
    log-prob far from it; left in, they would make every ratio far from 1. The model's tokens agree: ratio 1."""
    from grpo_core.config import GenerationConfig
    from grpo_core.generation.backend import Generation
    from grpo_core.parallel.distributed import SINGLE
    from grpo_core.trainer import _Correction

    sampler = torch.tensor([[-0.5, -0.7, 0.0, 0.0, -0.2], [-0.3, 0.0, -0.4, -0.1, 0.0]])
    tool_mask = torch.tensor([[1, 1, 0, 0, 1], [1, 0, 1, 1, 0]])
    completion_mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 1, 0]])
    trainer = torch.where(tool_mask.bool(), sampler, torch.full_like(sampler, -6.0))
    batch = Generation(torch.zeros(2, 1, dtype=torch.long), torch.ones(2, 1, dtype=torch.long),
                       torch.zeros(2, 5, dtype=torch.long), completion_mask, ["", ""], torch.tensor([False, False]),
                       sampler, tool_mask=tool_mask)
    for mode in ("sequence_mask", "token_truncate"):
        gen = GenerationConfig(importance_sampling=mode, importance_sampling_min=0.5, importance_sampling_max=2.0)
        correction = _Correction(batch, gen, SINGLE)
        rho = correction.ratio(trainer, torch.arange(2))
        assert rho is not None and torch.allclose(rho[tool_mask.bool()] if rho.size(1) > 1 else rho, torch.tensor(1.0))
        assert correction.metrics()["sampling/sampling_logp_difference/max"] == 0.0
    untouched = Generation(*[getattr(batch, f) for f in ("prompt_ids", "prompt_mask", "completion_ids",
                                                         "completion_mask", "completions_text", "truncated",
                                                         "sampling_logps")])
    control = _Correction(untouched, GenerationConfig(importance_sampling="sequence_mask", importance_sampling_min=0.5),
                          SINGLE)
    assert control.ratio(trainer, torch.arange(2)).eq(0).all()  # the control: tool tokens counted, every row dropped


def test_greedy_rollouts_send_one_request_per_row(tool_model_dir, tmp_path, use_core_registry):
    """Greedy (held-out) rollouts: vLLM's greedy ``n`` is 1, so the first turn sends each prompt once per row too,
    at temperature 0, and the rows keep their order."""
    script = [[[CALL.format("1+1")], ["a<|im_end|>"], ["b<|im_end|>"], [CALL.format("2+2")]],
              [["c<|im_end|>"], ["d<|im_end|>"]]]
    backend, prompts = _backend(tool_model_dir, tmp_path, script)
    batch = backend.generate(prompts, 2, greedy=True)
    (first, first_params, _), (second, second_params, _) = backend.engine.calls
    assert [len(c) for c in (first, second)] == [4, 2] and first[0] == first[1] != first[2] == first[3]
    assert all(p["n"] == 1 and p["temperature"] == 0.0 for p in first_params + second_params)
    assert [c[-1]["content"] for c in batch.conversations] == ["c", "a", "b", "d"]
    assert [f["tool_calls"] for f in batch.tool_facts] == [1, 0, 0, 1]
