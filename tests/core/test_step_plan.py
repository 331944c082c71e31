"""The step planner on simulated devices (grpo_core.policy.step_plan): a CPU keeps today's defaults and only
shrinks its passes to fit a budget; a GPU with room drops checkpointing and runs the micro-batch at once, and
checkpoints, then shrinks its passes, then tiles, as its free memory falls; prompts are shared on a GPU only through
a fused packing kernel; LoRA runs under autocast there; a key the user set is kept; a budget nothing fits is one
line naming the key. Every plan's estimate is the memory model's for the values it chose."""

from __future__ import annotations

import dataclasses

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from grpo_core.policy import step_plan as sp  # noqa: E402
from grpo_core.policy.memory_model import GiB, estimate_peak_memory  # noqa: E402
from grpo_rewards.errors import ConfigError  # noqa: E402

GPU_KERNELS = frozenset({"flash", "mem_efficient"})


@pytest.fixture(scope="module")
def qwen():
    """A Qwen2.5-0.5B-shaped config (the issue's reference model); nothing is allocated."""
    from transformers import Qwen2Config

    return Qwen2Config(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                       num_attention_heads=14, num_key_value_heads=2, tie_word_embeddings=True)


@pytest.fixture(scope="module")
def counts(qwen):
    return sp.count_parameters(qwen)


def gpu(free_gib: float, kernels=GPU_KERNELS) -> sp.DeviceInfo:
    return sp.DeviceInfo("cuda", "simulated", 80 * GiB, int(free_gib * GiB), frozenset(kernels))


def batch(completion: int = 4096, rows: int = 8) -> sp.BatchShape:
    return sp.BatchShape(rows=rows, step_rows=rows, prompt_length=64, completion_length=completion, group_size=8)


LORA_BF16 = sp.PlanSettings(dtype="bfloat16", lora_rank=16)


def same_estimate(plan, qwen, counts, b, s):
    """The estimate the plan carries is the memory model's for the plan's own values."""
    est = estimate_peak_memory(qwen, num_sequences=b.rows, generation_sequences=b.step_rows,
                               prompt_length=b.prompt_length, completion_length=b.completion_length, dtype=s.dtype,
                               lora_rank=s.lora_rank, gradient_checkpointing=plan.gradient_checkpointing,
                               chunk_size=plan.logprob_chunk_size, mlp_chunk_tokens=plan.mlp_chunk_tokens or None,
                               micro_batch_tokens=plan.micro_batch_tokens, counts=counts,
                               lora_autocast=plan.autocast_dtype is not None,
                               shared_prompts=plan.packing_kernel if plan.share_prompts else None,
                               group_size=b.group_size)
    return est.peak == plan.estimate.peak


def test_cpu_keeps_todays_defaults(qwen, counts):
    b = batch(1024)
    plan = sp.plan_step(sp.DeviceInfo("cpu"), qwen, b, LORA_BF16, counts)
    assert (plan.micro_batch_tokens, plan.gradient_checkpointing, plan.mlp_chunk_tokens, plan.logprob_chunk_size,
            plan.share_prompts, plan.autocast_dtype) == (4096, True, 4096, 1024, True, None)
    assert plan.budget_bytes is None
    assert same_estimate(plan, qwen, counts, b, LORA_BF16)


def test_cpu_budget_only_shrinks_the_passes(qwen, counts):
    b = batch(1024)
    free = sp.plan_step(sp.DeviceInfo("cpu"), qwen, b, LORA_BF16, counts)
    budget = (free.estimate.peak - 1) / GiB  # just under today's plan
    s = sp.PlanSettings(dtype="bfloat16", lora_rank=16, budget_gb=budget)
    plan = sp.plan_step(sp.DeviceInfo("cpu"), qwen, b, s, counts)
    assert plan.micro_batch_tokens < 4096 and plan.micro_batch_tokens % b.sequence_length == 0
    assert plan.gradient_checkpointing and plan.share_prompts and plan.mlp_chunk_tokens == 4096
    assert plan.estimate.peak <= budget * GiB
    assert "shrunk" in plan.reasons["grpo.micro_batch_tokens"]


def test_gpu_with_room_runs_the_micro_batch_at_once_without_checkpointing(qwen, counts):
    b = batch(1024)
    plan = sp.plan_step(gpu(78), qwen, b, LORA_BF16, counts)
    assert plan.micro_batch_tokens == 0 and not plan.gradient_checkpointing and plan.mlp_chunk_tokens == 0
    assert plan.logprob_chunk_size == sp.CUDA_LOGPROB_CHUNK
    assert not plan.share_prompts  # packing needs a dense mask: off the fused kernels
    assert plan.autocast_dtype == "bfloat16"  # LoRA under autocast in the base's dtype
    assert plan.estimate.peak <= plan.budget_bytes == int(78 * GiB * sp.FREE_MEMORY_SHARE)
    assert same_estimate(plan, qwen, counts, b, LORA_BF16)
    fp32 = sp.plan_step(gpu(78), qwen, b, sp.PlanSettings(dtype="float32", lora_rank=16), counts)
    assert fp32.autocast_dtype is None


def test_gpu_plans_trade_speed_for_memory_as_free_memory_falls(qwen, counts):
    b = batch(4096)
    plans = [sp.plan_step(gpu(free), qwen, b, LORA_BF16, counts) for free in (78, 20, 4, 2)]
    peaks = [p.estimate.peak for p in plans]
    assert peaks == sorted(peaks, reverse=True) and len(set(peaks)) == len(peaks)
    for free, plan in zip((78, 20, 4, 2), plans, strict=True):
        assert plan.estimate.peak <= free * GiB * sp.FREE_MEMORY_SHARE
    assert not plans[0].gradient_checkpointing and plans[0].micro_batch_tokens == 0
    assert plans[-1].gradient_checkpointing
    # each plan is the cheapest that fits: the next faster candidate would not fit
    assert sp._time(b, sp._Candidate(0, 8, False, 0), gpu(1)) < sp._time(b, sp._Candidate(0, 8, True, 0), gpu(1))


def test_gpu_shares_prompts_only_through_a_fused_packing_kernel(qwen, counts):
    b = batch(1024)
    flex = sp.plan_step(gpu(78, GPU_KERNELS | {"flex_attention"}), qwen, b, LORA_BF16, counts)
    assert flex.share_prompts and flex.packing_kernel == "flex_attention"
    assert "flex_attention" in sp.FUSED_KERNELS and "dense_mask" not in sp.FUSED_KERNELS
    assert "packing kernel" in flex.table() and "flex_attention" in flex.table()
    assert flex.to_dict()["packing_kernel"] == "flex_attention"
    assert same_estimate(flex, qwen, counts, b, LORA_BF16)
    missing = sp.plan_step(gpu(78, GPU_KERNELS | {"flash_varlen"}), qwen, b, LORA_BF16, counts)  # not a packing one
    assert not missing.share_prompts and missing.packing_kernel is None
    cpu = sp.plan_step(sp.DeviceInfo("cpu"), qwen, b, LORA_BF16, counts)
    assert cpu.share_prompts and cpu.packing_kernel == "dense_mask"
    asked = sp.PlanSettings(dtype="bfloat16", lora_rank=16, explicit={"grpo.share_prompts": True})
    assert sp.plan_step(gpu(78, GPU_KERNELS), qwen, b, asked, counts).packing_kernel == "dense_mask"
    off = sp.PlanSettings(dtype="bfloat16", lora_rank=16, explicit={"grpo.share_prompts": False})
    assert sp.plan_step(gpu(78, GPU_KERNELS | {"flex_attention"}), qwen, b, off, counts).packing_kernel is None


def test_the_estimate_prices_flex_packed_rows_and_the_plan_uses_the_room(qwen, counts):
    """Eight completions of 4,096 behind a 1,024-token prompt: flex-packed in two rows (32,768 tokens at most each), a pass holds 2 x (1,024 + 4 x 4,096) tokens'
    activations instead of 8 x 5,120, so a budget that holds those runs the micro-batch at once without recompute."""
    b = sp.BatchShape(rows=8, step_rows=8, prompt_length=1024, completion_length=4096, group_size=8)
    kw = dict(num_sequences=8, prompt_length=1024, completion_length=4096, dtype="bfloat16", lora_rank=16,
              gradient_checkpointing=False, counts=counts, lora_autocast=True)
    plain = estimate_peak_memory(qwen, **kw)
    packed = estimate_peak_memory(qwen, shared_prompts="flex_attention", group_size=8, **kw)
    dense = estimate_peak_memory(qwen, shared_prompts="dense_mask", group_size=8, **kw)
    saved = 1 - 2 * (1024 + 4 * 4096) / (8 * 5120)  # two rows of four: 32,768 tokens at most per row
    ratio = packed.component("activations") / plain.component("activations")
    assert ratio == pytest.approx(1 - saved, rel=0.01)
    assert dense.peak == plain.peak and "packed as 2 rows of 17408" in packed.table()
    # a budget that holds the whole micro-batch flex-packed without recompute: the flex plan runs that, the
    # plan without a packing kernel has to give speed away
    budget = sp.PlanSettings(dtype="bfloat16", lora_rank=16, budget_gb=estimate_peak_memory(
        qwen, shared_prompts="flex_attention", group_size=8, micro_batch_tokens=0, **kw).peak / GiB)
    flexible = sp.plan_step(gpu(78, GPU_KERNELS | {"flex_attention"}), qwen, b, budget, counts)
    unshared = sp.plan_step(gpu(78, GPU_KERNELS), qwen, b, budget, counts)
    assert flexible.share_prompts and not unshared.share_prompts
    assert (flexible.micro_batch_tokens, flexible.gradient_checkpointing) == (0, False)
    assert unshared.gradient_checkpointing or unshared.micro_batch_tokens > 0
    assert max(flexible.estimate.peak, unshared.estimate.peak) <= budget.budget_gb * GiB
    assert same_estimate(flexible, qwen, counts, b, budget)


def test_explicit_settings_win(qwen, counts):
    b = batch(1024)
    explicit = {"model.gradient_checkpointing": True, "grpo.micro_batch_tokens": 2176, "grpo.share_prompts": True,
                "grpo.logprob_chunk_size": 512, "model.mlp_chunk_tokens": 0}
    s = sp.PlanSettings(dtype="bfloat16", lora_rank=16, explicit=explicit)
    plan = sp.plan_step(gpu(78), qwen, b, s, counts)
    assert (plan.gradient_checkpointing, plan.micro_batch_tokens, plan.share_prompts, plan.logprob_chunk_size,
            plan.mlp_chunk_tokens) == (True, 2176, True, 512, 0)
    assert all(plan.reasons[key] == "set" for key in explicit)
    # one key set, the others planned around it
    only = sp.plan_step(gpu(78), qwen, b, sp.PlanSettings(dtype="bfloat16", lora_rank=16,
                                                           explicit={"model.gradient_checkpointing": True}), counts)
    assert only.gradient_checkpointing and only.micro_batch_tokens == 0 and not only.share_prompts
    cpu = sp.plan_step(sp.DeviceInfo("cpu"), qwen, b, sp.PlanSettings(explicit={"grpo.share_prompts": False}), counts)
    assert not cpu.share_prompts and cpu.micro_batch_tokens == 4096


def test_a_budget_nothing_fits_is_one_line_naming_the_key(qwen, counts):
    s = sp.PlanSettings(dtype="bfloat16", lora_rank=16, budget_gb=0.5)
    with pytest.raises(ConfigError) as info:
        sp.plan_step(gpu(78), qwen, batch(4096), s, counts)
    text = str(info.value)
    assert "\n" not in text and text.startswith("trainer.memory_budget_gb: ") and "0.50 GiB" in text
    with pytest.raises(ConfigError, match="^trainer.memory_budget_gb: .*90% of the device memory this process may hold"):
        sp.plan_step(gpu(0.5), qwen, batch(4096), LORA_BF16, counts)
    # the user's own key is what rules the fitting plans out: the error names it
    s = sp.PlanSettings(dtype="bfloat16", lora_rank=16, explicit={"model.gradient_checkpointing": False})
    with pytest.raises(ConfigError) as info:
        sp.plan_step(gpu(4), qwen, batch(4096), s, counts)
    assert str(info.value).startswith("model.gradient_checkpointing: ") and "\n" not in str(info.value)


def fake_cuda(monkeypatch, *, free_gib: float, reserved_gib: float, total_gib: float = 24, fraction: float = 1.0):
    """torch.cuda as describe_device reads it on a GPU of ``total_gib`` where this process reserved ``reserved_gib``."""
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (int(free_gib * GiB), int(total_gib * GiB)))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda device=None: int(reserved_gib * GiB))
    monkeypatch.setattr(torch.cuda, "get_per_process_memory_fraction", lambda device=None: fraction)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 9))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "simulated 24 GiB")
    monkeypatch.setattr(torch.backends.cuda, "flash_sdp_enabled", lambda: True)
    monkeypatch.setattr(torch.backends.cuda, "mem_efficient_sdp_enabled", lambda: True)


@pytest.fixture(scope="module")
def qwen7b():
    """A Qwen2.5-7B-shaped config: its bf16 weights (15 GiB) are most of a 24 GiB GPU."""
    from transformers import Qwen2Config

    return Qwen2Config(vocab_size=152064, hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
                       num_attention_heads=28, num_key_value_heads=4, tie_word_embeddings=False)


def test_the_budget_counts_the_loaded_policy_as_the_estimate_does(qwen7b, monkeypatch):
    """The trainer plans once the policy is on the GPU: the estimate counts its weights, so the budget must count the
    memory they hold (the process's reservation) beside the free memory, or a model that fills most of the GPU
    finds no plan at all."""
    counts = sp.count_parameters(qwen7b)
    weights = counts.total * 2  # bf16
    fake_cuda(monkeypatch, free_gib=24 - 0.6 - weights / GiB, reserved_gib=weights / GiB)
    device = sp.describe_device(torch.device("cuda"))
    assert device.available_bytes == int((24 - 0.6) * GiB) and device.total_bytes == 24 * GiB
    assert {"flash", "mem_efficient"} <= device.kernels
    b = sp.BatchShape(rows=8, step_rows=8, prompt_length=128, completion_length=1024, group_size=8)
    plan = sp.plan_step(device, qwen7b, b, LORA_BF16, counts)
    free = int((24 - 0.6) * GiB - weights)
    assert plan.estimate.peak > free  # the weights alone outgrow the free memory: a free-memory budget fits nothing
    assert plan.estimate.peak <= plan.budget_bytes == int(device.available_bytes * sp.FREE_MEMORY_SHARE)
    assert plan.budget_source == "90% of the device memory this process may hold"


def test_a_per_process_memory_fraction_caps_the_budget(qwen, counts, monkeypatch):
    fake_cuda(monkeypatch, free_gib=20, reserved_gib=1, fraction=0.25)
    device = sp.describe_device(torch.device("cuda"))
    assert device.available_bytes == int(0.25 * 24 * GiB)  # not the 21 GiB the allocator would refuse
    plan = sp.plan_step(device, qwen, batch(4096), LORA_BF16, counts)
    assert plan.estimate.peak <= plan.budget_bytes == int(0.25 * 24 * GiB * sp.FREE_MEMORY_SHARE)
    uncapped = sp.plan_step(sp.DeviceInfo("cuda", "s", 24 * GiB, 21 * GiB, GPU_KERNELS), qwen, batch(4096),
                            LORA_BF16, counts)
    assert uncapped.estimate.peak > plan.budget_bytes  # the cap changed the plan


def test_a_colocated_vllm_engine_keeps_its_share_through_the_update(qwen, counts):
    b = batch(4096)
    alone = sp.plan_step(gpu(50), qwen, b, LORA_BF16, counts)
    beside = sp.plan_step(gpu(50), qwen, b, dataclasses.replace(LORA_BF16, colocated_share=0.3), counts)
    assert beside.budget_bytes == alone.budget_bytes - int(0.3 * 80 * GiB)
    assert alone.estimate.peak > beside.budget_bytes >= beside.estimate.peak  # the engine's share changed the plan
    assert beside.budget_source.endswith("less the colocated vLLM engine's 30%")
    with pytest.raises(ConfigError, match="^trainer.memory_budget_gb: .*lower generation.vllm_gpu_memory_utilization"):
        sp.plan_step(gpu(20), qwen, b, dataclasses.replace(LORA_BF16, colocated_share=0.3), counts)
    # a budget the user set is the process's own: the engine is theirs to leave room for
    capped = dataclasses.replace(LORA_BF16, colocated_share=0.3, budget_gb=30)
    assert sp.plan_step(gpu(50), qwen, b, capped, counts).budget_bytes == 30 * GiB


def test_only_a_colocated_engine_awake_through_the_update_takes_a_share():
    from grpo_core.config import config_from_dict

    cfg = config_from_dict({"model": {"name_or_path": "m"}, "data": {"source": "demo:arithmetic"},
                            "rewards": {"r": {"use": "exact_match"}}})
    assert sp.colocated_engine_share(cfg) == 0.0  # the policy samples itself

    def engine(**generation):  # a vllm config as validated where vllm is installed (the vLLM lane)
        return dataclasses.replace(cfg, generation=dataclasses.replace(cfg.generation, backend="vllm", **generation))

    assert sp.colocated_engine_share(engine(vllm_gpu_memory_utilization=0.45)) == 0.45
    assert sp.colocated_engine_share(engine(vllm_sleep_level=1)) == 0.0
    assert sp.colocated_engine_share(engine(vllm_mode="server")) == 0.0
    _, settings = sp.inputs_from_config(engine(), None)
    assert settings.colocated_share == 0.3 and not settings.policy_samples
    _, settings = sp.inputs_from_config(cfg, None)
    assert settings.colocated_share == 0.0 and settings.policy_samples


def test_a_step_vllm_samples_is_not_priced_with_the_policys_kv_cache(qwen, counts):
    """With vLLM sampling, the policy never holds the step's KV cache: a big generation batch that no plan fits
    beside it (the error names the KV cache) plans when vLLM samples, with the same training-phase estimate."""
    b = sp.BatchShape(rows=16, step_rows=512, prompt_length=512, completion_length=4096, group_size=16)
    with pytest.raises(ConfigError, match="its generation's KV cache"):
        sp.plan_step(gpu(20), qwen, b, LORA_BF16, counts)
    plan = sp.plan_step(gpu(20), qwen, b, dataclasses.replace(LORA_BF16, policy_samples=False), counts)
    assert plan.estimate.generation == 0 and plan.estimate.component("KV cache") == 0
    assert plan.estimate.peak == plan.estimate.resident + plan.estimate.training <= plan.budget_bytes


def test_run_config_tells_a_set_key_from_a_default(tmp_path):
    from grpo_core.config import config_from_dict, load_config

    sections = {"model": {"name_or_path": "m", "gradient_checkpointing": True},
                "data": {"source": "demo:arithmetic"}, "grpo": {"micro_batch_tokens": 4096},
                "trainer": {"memory_budget_gb": 12}, "rewards": {"r": {"use": "exact_match"}}}
    cfg = config_from_dict(sections)
    assert sp.explicit_settings(cfg) == {"grpo.micro_batch_tokens": 4096, "model.gradient_checkpointing": True}
    assert cfg.trainer.memory_budget_gb == 12.0
    path = tmp_path / "run.toml"
    path.write_text('[model]\nname_or_path = "m"\n[data]\nsource = "demo:arithmetic"\n'
                    '[rewards.r]\nuse = "exact_match"\n')
    cfg = load_config(str(path), ["grpo.share_prompts=false"])
    assert sp.explicit_settings(cfg) == {"grpo.share_prompts": False}
    with pytest.raises(ConfigError, match="trainer.memory_budget_gb"):
        config_from_dict({**sections, "trainer": {"memory_budget_gb": 0}})


def _run_file(tmp_path, model_dir, extra: str = "") -> str:
    path = tmp_path / "run.toml"
    path.write_text(f'[model]\nname_or_path = "{model_dir}"\ndtype = "float32"\n'
                    '[data]\nsource = "demo:arithmetic?max_operand=9"\nanswer_field = "answer"\nchat_template = false\n'
                    f'[logging]\noutput_dir = "{tmp_path / "run"}"\n[rewards.r]\nuse = "exact_match"\n{extra}')
    return str(path)


def test_config_validate_prints_the_plan_and_refuses_a_budget_nothing_fits(tiny_model_dir, tmp_path, capsys):
    from grpo_rewards.command_line import main

    path = _run_file(tmp_path, tiny_model_dir)
    assert main(["config", "validate", path]) == 0
    out = capsys.readouterr().out
    assert "\nstep plan on cpu" in out and "grpo.micro_batch_tokens       4096" in out
    assert main(["config", "validate", path, "--set", "trainer.memory_budget_gb=0.0001"]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and f"{path}: trainer.memory_budget_gb: the smallest step" in err[0]
    assert main(["train", path, "--dry-run", "--set", "trainer.memory_budget_gb=0.0001"]) == 2
    assert "trainer.memory_budget_gb: the smallest step" in capsys.readouterr().err
