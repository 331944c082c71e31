"""Data-parallel training on torch.distributed (CPU, gloo, 2 processes started by torchrun): one step of a
2-process run makes the same update as a 1-process run over the same global batch, for every loss type,
with LoRA and with full fine-tuning; only rank 0 writes the run folder.

The 2-process runs are one torchrun launch of tests/core/ddp_worker.py over all the configs; the 1-process
references run in this process. Both sample with the worker's ``seeded`` backend (each prompt's group from
its own seeded generator), so the completions are the same however the prompts are spread. Where the generation
batch is split over optimizer steps (``steps_per_generation``), each step takes part of every process's rows, as
TRL splits them, so the 1-process reference splits its batch as 2 processes do (``trainer.generation_split``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import ddp_worker  # noqa: E402

LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo")
TOLERANCE = 1e-5
TIMING_KEYS = {"time", "step_time", "tokens_per_s", "peak_memory_gb"}
HELD = ("memory/parameters_gb", "memory/optimizer_gb")  # one process's training state: what sharding changes


@pytest.fixture(scope="module")
def model_dir(arithmetic_model_dir: Path) -> Path:
    return arithmetic_model_dir  # the demo's tiny model (tests/core/conftest.py), built once per session


def run_config(model_dir: Path, run_dir: Path, *, loss_type: str, lora: bool, **extra: Any) -> dict[str, Any]:
    """6 prompts x 4 completions in 3 micro-batches of 8 rows (learning rate 1e-3: Adam's first steps turn
    rounding differences in tiny gradients into weight differences proportional to it): the middle one straddles the two ranks
    (rows 0-11 on rank 0, 12-23 on rank 1); slices of 2-3 rows (micro_batch_tokens); two optimizer steps on
    the batch (num_iterations) with a KL term, so old and reference log-probs are used as well. ``extra``:
    ``{"section.key": value}``."""
    config: dict[str, Any] = {
        "model": {"name_or_path": str(model_dir), "dtype": "float32", "gradient_checkpointing": False},
        "data": {"source": "demo:arithmetic?max_operand=9", "prompt_field": "prompt", "answer_field": "answer",
                 "chat_template": False},
        "generation": {"backend": "seeded", "num_generations": 4, "max_completion_length": 8},
        "grpo": {"learning_rate": 1e-3, "prompts_per_step": 6, "max_steps": 1, "gradient_accumulation_steps": 3,
                 "num_iterations": 2, "beta": 0.04, "loss_type": loss_type, "micro_batch_tokens": 40, "seed": 5},
        "lora": {"enabled": lora, "r": 4, "alpha": 8},
        "logging": {"output_dir": str(run_dir), "progress": False, "plot": False, "sample_every": 1,
                    "num_samples": 30},
        "rewards": {"len": {"use": "ddp_len"}},
    }
    for key, value in extra.items():
        section, name = key.split(".")
        config[section][name] = value
    return config


# each loss type with LoRA and with full fine-tuning; other settings ride along on some of them: the step's
# reward spread (scale_rewards = "batch"), a held-out evaluation shared by the ranks, gradient checkpointing
RIDERS: dict[tuple[str, bool], dict[str, Any]] = {
    ("dapo", True): {"grpo.scale_rewards": "batch", "data.eval_size": 6, "logging.eval_every": 1},
    ("bnpo", False): {"grpo.mask_truncated_completions": True},
    ("grpo", False): {"model.gradient_checkpointing": True},
    # another sampler's batch, one optimizer step: the correction read off each training pass, its metrics
    # reduced over the ranks
    ("dr_grpo", True): {"generation.backend": "other_sampler", "grpo.num_iterations": 1,
                        "generation.importance_sampling": "token_mask", "generation.importance_sampling_min": 0.5,
                        "generation.importance_sampling_max": 1.5},
}
# two of TRL's newer loss types at sequence level (GSPO's one ratio per sequence), one with the off-policy mask and
# the generation batch split over two optimizer steps (steps_per_generation: 24 rows, 12 per step, each rank giving 6)
RIDERS |= {("luspo", True): {"grpo.importance_sampling_level": "sequence", "grpo.off_policy_mask_threshold": 0.05,
                             "grpo.steps_per_generation": 6},
           ("sapo", False): {"grpo.importance_sampling_level": "sequence"}}
# the entropy options: the high-entropy tokens' threshold over the micro-batch that straddles the ranks, the bonus,
# and the adaptive coefficient measured over both ranks
RIDERS |= {("grpo", True): {"grpo.top_entropy_quantile": 0.4, "grpo.entropy_coef": 0.05},
           ("dapo", False): {"grpo.use_adaptive_entropy": True, "grpo.entropy_coef": 0.01, "grpo.entropy_target": 10.0,
                             "grpo.entropy_coef_delta": 0.02, "grpo.top_entropy_quantile": 0.5}}
# a Mixture-of-Experts model with its load-balancing loss: each micro-batch's loss is over all of its rows, those of
# every slice and rank (the middle micro-batch straddles the ranks)
MOE = "moe"  # model.name_or_path: the tiny Mixtral below
RIDERS |= {("dr_grpo", False): {"model.name_or_path": MOE, "grpo.router_aux_loss_coef": 0.5,
                               "grpo.importance_sampling_level": "sequence"}}
CASES = [(loss, lora, RIDERS.get((loss, lora), {})) for loss in LOSS_TYPES for lora in (True, False)]
CASES += [("luspo", True, RIDERS[("luspo", True)]), ("sapo", False, RIDERS[("sapo", False)])]


def case_name(loss: str, lora: bool) -> str:
    return f"{loss}-{'lora' if lora else 'full'}"


def torchrun(spec: Path, nproc: int = 2) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
                           str(HERE / "ddp_worker.py"), str(spec)], env=env, capture_output=True, text=True,
                          timeout=600)


def weights(run_dir: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    return load_file(run_dir / "checkpoints" / "step-00000001" / "weights.safetensors")


def update_size(run_dir: Path, trained: dict[str, Any]) -> float:
    """The largest change one step made to a weight: LoRA's B starts at zero; a full model starts from the
    checkpoint the run config names."""
    from safetensors.torch import load_file

    if any("lora_" in name for name in trained):
        return max(w.abs().max().item() for name, w in trained.items() if "lora_B" in name)
    config = json.loads((run_dir / "config.json").read_text())
    start = load_file(Path(config["model"]["name_or_path"]) / "model.safetensors")
    common = [name for name in trained if name in start]
    assert common, "no weight of the checkpoint matches the starting model's names"
    return max((trained[name] - start[name]).abs().max().item() for name in common)


def records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def files(run_dir: Path) -> list[str]:
    return sorted(str(p.relative_to(run_dir)) for p in run_dir.rglob("*") if p.is_file())


def save_tiny_mixtral(tokenizer_dir: Path, path: Path) -> Path:
    """A tiny Mixtral (4 experts, top 2) with ``tokenizer_dir``'s tokenizer, saved to ``path``."""
    import torch
    from transformers import AutoTokenizer, MixtralConfig, MixtralForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    torch.manual_seed(0)
    config = MixtralConfig(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                           num_attention_heads=2, num_key_value_heads=1, num_local_experts=4, num_experts_per_tok=2,
                           max_position_embeddings=64, pad_token_id=tokenizer.pad_token_id,
                           eos_token_id=tokenizer.eos_token_id, bos_token_id=tokenizer.bos_token_id)
    MixtralForCausalLM(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def moe_dir(tmp_path_factory: pytest.TempPathFactory, model_dir: Path) -> Path:
    return save_tiny_mixtral(model_dir, tmp_path_factory.mktemp("moe"))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, model_dir: Path, moe_dir: Path) -> dict[str, tuple[Path, Path]]:
    """``{case: (1-process run dir, 2-process run dir)}``, all trained."""
    import torch

    from grpo_core import trainer as trainer_module
    from grpo_core.config import config_from_dict
    from grpo_core.trainer import Trainer

    root = tmp_path_factory.mktemp("ddp")
    out, spec = {}, []
    for loss, lora, extra in CASES:
        if extra.get("model.name_or_path") == MOE:
            extra.update({"model.name_or_path": str(moe_dir)})
        name = case_name(loss, lora)
        one, two = root / f"{name}-1", root / f"{name}-2"
        out[name] = (one, two)
        spec.append({"config": run_config(model_dir, two, loss_type=loss, lora=lora, **extra)})
    (root / "runs.json").write_text(json.dumps(spec))
    proc = torchrun(root / "runs.json")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    registry = ddp_worker.registry()
    split = trainer_module.generation_split
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as each torchrun process (OMP_NUM_THREADS=1): the same summation order in the
    try:                      # kernels, since Adam's first steps magnify rounding differences in tiny gradients
        for loss, lora, extra in CASES:
            one = out[case_name(loss, lora)][0]
            cfg = config_from_dict(run_config(model_dir, one, loss_type=loss, lora=lora, **extra), registry=registry)
            with pytest.MonkeyPatch.context() as patch:
                # a generation batch split over optimizer steps: each step takes part of every process's rows (as
                # TRL splits them), so one process trains those very rows together, as two would split them
                patch.setattr(trainer_module, "generation_split",
                              lambda rows, steps, world: split(rows, steps, dataclasses.replace(world, size=2)))
                Trainer(cfg, registry=registry).train()
    finally:
        torch.set_num_threads(threads)
    return out


@pytest.mark.parametrize("loss,lora", [(loss, lora) for loss, lora, _ in CASES],
                         ids=[case_name(loss, lora) for loss, lora, _ in CASES])
def test_two_processes_make_the_update_of_one(runs: dict[str, tuple[Path, Path]], loss: str, lora: bool) -> None:
    one, two = runs[case_name(loss, lora)]
    a, b = weights(one), weights(two)
    assert a.keys() == b.keys() and a
    if lora:
        assert all("lora_" in name for name in a)
    else:
        assert not any("lora_" in name for name in a)
    worst = max((a[n] - b[n]).abs().max().item() for n in a)
    print(f"{case_name(loss, lora)}: largest weight difference {worst:.3g}")
    assert worst <= TOLERANCE
    assert update_size(one, a) >= 50 * TOLERANCE  # the update itself is far larger than the tolerance

    first, second = records(one / "metrics.jsonl"), records(two / "metrics.jsonl")
    assert len(first) == len(second) == 1  # rank 0 alone wrote the metrics
    m1, m2 = ({k: v for k, v in r.items() if k not in TIMING_KEYS} for r in (first[0], second[0]))
    assert m1.keys() == m2.keys()
    assert m1["grad_norm"] > 0  # a real update
    if RIDERS.get((loss, lora), {}).get("grpo.num_iterations", 2) > 1:
        assert m1["kl"] > 0  # the second pass on the batch moved away from the reference model
    assert m1["advantages/std"] > 0  # the rewards differ within groups
    if RIDERS.get((loss, lora), {}).get("generation.backend") == "other_sampler":
        assert 0 < m1["rollout_corr/rollout_rs_masked_fraction"] < 1  # the rule dropped some tokens, not all
    if "grpo.steps_per_generation" in RIDERS.get((loss, lora), {}):  # 2 slices x 2 iterations, in both runs
        import torch

        for run in (one, two):
            state = torch.load(run / "checkpoints" / "step-00000001" / "optimizer.pt", weights_only=True)["state"]
            assert {int(s["step"]) for s in state.values()} == {4}
    if "grpo.router_aux_loss_coef" in RIDERS.get((loss, lora), {}):
        assert m1["aux_loss"] > 0  # the load-balancing loss, compared below as well
    if "grpo.entropy_coef" in RIDERS.get((loss, lora), {}):
        assert m1["entropy_coef"] > 0  # the bonus (and the adaptive coefficient) compared below as well
    if "logging.eval_every" in RIDERS.get((loss, lora), {}):
        assert "eval/reward/mean" in m1 and "eval/completion_length/mean" in m1  # compared below as well
    for key, value in m1.items():  # the metrics are reduced over the ranks: the whole step's, as one process
        if isinstance(value, float):
            assert m2[key] == pytest.approx(value, rel=1e-4, abs=1e-6), key
        else:
            assert m2[key] == value, key


def test_only_rank_zero_writes(runs: dict[str, tuple[Path, Path]]) -> None:
    one, two = runs[case_name("dapo", True)]
    # the same files as one process writes, plus rank 1's random generator state in the checkpoint
    assert files(two) == sorted([*files(one), "checkpoints/step-00000001/rng-rank1.pt"])
    s1, s2 = records(one / "samples.jsonl"), records(two / "samples.jsonl")
    assert len(s2) == len(s1) == 24  # every completion of the step, once
    assert [s["completion"] for s in s2] == [s["completion"] for s in s1]
    assert [s["total"] for s in s2] == [s["total"] for s in s1]
    assert [s["advantage"] for s in s2] == pytest.approx([s["advantage"] for s in s1], abs=1e-6)
