"""The vLLM backend's hand-over of finished groups, without vLLM: an engine whose requests finish out of order
gives ``on_groups`` each run of groups complete in order, as the rows of the batch ``generate`` returns; an
engine that cannot pass finished requests on is scored afterwards; the server engine hands each answer over.
The real engines are exercised in ``tests/vllm_lane/test_engine.py`` and ``tests/vllm_lane/test_server.py``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from grpo_core.config import config_from_dict
from grpo_core.generation.vllm.completion import Completion
from grpo_core.generation.vllm.engine import VLLMBackend, _GroupRuns
from tests.core.completions_server import FakeCompletions


class OutOfOrderEngine:
    """Finishes its requests in ``order`` (indices), each a completion of ``3 + index % 4`` tokens per copy."""

    hands_over = True

    def __init__(self, order: list[int], vocab: int):
        self.order, self.vocab = order, vocab
        self.unfinished_at_hand_over: list[int] = []

    def wake(self) -> bool:
        return False

    def sleep(self) -> None:
        pass

    def load_weights(self, weights: Any) -> int:
        return len(list(weights))

    def _completions(self, i: int, n: int) -> list[Completion]:
        return [Completion([10 + (i * 7 + j * 3 + t) % (self.vocab - 20) for t in range(3 + i % 4)],
                           [-0.5 - 0.01 * t for t in range(3 + i % 4)], "length") for j in range(n)]

    def generate(self, prompts: list[list[int]], params: list[dict[str, Any]],
                 on_finished: Any = None) -> list[list[Completion]]:
        results = [self._completions(i, p["n"]) for i, p in enumerate(params)]
        if on_finished is not None:
            for done, i in enumerate(self.order):
                self.unfinished_at_hand_over.append(len(self.order) - done - 1)
                on_finished(i, results[i])
        return results


class BatchOnlyEngine(OutOfOrderEngine):
    hands_over = False


@pytest.fixture
def backend_parts(tiny_model_dir: Path, tmp_path: Path) -> tuple[Any, Any, Any]:
    from grpo_core.policy.models import load_model_and_tokenizer

    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"question {i}"}) + "\n" for i in range(6)))
    cfg = config_from_dict({
        "model": {"name_or_path": str(tiny_model_dir), "dtype": "float32"},
        "data": {"source": str(data), "max_prompt_length": 32},
        "generation": {"num_generations": 3, "max_completion_length": 8},
        "rewards": {"fmt": {"use": "xml_count"}},
        "logging": {"output_dir": str(tmp_path / "run")},
    })
    model, tokenizer = load_model_and_tokenizer(cfg)
    return cfg, model, tokenizer


@pytest.mark.parametrize("order", [[4, 0, 2, 1, 5, 3], [5, 4, 3, 2, 1, 0], [0, 1, 2, 3, 4, 5]])
def test_runs_of_finished_groups_come_in_order_as_the_batch_rows(backend_parts: Any, order: list[int]) -> None:
    cfg, model, tokenizer = backend_parts
    engine = OutOfOrderEngine(order, len(tokenizer))
    backend = VLLMBackend(cfg, model, tokenizer, engine=engine)
    assert backend.hands_over_groups
    prompts = [f"question {i}" for i in range(6)]
    handed: list[tuple[int, Any]] = []
    batch = backend.generate(prompts, 3, on_groups=lambda first, part: handed.append((first, part)))
    expected_runs = {(4, 0, 2, 1, 5, 3): [(0, 1), (1, 3), (3, 6)], (5, 4, 3, 2, 1, 0): [(0, 6)],
                     (0, 1, 2, 3, 4, 5): [(i, i + 1) for i in range(6)]}[tuple(order)]
    assert [(first, first + len(p.completions_text) // 3) for first, p in handed] == expected_runs
    for first, part in handed:
        rows = slice(first * 3, first * 3 + len(part.completions_text))
        width = part.completion_ids.size(1)
        assert part.completions_text == batch.completions_text[rows]
        assert torch.equal(part.completion_mask, batch.completion_mask[rows, :width])
        assert not batch.completion_mask[rows, width:].any()
        assert torch.equal(part.completion_ids * part.completion_mask,
                           (batch.completion_ids * batch.completion_mask)[rows, :width])
        assert torch.equal(part.sampling_logps, batch.sampling_logps[rows, :width])
        assert torch.equal(part.prompt_ids, batch.prompt_ids[rows])
        assert torch.equal(part.truncated, batch.truncated[rows])
    assert batch.completion_ids.size(0) == 18


def test_an_engine_that_cannot_pass_requests_on_is_scored_afterwards(backend_parts: Any) -> None:
    cfg, model, tokenizer = backend_parts
    backend = VLLMBackend(cfg, model, tokenizer, engine=BatchOnlyEngine([0, 1], len(tokenizer)))
    assert not backend.hands_over_groups
    handed: list[Any] = []
    batch = backend.generate(["a", "b"], 3, on_groups=lambda first, part: handed.append(first))
    assert handed == [] and batch.completion_ids.size(0) == 6


def test_group_runs_with_several_requests_per_group() -> None:
    """Greedy calls send one request per completion: a group is ``copies`` consecutive requests."""
    runs: list[tuple[int, int, list[str]]] = []
    groups = _GroupRuns(3, 2, lambda first, end, done: runs.append((first, end, [c.finish_reason for c in done])))
    for i in (1, 3, 2, 0, 5, 4):
        groups.finished(i, [Completion([i], [0.0], f"r{i}")])
    assert runs == [(0, 2, ["r0", "r1", "r2", "r3"]), (2, 3, ["r4", "r5"])]



def test_a_server_engine_hands_its_answers_over(backend_parts: Any) -> None:
    """``vllm_mode = "server"``: each request's answer is handed over as it arrives; the parts are the batch's
    rows (tests/core/completions_server.py stands in for the server)."""
    cfg, model, tokenizer = backend_parts
    with FakeCompletions() as server:
        backend = VLLMBackend(cfg, model, tokenizer, engine=server.engine())
        assert backend.hands_over_groups
        handed: list[tuple[int, Any]] = []
        batch = backend.generate([f"question {i}" for i in range(6)], 3,
                                 on_groups=lambda first, part: handed.append((first, part)))
    covered = 0
    for first, part in handed:
        assert first == covered  # runs in order, each starting where the last ended
        rows = slice(first * 3, first * 3 + len(part.completions_text))
        width = part.completion_ids.size(1)
        assert part.completions_text == batch.completions_text[rows]
        assert torch.equal(part.completion_ids, batch.completion_ids[rows, :width])
        assert torch.equal(part.sampling_logps, batch.sampling_logps[rows, :width])
        covered += len(part.completions_text) // 3
    assert covered == 6 and batch.completion_ids.size(0) == 18
    assert sum(server.pushed) == sum(1 for _ in model.state_dict())  # the first call pushes every weight
