"""The trainer runs by its step plan: on the CPU a memory budget shrinks the passes it really runs, on a simulated
GPU with room the loaded model loses its checkpointing and each micro-batch runs in one pass without shared
prompts; the plan is printed at start and written to the run folder's config.json."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from grpo_core.policy import step_plan as sp  # noqa: E402
from grpo_core.policy.activations import is_checkpointing  # noqa: E402
from grpo_core.policy.memory_model import GiB  # noqa: E402


def _trainer(model_dir, tmp_path, **sections):
    from grpo_core import Trainer, config_from_dict

    run = {
        "model": {"name_or_path": str(model_dir), "dtype": "float32"},
        "data": {"source": "demo:arithmetic?max_operand=9", "answer_field": "answer", "chat_template": False},
        "generation": {"num_generations": 4, "max_completion_length": 6},
        "grpo": {"learning_rate": 1e-3, "prompts_per_step": 2, "max_steps": 1},
        "logging": {"output_dir": str(tmp_path / "run"), "progress": False, "plot": False},
        "rewards": {"correct": {"use": "exact_match"}},
    }
    for name, values in sections.items():
        run[name] = {**run.get(name, {}), **values}
    return Trainer(config_from_dict(run))


def _count_passes(trainer):
    """Wrap the engine's forward to count the training passes of one step."""
    passes = []
    forward = trainer.engine.forward

    def counted(input_ids, *args, **kwargs):
        passes.append((input_ids.shape[0], input_ids.shape[1], kwargs.get("share_prompts"), kwargs.get("chunk_size")))
        return forward(input_ids, *args, **kwargs)

    trainer.engine.forward = counted
    return passes


def test_cpu_budget_shrinks_the_passes_the_trainer_runs(arithmetic_model_dir, tmp_path, capsys):
    short = {"max_prompt_length": 8, "source": "demo:arithmetic?max_operand=9"}  # 8 rows of at most 14 tokens
    default = _trainer(arithmetic_model_dir, tmp_path / "a", data=short)
    assert default.step_plan.micro_batch_tokens == 4096 and default.step_plan.gradient_checkpointing
    assert is_checkpointing(default.model)
    # a budget just under the default plan's peak: the planner halves the rows per pass until it fits
    budget = (default.step_plan.estimate.peak - 1) / GiB
    trainer = _trainer(arithmetic_model_dir, tmp_path / "b", data=short, trainer={"memory_budget_gb": budget})
    plan = trainer.step_plan
    assert plan.micro_batch_tokens < 4096 and plan.estimate.peak <= budget * GiB
    assert "step plan on cpu" in capsys.readouterr().err
    passes = _count_passes(trainer)
    trainer.train()
    assert len(passes) >= 2 and sum(rows for rows, _, _, _ in passes) == 8  # every row, in more than one pass
    assert all(rows * width <= plan.micro_batch_tokens for rows, width, _, _ in passes)
    assert all(share and chunk == 1024 for _, _, share, chunk in passes)
    written = json.loads((tmp_path / "b" / "run" / "config.json").read_text())["step_plan"]
    assert written["micro_batch_tokens"] == plan.micro_batch_tokens and written["budget_source"] == \
        "trainer.memory_budget_gb"


def test_simulated_gpu_plan_is_applied_to_the_model_and_the_update(arithmetic_model_dir, tmp_path, monkeypatch):
    import grpo_core.trainer as trainer_module

    monkeypatch.setattr(trainer_module, "describe_device",
                        lambda device: sp.DeviceInfo("cuda", "simulated", 80 * GiB, 70 * GiB,
                                                     frozenset({"flash", "mem_efficient"})))
    trainer = _trainer(arithmetic_model_dir, tmp_path)
    plan = trainer.step_plan
    assert not plan.gradient_checkpointing and plan.micro_batch_tokens == 0 and not plan.share_prompts
    assert not is_checkpointing(trainer.model)  # loaded checkpointed (the config's default), planned off
    assert not any(getattr(m.__dict__.get("forward"), "_grpo_tiled", None) for m in trainer.model.modules())
    passes = _count_passes(trainer)
    metrics = trainer.train()
    assert [(rows, share, chunk) for rows, _, share, chunk in passes] == [(8, False, sp.CUDA_LOGPROB_CHUNK)]
    assert metrics["step"] == 1
    # a key the user set stays: checkpointing on, on the same simulated GPU
    kept = _trainer(arithmetic_model_dir, tmp_path / "kept", model={"gradient_checkpointing": True})
    assert kept.step_plan.gradient_checkpointing and is_checkpointing(kept.model)


def test_simulated_gpu_with_flex_attention_packs_the_update_through_block_masks(arithmetic_model_dir, tmp_path,
                                                                                monkeypatch):
    """A GPU that runs FlexAttention: the plan shares prompts through it, the loaded model packs through it, and
    every training pass hands its layers block masks (torch's CPU guard on flex's backward lifted: its eager
    autograd runs here)."""
    import torch.nn.attention.flex_attention as flex_module

    import grpo_core.policy.shared_prompts as shared
    import grpo_core.trainer as trainer_module
    from grpo_core.policy.packed_attention import FLEX, packing_kernel

    monkeypatch.setattr(flex_module, "_validate_device", lambda *a: None)
    monkeypatch.setattr(trainer_module, "describe_device",
                        lambda device: sp.DeviceInfo("cuda", "simulated", 80 * GiB, 70 * GiB,
                                                     frozenset({"flash", "mem_efficient", FLEX})))
    built = []
    original = shared.block_mask
    monkeypatch.setattr(shared, "block_mask", lambda *a: built.append(a[0].shape) or original(*a))
    trainer = _trainer(arithmetic_model_dir, tmp_path, data={"max_prompt_length": 8})
    plan = trainer.step_plan
    assert plan.share_prompts and plan.packing_kernel == FLEX and packing_kernel(trainer.model) == FLEX
    assert "packing kernel" in plan.table() and json.dumps(plan.to_dict())
    built.clear()  # the load check's packing
    passes = _count_passes(trainer)
    metrics = trainer.train()
    assert [(rows, share) for rows, _, share, _ in passes] == [(8, True)] and metrics["step"] == 1
    assert built and all(rows == 2 for rows, _ in built)  # 8 rows: two groups of 4, one packed row each
    assert json.loads((tmp_path / "run" / "config.json").read_text())["step_plan"]["packing_kernel"] == FLEX


def test_simulated_gpu_runs_lora_on_a_bf16_base_under_autocast(arithmetic_model_dir, tmp_path, monkeypatch):
    """The plan a GPU gets for LoRA on a 16-bit base, run for real on the CPU: peft's input casts off, every forward
    under bf16 autocast (the load checks too), the chunked head kept (its load check passes under autocast: no
    fall-back to full logits), the base weights bf16 and untouched, the fp32 adapters trained."""
    import warnings

    import grpo_core.trainer as trainer_module
    from grpo_core.policy import logprobs

    monkeypatch.setattr(trainer_module, "describe_device",
                        lambda device: sp.DeviceInfo("cuda", "simulated", 80 * GiB, 70 * GiB,
                                                     frozenset({"flash", "mem_efficient"})))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # a head that fails its check warns: that fails here
        trainer = _trainer(arithmetic_model_dir, tmp_path, model={"dtype": "bfloat16"}, lora={"enabled": True, "r": 4},
                           grpo={"max_steps": 2, "lr_scheduler": "constant"},
                           rewards={"close": {"use": "numeric_proximity", "tolerance": 10.0}})  # varies in a group
    plan = trainer.step_plan
    assert plan.autocast_dtype == "bfloat16" and not plan.gradient_checkpointing
    assert logprobs.lm_parts(trainer.model) is not None  # the chunked head passed its check
    assert not any(getattr(m, "cast_input_dtype_enabled", False) for m in trainer.model.modules())
    seen = []  # the dtype each LoRA layer's adapter computes in, from its input
    for module in trainer.model.modules():
        if type(module).__name__ == "Linear" and hasattr(module, "lora_A"):
            module.register_forward_hook(lambda m, args, out: seen.append((torch.is_autocast_enabled("cpu"),
                                                                           args[0].dtype, out.dtype)))
    base = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if "lora_" not in n}
    adapters = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if "lora_" in n}
    assert all(p.dtype == torch.bfloat16 for p in base.values())
    assert all(p.dtype == torch.float32 for p in adapters.values())
    metrics = trainer.train()
    assert metrics["step"] == 2
    assert seen and all(on and out == torch.bfloat16 for on, _, out in seen)  # every LoRA layer ran under autocast
    after = dict(trainer.model.named_parameters())
    assert all(torch.equal(after[n], p) for n, p in base.items())
    assert metrics["grad_norm"] > 0 and metrics["reward/std"] > 0
    assert any(not torch.equal(after[n], p) for n, p in adapters.items())
