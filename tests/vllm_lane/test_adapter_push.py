"""``vllm_lora_push = "adapter"`` against the merged push it replaces (fp32 on CPU, the tiny Llama):

* after optimizer steps on the LoRA weights, greedy generation with the adapter served as a
  ``LoRARequest`` gives the same tokens as an engine that got the merged weights ``W + scale * B @ A``
  (and as the policy itself), and the sampler's log-probs are the policy's (importance ratios ~1);
  a change never pushed leaves the engine stale (the control);
* each version is a new complete folder, written only when the adapter changed, and the older one is
  removed;
* what vLLM refuses to serve is refused first by our checks: ``unservable_adapter`` agrees with vLLM's
  own ``PEFTHelper.validate_legal`` case by case, and our rank table is vLLM's;
* three ``grpo train`` steps with the adapter push end with a checkpoint and sane mismatch metrics.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("vllm", reason="vLLM is not installed here (bash scripts/setup.sh --vllm makes .venv-vllm)")

import torch  # noqa: E402

from tests.vllm_lane.conftest import run_config  # noqa: E402
from tests.vllm_lane.test_engine import LOGP_ATOL, Setup, max_gap, policy_logps  # noqa: E402
from tests.vllm_lane.test_train import PROMPTS, RUN  # noqa: E402

LORA = {"enabled": True, "r": 4, "alpha": 16, "target_modules": ["q_proj", "v_proj", "up_proj", "down_proj"]}


def train_lora(setup: Setup, target: torch.Tensor, steps: int = 3) -> None:
    params = [p for p in setup.model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=5e-2)
    for _ in range(steps):  # push the policy towards other tokens
        loss = setup.model(input_ids=target).logits.log_softmax(-1)[..., 5].mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()


@pytest.fixture(scope="module")
def pair(tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One policy (LoRA), served by two engines: merged weights and the adapter."""
    merged = Setup(tiny_dir, tmp_path_factory.mktemp("merged"), lora=LORA)
    from grpo_core.generation.vllm.engine import VLLMBackend

    cfg = run_config(tiny_dir, tmp_path_factory.mktemp("adapter"), lora=LORA,
                     generation={"vllm_lora_push": "adapter"})
    adapter = VLLMBackend(cfg, merged.model, merged.tokenizer)
    yield merged, adapter
    adapter.adapter.close()
    merged.close()


def test_adapter_push_gives_the_merged_push_tokens(pair: Any) -> None:
    merged, adapter = pair
    before = adapter.generate(merged.prompts, 1, greedy=True)
    assert torch.equal(before.completion_ids, merged.vllm.generate(merged.prompts, 1, greedy=True).completion_ids)
    first = adapter._served
    train_lora(merged, before.completion_ids[:, :4])
    ours = adapter.generate(merged.prompts, 1, greedy=True)
    theirs = merged.vllm.generate(merged.prompts, 1, greedy=True)
    policy = merged.hf.generate(merged.prompts, 1, greedy=True)
    assert not torch.equal(before.completion_ids, ours.completion_ids)  # the steps changed greedy decoding
    assert torch.equal(ours.completion_ids, theirs.completion_ids)
    assert torch.equal(ours.completion_ids, policy.completion_ids)
    assert ours.completions_text == theirs.completions_text
    assert max_gap(merged.model, ours) < LOGP_ATOL
    assert not first.exists() and adapter._served.is_dir()  # a new version; the old one is gone
    assert sorted(p.name for p in adapter.adapter.root.iterdir()) == [adapter._served.name]
    assert adapter.sync_weights() == 0  # nothing changed since: no new version
    assert adapter.adapter.versions == 2


def test_sampling_with_the_adapter_has_ratios_near_one(pair: Any) -> None:
    merged, adapter = pair
    torch.manual_seed(3)
    batch = adapter.generate(merged.prompts, 4)
    from grpo_core.algorithm.sampler_correction import importance_ratio

    policy = policy_logps(merged.model, batch)
    _, metrics = importance_ratio(policy, batch.sampling_logps, batch.completion_mask, "token_truncate")
    assert 0 <= metrics["rollout_corr/k3_kl"] < LOGP_ATOL ** 2
    assert metrics["sampling/sampling_logp_difference/max"] < LOGP_ATOL
    assert 0.999 < metrics["sampling/importance_sampling_ratio/min"] <= metrics[
        "sampling/importance_sampling_ratio/max"] < 1.001


def test_a_change_never_pushed_leaves_the_engine_stale(pair: Any) -> None:
    merged, adapter = pair
    train_lora(merged, adapter.generate(merged.prompts, 1, greedy=True).completion_ids[:, :4], steps=2)
    adapter.adapter._seen = adapter.adapter._version()  # marks the change as sent without sending it
    stale = adapter.generate(merged.prompts, 1, greedy=True)
    assert max_gap(merged.model, stale) > 100 * LOGP_ATOL
    adapter.adapter.reset()
    assert max_gap(merged.model, adapter.generate(merged.prompts, 1, greedy=True)) < LOGP_ATOL


UNSERVABLE = [
    {"modules_to_save": ["lm_head"]},
    {"modules_to_save": ["score"]},  # served: a classification head
    {"use_dora": True},
    {"bias": "lora_only"},
    {"lora_bias": True},
    {"init_lora_weights": "pissa"},
    {"init_lora_weights": "gaussian"},  # served: only the first weights
    {"layer_replication": [[0, 1]]},
    {"r": 600},
    {"r": 8, "rank_pattern": {"q_proj": 1024}},
    {"r": 512},  # served: vLLM's largest rank
    {},
]


@pytest.mark.parametrize("extra", UNSERVABLE, ids=[json.dumps(e) for e in UNSERVABLE])
def test_our_checks_are_vllms(extra: dict[str, Any]) -> None:
    from vllm.config.lora import LoRAConfig
    from vllm.lora.peft_helper import PEFTHelper

    from grpo_core.generation.vllm.support import unservable_adapter

    peft = {"r": 8, "lora_alpha": 16, "target_modules": ["q_proj"], **extra}
    try:
        PEFTHelper.from_dict(dict(peft)).validate_legal(LoRAConfig(max_lora_rank=512))
        vllm_refuses = False
    except ValueError:
        vllm_refuses = True
    assert bool(unservable_adapter(peft)) == vllm_refuses, unservable_adapter(peft)


def test_our_rank_table_is_vllms() -> None:
    from vllm.config.lora import MaxLoRARanks

    from grpo_core.generation.vllm.support import VLLM_LORA_RANKS, engine_lora_rank

    assert typing.get_args(MaxLoRARanks) == VLLM_LORA_RANKS
    assert [engine_lora_rank(r) for r in (1, 4, 8, 9, 300, 512, 513)] == [1, 8, 8, 16, 320, 512, None]


def test_a_dora_policy_is_refused_naming_the_key(tiny_dir: Path, tmp_path: Path) -> None:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from grpo_core.generation.vllm.engine import VLLMBackend
    from grpo_rewards.errors import ConfigError

    cfg = run_config(tiny_dir, tmp_path, lora=LORA, generation={"vllm_lora_push": "adapter"})
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_dir),  # as GRPOTrainer(peft_config=...) does
                           LoraConfig(r=4, target_modules=["q_proj"], use_dora=True))
    with pytest.raises(ConfigError, match="generation.vllm_lora_push: \"adapter\": vLLM cannot serve this adapter "
                                          "\\(use_dora: vLLM does not serve DoRA\\)"):
        VLLMBackend(cfg, model, AutoTokenizer.from_pretrained(tiny_dir))


def test_three_train_steps_with_the_adapter_push(tiny_dir: Path, tmp_path: Path) -> None:
    """``grpo train`` (a fresh process, the real command line) with LoRA served as an adapter."""
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps({"prompt": p}) + "\n" for p in PROMPTS * 2))
    run = tmp_path / "run.toml"
    run.write_text(RUN.format(model=tiny_dir, data=data, rule="token_truncate", mu=2, lora="true")
                   .replace('backend = "vllm"', 'backend = "vllm"\nvllm_lora_push = "adapter"'))
    out = tmp_path / "out"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    proc = subprocess.run([sys.executable, "-m", "grpo_rewards", "train", str(run), "--set",
                           f"logging.output_dir={out}"], capture_output=True, text=True, env=env, timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    steps = [m for m in map(json.loads, (out / "metrics.jsonl").read_text().splitlines()) if "loss" in m]
    assert [m["step"] for m in steps] == [1, 2, 3]
    for m in steps:  # fp32 on both sides: the adapter-served engine samples the policy's distribution
        assert 0.0 <= m["rollout_corr/k3_kl"] < LOGP_ATOL ** 2
        assert 0.99 < m["sampling/importance_sampling_ratio/mean"] < 1.01
        assert m["sampling/sampling_logp_difference/max"] < LOGP_ATOL
        assert m["rollout_corr/rollout_is_ratio_fraction_high"] == 0.0
    assert sorted(p.name for p in (out / "checkpoints").iterdir())[-1].endswith("3")
    assert (out / "model" / "adapter_config.json").is_file()
