"""DeepSpeed's ZeRO engine under the trainer (``[distributed] engine = "deepspeed"``; CPU, gloo, 2 processes
started by torchrun, DeepSpeed's CPU accelerator): one step of a 2-process run makes the same update as a
1-process run of the plain trainer over the same global batch, for ZeRO stages 0, 1 and 2, with the optimizer
state offloaded to the CPU (DeepSpeedCPUAdam) and on the device (torch's AdamW), LoRA and full fine-tuning; the
ranks run different numbers of passes (the ``ragged`` backend); one process runs the engine too; a run stopped
after a step and resumed ends as an uninterrupted one.

The runs are one torchrun launch of tests/core/ddp_worker.py; the run config and the ``seeded`` sampling are
those of tests/core/test_distributed.py. Skipped where DeepSpeed is not installed (``pip install '.[deepspeed]'``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("deepspeed", reason="deepspeed is not installed (pip install '.[deepspeed]')")

from tests.core import test_distributed as ddp  # noqa: E402  (its tiny model, run config and launcher)
from tests.core import test_fsdp  # noqa: E402  (its run config with extra sections)

model_dir = ddp.model_dir  # a fixture
TOLERANCE = ddp.TOLERANCE

# (name, loss type, LoRA, [distributed] keys, other keys); dr_grpo-full's rank 1 runs more passes (ragged)
CASES = [
    ("grpo-lora-z2-offload", "grpo", True, {"zero_stage": 2, "offload_optimizer": "cpu"}, {}),
    ("dapo-full-z2", "dapo", False, {"zero_stage": 2}, {"model.gradient_checkpointing": True}),
    ("bnpo-lora-z1", "bnpo", True, {"zero_stage": 1}, {"checkpoint.save_merged": True}),
    ("dr_grpo-full-z2-offload", "dr_grpo", False, {"zero_stage": 2, "offload_optimizer": "cpu"},
     {"generation.backend": "ragged"}),
    ("dapo-lora-z0", "dapo", True, {"zero_stage": 0}, {"data.eval_size": 5, "logging.eval_every": 1}),
]


def deepspeed(config: dict[str, Any], **keys: Any) -> dict[str, Any]:
    return {**config, "distributed": {"engine": "deepspeed", "backend": "gloo", **keys}}


def resume_config(model_dir: Path, run_dir: Path, max_steps: int) -> dict[str, Any]:
    """tests/core/test_fsdp.py's resume run (a constant learning rate, Adam's state carried over) on ZeRO-2 with
    the optimizer on the CPU."""
    config = test_fsdp.resume_config(model_dir, run_dir, max_steps)
    return deepspeed(config, zero_stage=2, offload_optimizer="cpu")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, model_dir: Path) -> dict[str, Any]:
    import torch

    from grpo_core.config import config_from_dict
    from grpo_core.trainer import Trainer

    root = tmp_path_factory.mktemp("deepspeed")
    out: dict[str, Any] = {}
    spec = []
    for name, loss, lora, keys, extra in CASES:
        one, two = root / f"{name}-1", root / f"{name}-2"
        out[name] = (one, two)
        spec.append({"config": deepspeed(test_fsdp.run_config(model_dir, two, loss, lora, extra), **keys)})
    whole, stopped = root / "resume-whole", root / "resume-stopped"
    out["resume"] = (whole, stopped)
    spec += [{"config": resume_config(model_dir, whole, 2)}, {"config": resume_config(model_dir, stopped, 1)},
             {"config": resume_config(model_dir, stopped, 2), "resume": True}]
    (root / "runs.json").write_text(json.dumps(spec))
    proc = ddp.torchrun(root / "runs.json")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    registry = ddp.ddp_worker.registry()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as each torchrun process (see tests/core/test_distributed.py)
    try:
        for name, loss, lora, _, extra in CASES:
            config = test_fsdp.run_config(model_dir, out[name][0], loss, lora, extra)
            Trainer(config_from_dict(config, registry=registry), registry=registry).train()
        # one process on the engine, the seed recipe's settings (bf16 base, LoRA, ZeRO-2, the optimizer on the
        # CPU): the plain trainer's update in the same precision
        bf16 = {"model.dtype": "bfloat16"}
        plain, alone = root / "alone-plain", root / "alone"
        out["alone"] = (plain, alone)
        Trainer(config_from_dict(test_fsdp.run_config(model_dir, plain, "grpo", True, bf16), registry=registry),
                registry=registry).train()
        config = deepspeed(test_fsdp.run_config(model_dir, alone, "grpo", True, bf16), zero_stage=2,
                           offload_optimizer="cpu")
        Trainer(config_from_dict(config, registry=registry), registry=registry).train()
        # nothing left behind that would make other libraries take this process for a torchrun rank
        assert "LOCAL_RANK" not in os.environ and not torch.distributed.is_initialized()
    finally:
        torch.set_num_threads(threads)
    return out


def _largest_difference(one: Path, two: Path) -> float:
    a, b = ddp.weights(one), ddp.weights(two)
    assert a.keys() == b.keys() and a
    return max((a[n] - b[n]).abs().max().item() for n in a)


@pytest.mark.parametrize("case", [c[0] for c in CASES] + ["alone"])
def test_deepspeed_makes_the_update_of_the_plain_trainer(runs: dict[str, Any], case: str) -> None:
    one, two = runs[case]
    worst = _largest_difference(one, two)
    update = ddp.update_size(one, ddp.weights(one))
    print(f"deepspeed {case}: largest weight difference {worst:.3g}, update {update:.3g}")
    assert worst <= TOLERANCE and update >= 50 * TOLERANCE
    lora = "lora" in case or case == "alone"
    names = ddp.weights(one)
    assert all("lora_" in n for n in names) if lora else not any("lora_" in n for n in names)

    (m1,), (m2,) = ddp.records(one / "metrics.jsonl"), ddp.records(two / "metrics.jsonl")
    assert m1["grad_norm"] > 0 and m1["kl"] > 0  # a real update, through the reference passes too
    for key, value in m1.items():
        if key not in ddp.TIMING_KEYS and key not in ddp.HELD and isinstance(value, float):
            assert m2[key] == pytest.approx(value, rel=1e-4, abs=1e-6), key
    # the weights stay whole. The plain trainer's optimizer holds AdamW's two moments; ZeRO 1-2 hold an fp32 copy
    # of the weights too (3/2 of it), partitioned over the 2 ranks (3/4); stage 0 partitions nothing
    params, optimizer = (m2[key] / m1[key] for key in ddp.HELD)
    print(f"deepspeed {case}: parameters x{params:.3f}, optimizer state x{optimizer:.3f} of the plain trainer's")
    assert params == pytest.approx(1.0)
    expected = 1.0 if "-z0" in case else 1.5 if case == "alone" else 0.75
    assert optimizer == pytest.approx(expected, rel=0.1), case


def test_the_saved_model_holds_the_trained_weights(runs: dict[str, Any]) -> None:
    from safetensors.torch import load_file

    for case, where, name in [("dapo-full-z2", "model", "model"), ("grpo-lora-z2-offload", "model", "adapter_model"),
                              ("bnpo-lora-z1", "merged", "model")]:
        one, two = runs[case]
        a, b = (load_file(d / where / f"{name}.safetensors") for d in (one, two))
        assert a.keys() == b.keys() and a, where
        assert max((a[n] - b[n]).abs().max().item() for n in a) <= TOLERANCE, (case, where)


def test_a_deepspeed_run_resumed_after_a_stop_ends_as_an_uninterrupted_one(runs: dict[str, Any]) -> None:
    import torch

    whole, stopped = runs["resume"]
    test_fsdp.assert_resumed_as_uninterrupted(whole, stopped)
    saved = torch.load(stopped / "checkpoints" / "step-00000001" / "optimizer.pt", weights_only=True)
    assert len(saved["deepspeed_partitions"]) == 2  # each rank's partition of the optimizer


def test_two_deepspeed_trainers_train_one_after_the_other_in_one_process(arithmetic_model_dir: Path,
                                                                         tmp_path: Path) -> None:
    """A notebook's second DeepSpeed run: the first destroyed its process group, and DeepSpeed's own references
    to it are released with it (else the second engine looks up the dead group and fails)."""
    from grpo_core import Trainer, config_from_dict
    from tests.core.conftest import tiny_run

    for name in ("first", "second"):
        data = tiny_run(arithmetic_model_dir, tmp_path / name, model={"gradient_checkpointing": False},
                        data={"source": "demo:arithmetic?max_operand=9", "answer_field": "answer",
                              "chat_template": False},
                        grpo={"max_steps": 1}, checkpoint={"every": 0}, rewards={"near": {"use": "numeric_proximity"}},
                        distributed={"engine": "deepspeed", "zero_stage": 2})
        summary = Trainer(config_from_dict(data)).train()
        assert summary["step"] == 1, name
