"""The sampler/policy mismatch metrics in a real vLLM step: `grpo train` through the colocated engine with
a rule given by verl's name, every step logging the k3 KL and the share dropped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("vllm", reason="vLLM is not installed here (bash scripts/setup.sh --vllm makes .venv-vllm)")

from tests.vllm_lane.test_engine import LOGP_ATOL  # noqa: E402
from tests.vllm_lane.test_train import grpo_train  # noqa: E402


def test_every_step_logs_k3_and_the_dropped_share(tiny_dir: Path, tmp_path: Path) -> None:
    proc, out = grpo_train(tmp_path, tiny_dir, rule="token_rs")  # verl's name for token_mask
    assert proc.returncode == 0, proc.stderr[-3000:]
    steps = [m for m in map(json.loads, (out / "metrics.jsonl").read_text().splitlines()) if "loss" in m]
    assert [m["step"] for m in steps] == [1, 2, 3]
    for m in steps:  # fp32 on both sides: the engine samples the policy's own distribution
        assert 0.0 <= m["rollout_corr/k3_kl"] < LOGP_ATOL ** 2
        assert abs(m["rollout_corr/kl"]) < LOGP_ATOL
        assert m["rollout_corr/rollout_rs_masked_fraction"] == 0.0
        assert m["rollout_corr/rollout_rs_seq_masked_fraction"] == 0.0
        assert "rollout_corr/rollout_is_ratio_fraction_high" not in m  # a truncate rule's count
