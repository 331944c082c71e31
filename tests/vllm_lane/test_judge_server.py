"""``llm_judge`` and ``pairwise_judge`` against a real judge server: vLLM's CPU build serving SmolLM2-135M-Instruct
(fp32) on 127.0.0.1 as an OpenAI-compatible endpoint, started here as a subprocess on a free port.

With ``structured = true`` the server constrains the reply to the verdict's JSON schema (vLLM's
``response_format``), so every verdict parses; without it the parse-failure rate is what the model gives. The
judge's throughput (judgements/s) and parse-failure rate are printed. No claim is made about the small judge's
quality: the tests check the protocol, the parsing, the counting and the pairwise bookkeeping.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("vllm", reason="vLLM is not installed here (bash scripts/setup.sh --vllm makes .venv-vllm)")

from grpo_rewards import reward  # noqa: E402
from tests.vllm_lane.test_server import free_port, running_server  # noqa: E402

PROMPTS = ["What is 12 plus 7?", "Natalia sold 48 clips in April and half as many in May. How many in all?"]
COMPLETIONS = [["12 plus 7 is 19. The answer is 19.", "The answer is 21.", "I am not sure.", "19"],
               ["In May she sold 24, so 48 + 24 = 72 clips.", "72", "She sold 48 clips.", "Clips are nice."]]


@pytest.fixture(scope="module")
def judge_server(smollm2_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(smollm2_dir),
           "--served-model-name", "smollm2", "--host", "127.0.0.1", "--port", str(port), "--dtype", "float32",
           "--enforce-eager", "--max-model-len", "2048", "--seed", "0"]
    with running_server(cmd, port, tmp_path_factory.mktemp("judge_server") / "serve.log", "judge server"):
        yield f"http://127.0.0.1:{port}/v1"


def _rows() -> tuple[list[str], list[str]]:
    completions = [c for group in COMPLETIONS for c in group]
    prompts = [p for p, group in zip(PROMPTS, COMPLETIONS) for _ in group]
    return completions, prompts


def _report(name: str, fn) -> None:
    m = fn.metrics()
    print(f"\n{name}: {m['judgements']} judgements, {m['judgements_per_s']:.2f} judgements/s, "
          f"parse-failure rate {m['parse_failure_rate']:.2f}, mean latency {m['latency_mean_s']:.2f} s")


def test_a_structured_verdict_always_parses(judge_server: str) -> None:
    fn = reward("llm_judge", model="smollm2", base_url=judge_server, question="Is the final answer correct?",
                structured=True, max_tokens=64, concurrency=4, request_timeout=120.0, retries=1)
    completions, prompts = _rows()
    scores = fn(completions, prompts=prompts)
    _report("llm_judge, structured", fn)
    assert fn.metrics()["parse_failure_rate"] == 0.0 and fn.metrics()["request_failures"] == 0
    assert all(s is not None and 0.0 <= s <= 1.0 for s in scores)
    assert fn(completions, prompts=prompts) == scores and fn.metrics()["cache_hits"] == len(completions)


def test_free_text_verdicts_are_parsed_or_counted(judge_server: str) -> None:
    fn = reward("llm_judge", model="smollm2", base_url=judge_server, max_tokens=96, concurrency=4,
                request_timeout=120.0, retries=1,
                criteria=[{"name": "correct", "weight": 2, "description": "the final answer is right"},
                          {"name": "clear", "description": "the reasoning is easy to follow"}])
    completions, prompts = _rows()
    scores = fn(completions, prompts=prompts)
    _report("llm_judge, free text", fn)
    m = fn.metrics()
    assert m["judgements"] == len(completions) and m["request_failures"] == 0
    assert m["parse_failure_rate"] == pytest.approx(sum(s is None for s in scores) / len(scores))


def test_pairwise_judging_of_a_group(judge_server: str) -> None:
    fn = reward("pairwise_judge", model="smollm2", base_url=judge_server, structured=True, max_tokens=32,
                concurrency=4, request_timeout=120.0, retries=1)
    group = COMPLETIONS[0][:3]
    scores = fn(group, prompts=[PROMPTS[0]] * 3)
    _report("pairwise_judge, structured", fn.fn)
    assert fn.fn.metrics()["judgements"] == 6 and fn.fn.metrics()["parse_failure_rate"] == 0.0
    assert sum(scores) == pytest.approx(len(group) / 2)  # each comparison hands out one win between two
