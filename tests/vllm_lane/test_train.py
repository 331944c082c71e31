"""`grpo train` with ``[generation] backend = "vllm"``: three steps through the real command line (a fresh
process, the colocated engine inside it) ending with a checkpoint and the final model, with the
sampler-mismatch correction logged; and the real SmolLM2-135M-Instruct served by the engine (greedy =
HF, log-prob agreement), when it can be fetched."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("vllm", reason="vLLM is not installed here (bash scripts/setup.sh --vllm makes .venv-vllm)")

import torch  # noqa: E402

from tests.vllm_lane.conftest import PROMPTS  # noqa: E402
from tests.vllm_lane.test_engine import LOGP_ATOL, Setup, assert_engine_is_policy  # noqa: E402

RUN = """\
[model]
name_or_path = "{model}"
dtype = "float32"
gradient_checkpointing = false

[data]
source = "{data}"
max_prompt_length = 64

[generation]
backend = "vllm"
num_generations = 4
max_completion_length = 16
importance_sampling = "{rule}"

[grpo]
learning_rate = 0.01
prompts_per_step = 2
max_steps = 3
num_iterations = {mu}

[lora]
enabled = {lora}

[checkpoint]
every = 2

[logging]
progress = false
plot = false

[rewards.fmt]
use = "xml_count"
"""


def grpo_train(tmp_path: Path, model: Path, **fields: Any) -> tuple[subprocess.CompletedProcess[str], Path]:
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in PROMPTS * 2))
    run = tmp_path / "run.toml"
    run.write_text(RUN.format(model=model, data=data, **{"rule": "sequence_mask", "mu": 1, "lora": "false",
                                                          **fields}))
    out = tmp_path / "out"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    proc = subprocess.run([sys.executable, "-m", "grpo_rewards", "train", str(run), "--set",
                           f"logging.output_dir={out}"], capture_output=True, text=True, env=env, timeout=400)
    return proc, out


@pytest.mark.parametrize("fields", [{}, {"lora": "true", "rule": "token_truncate", "mu": 2}],
                         ids=["full-sequence_mask", "lora-token_truncate-mu2"])
def test_three_steps_end_with_a_checkpoint(tiny_dir: Path, tmp_path: Path, fields: dict[str, Any]) -> None:
    proc, out = grpo_train(tmp_path, tiny_dir, **fields)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [m for m in lines if "loss" in m]
    assert [m["step"] for m in steps] == [1, 2, 3]
    for m in steps:  # the correction ran every step; fp32 on both sides: ratios near 1, nothing masked
        assert 0.99 < m["sampling/importance_sampling_ratio/mean"] < 1.01
        assert m["sampling/sampling_logp_difference/max"] < LOGP_ATOL
    checkpoints = sorted(p.name for p in (out / "checkpoints").iterdir())
    assert checkpoints and checkpoints[-1].endswith("3")
    weights = "adapter_config.json" if fields.get("lora") == "true" else "config.json"
    assert (out / "model" / weights).is_file()


def test_a_bad_vllm_setting_stops_before_loading(tiny_dir: Path, tmp_path: Path) -> None:
    data = tmp_path / "rows.jsonl"
    data.write_text(json.dumps({"prompt": "x"}) + "\n")
    run = tmp_path / "run.toml"
    run.write_text(RUN.format(model=tiny_dir, data=data, rule="sequence_mask", mu=1, lora="false")
                   .replace('backend = "vllm"', 'backend = "vllm"\nvllm_sleep_level = 4'))
    proc = subprocess.run([sys.executable, "-m", "grpo_rewards", "config", "validate", str(run)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"{run}:12: generation.vllm_sleep_level: must be 0, 1 or 2, got 4"


def test_smollm2_is_served_as_the_policy(smollm2_dir: Path, tmp_path: Path) -> None:
    """The real model (its chat template, tied embeddings, 30 layers) after one optimizer step."""
    setup = Setup(smollm2_dir, tmp_path, model={"dtype": "auto"}, data={"max_prompt_length": 128},
                  generation={"max_completion_length": 12})
    setup.prompts = setup.prompts[:2]  # one left-padded, one not; kept short for the 2-core CI machine
    try:
        first = assert_engine_is_policy(setup)
        assert first.completion_mask.sum(1).min() > 1
        optimizer = torch.optim.AdamW([p for p in setup.model.parameters() if p.requires_grad], lr=1e-4)
        loss = setup.model(input_ids=first.completion_ids[:, :8]).logits.log_softmax(-1)[..., 42].mean()
        loss.backward()
        optimizer.step()
        assert setup.vllm.sync_weights() > 0
        assert_engine_is_policy(setup)
    finally:
        setup.close()
