"""FSDP2 (``[distributed] engine = "fsdp2"``, torch's ``fully_shard``; CPU, gloo, 2 processes started by
torchrun): one step of a 2-process sharded run makes the same update as a 1-process run over the same global
batch, with LoRA and with full fine-tuning, for several loss types, with activation checkpointing on one of
them; the ranks' completions differ in length (generation and the no-grad passes run on the gathered model);
a sharded run stopped after a step and resumed ends as an uninterrupted one.

The runs are one torchrun launch of tests/core/ddp_worker.py; the run config and the ``seeded`` sampling
(the same completions however the prompts are spread) are those of tests/core/test_distributed.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from tests.core import test_distributed as ddp  # noqa: E402  (its tiny model, run config and launcher)

model_dir = ddp.model_dir  # a fixture
TOLERANCE = ddp.TOLERANCE

# dr_grpo-full: rank 1's completions carry 16 more (masked) columns (the worker's ``ragged`` backend), so it
# runs more forward/backward passes under the token budget than rank 0, which adds passes that contribute nothing
# (each pass is a collective), and more old/reference passes (on the gathered model)
CASES = [("grpo", True, {}), ("grpo", False, {"model.gradient_checkpointing": True}),
         ("dapo", True, {"data.eval_size": 5, "logging.eval_every": 1}), ("dapo", False, {}),
         ("bnpo", True, {"checkpoint.save_merged": True}), ("dr_grpo", False, {"generation.backend": "ragged"})]


def fsdp2(config: dict[str, Any]) -> dict[str, Any]:
    return {**config, "distributed": {"engine": "fsdp2", "backend": "gloo"}}


def run_config(model_dir: Path, run_dir: Path, loss: str, lora: bool, extra: dict[str, Any]) -> dict[str, Any]:
    """tests/core/test_distributed.py's run config; ``extra`` may name sections it lacks (``checkpoint``)."""
    config = ddp.run_config(model_dir, run_dir, loss_type=loss, lora=lora,
                            **{k: v for k, v in extra.items() if not k.startswith("checkpoint.")})
    config["checkpoint"] = {k.split(".")[1]: v for k, v in extra.items() if k.startswith("checkpoint.")}
    return config


def resume_config(model_dir: Path, run_dir: Path, max_steps: int) -> dict[str, Any]:
    """Two steps sampled by the transformers backend (each rank from its own restored random stream), a
    constant learning rate (so that stopping after step 1 changes no schedule), Adam's state carried over; one
    optimizer step per batch and no KL term, so no old or reference pass (nothing gathered before the update)."""
    return fsdp2(ddp.run_config(model_dir, run_dir, loss_type="dapo", lora=True, **{
        "generation.backend": "transformers", "grpo.max_steps": max_steps, "grpo.lr_scheduler": "constant",
        "grpo.num_iterations": 1, "grpo.beta": 0.0}))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, model_dir: Path) -> dict[str, Any]:
    import torch

    from grpo_core.config import config_from_dict
    from grpo_core.trainer import Trainer

    root = tmp_path_factory.mktemp("fsdp")
    out: dict[str, Any] = {}
    spec = []
    for loss, lora, extra in CASES:
        name = ddp.case_name(loss, lora)
        one, two = root / f"{name}-1", root / f"{name}-2"
        out[name] = (one, two)
        spec.append({"config": fsdp2(run_config(model_dir, two, loss, lora, extra))})
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
        for loss, lora, extra in CASES:
            one = out[ddp.case_name(loss, lora)][0]
            config = run_config(model_dir, one, loss, lora, extra)
            Trainer(config_from_dict(config, registry=registry), registry=registry).train()
    finally:
        torch.set_num_threads(threads)
    return out


@pytest.mark.parametrize("loss,lora", [(loss, lora) for loss, lora, _ in CASES],
                         ids=[ddp.case_name(loss, lora) for loss, lora, _ in CASES])
def test_two_sharded_processes_make_the_update_of_one(runs: dict[str, Any], loss: str, lora: bool) -> None:
    one, two = runs[ddp.case_name(loss, lora)]
    a, b = ddp.weights(one), ddp.weights(two)
    assert a.keys() == b.keys() and a
    assert all("lora_" in name for name in a) if lora else not any("lora_" in name for name in a)
    worst = max((a[n] - b[n]).abs().max().item() for n in a)
    print(f"fsdp2 {ddp.case_name(loss, lora)}: largest weight difference {worst:.3g}")
    assert worst <= TOLERANCE

    (m1,), (m2,) = ddp.records(one / "metrics.jsonl"), ddp.records(two / "metrics.jsonl")
    assert m1["grad_norm"] > 0 and m1["kl"] > 0  # a real update, through the reference passes too
    for key, value in m1.items():
        if key not in ddp.TIMING_KEYS and key not in ddp.HELD and isinstance(value, float):
            assert m2[key] == pytest.approx(value, rel=1e-4, abs=1e-6), key
    # each process holds about half of the parameters and of the optimizer state (whole-row shards, padded)
    print(f"fsdp2 {ddp.case_name(loss, lora)}: " + ", ".join(f"{k} x{m2[k] / m1[k]:.3f}" for k in ddp.HELD))
    for key in ddp.HELD:
        assert 0.45 * m1[key] <= m2[key] <= 0.55 * m1[key], (key, m1[key], m2[key])


def test_the_saved_model_holds_the_full_trained_weights(runs: dict[str, Any]) -> None:
    from safetensors.torch import load_file

    one, two = runs[ddp.case_name("dapo", False)]
    a, b = (load_file(d / "model" / "model.safetensors") for d in (one, two))
    assert a.keys() == b.keys() and a
    assert max((a[n] - b[n]).abs().max().item() for n in a) <= TOLERANCE  # full shapes, not a rank's shard
    for case, where, name in [("dapo", "model", "adapter_model"), ("dapo", "checkpoints/step-00000001/adapter",
                               "adapter_model"), ("bnpo", "merged", "model")]:  # LoRA: the peft layout, merged
        one, two = runs[ddp.case_name(case, True)]
        a, b = (load_file(d / where / f"{name}.safetensors") for d in (one, two))
        assert a.keys() == b.keys() and a, where
        assert max((a[n] - b[n]).abs().max().item() for n in a) <= TOLERANCE, where


def test_the_ranks_completions_differ_in_length(runs: dict[str, Any]) -> None:
    samples = ddp.records(runs[ddp.case_name("grpo", True)][1] / "samples.jsonl")
    half = len(samples) // 2  # rank 0's rows, then rank 1's
    lengths = [sorted(len(s["completion"]) for s in part) for part in (samples[:half], samples[half:])]
    assert lengths[0] != lengths[1] and len(set(lengths[0])) > 1, lengths  # rows ended at different times


def assert_resumed_as_uninterrupted(whole: Path, stopped: Path) -> None:
    """The run stopped after step 1 and resumed logged the same metrics and ended with the same weights, bit for
    bit, as the run never stopped."""
    import torch
    from safetensors.torch import load_file

    drop = {*ddp.TIMING_KEYS}
    first, second = ([{k: v for k, v in r.items() if k not in drop} for r in ddp.records(d / "metrics.jsonl")]
                     for d in (whole, stopped))
    assert [r["step"] for r in second] == [1, 2] and second == first
    a, b = (load_file(d / "checkpoints" / "step-00000002" / "weights.safetensors") for d in (whole, stopped))
    assert a.keys() == b.keys() and a
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=0, atol=0, msg=name)


def test_a_sharded_run_resumed_after_a_stop_ends_as_an_uninterrupted_one(runs: dict[str, Any]) -> None:
    assert_resumed_as_uninterrupted(*runs["resume"])
