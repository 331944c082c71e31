"""The benchmarks against TRL hand our trainer only the planned keys a flag pins: ``grpo_bench_sides.py``'s run
config for ``--checkpointing plan`` leaves checkpointing, micro-batch tokens and the head chunk to the step
planner (the trainer's ``explicit_settings`` sees none of them), ``on``/``off`` pin checkpointing, and the
commands ``benchmarks/vs_trl.py`` and ``benchmarks/gpu_vs_trl.py`` build carry the flags each documents. No
training: the run config is built and validated, the commands are built."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import gpu_vs_trl  # noqa: E402
import grpo_bench_sides  # noqa: E402
import vs_trl  # noqa: E402

from grpo_core.config import config_from_dict  # noqa: E402
from grpo_core.policy.step_plan import explicit_settings  # noqa: E402
from grpo_rewards import compose, hookimpl  # noqa: E402
from grpo_rewards.plugins import load_registry  # noqa: E402

PLANNED_BY_FLAGS = {"model.gradient_checkpointing", "grpo.micro_batch_tokens", "grpo.logprob_chunk_size"}


def side(tmp_path: Path, *flags: str) -> argparse.Namespace:
    return grpo_bench_sides.parse_args(["ours", "--model-dir", str(tmp_path), "--prompts", str(tmp_path / "p.jsonl"),
                                        "--out-dir", str(tmp_path / "out"), "--length", "16", *flags])


def pinned_keys(tmp_path: Path, a: argparse.Namespace) -> dict[str, object]:
    """The planned keys the trainer will treat as set by the user, from the run config as validated."""

    class FixedBackend:
        @hookimpl
        def grpo_register_generation_backends(self, register: object) -> None:
            register("vs_trl_fixed", object)  # type: ignore[operator]

    from transformers import Qwen2Config

    Qwen2Config(vocab_size=64, hidden_size=8, intermediate_size=16, num_hidden_layers=1, num_attention_heads=2,
                num_key_value_heads=1).save_pretrained(tmp_path)  # the config only: the run config is not trained
    (tmp_path / "p.jsonl").write_text('{"prompt": "hi"}\n')
    registry = load_registry(extra_plugins=[("vs_trl_bench", FixedBackend())])
    raw = {**grpo_bench_sides.our_run_config(a), "rewards": compose({"distinct": grpo_bench_sides.reward_distinct})}
    return explicit_settings(config_from_dict(raw, registry=registry))


def test_plan_leaves_every_planned_key_to_the_planner(tmp_path: Path) -> None:
    a = side(tmp_path, "--checkpointing", "plan")
    cfg = grpo_bench_sides.our_run_config(a)
    assert "gradient_checkpointing" not in cfg["model"]
    assert not {"micro_batch_tokens", "logprob_chunk_size"} & set(cfg["grpo"])
    assert pinned_keys(tmp_path, a).keys() & PLANNED_BY_FLAGS == set()


@pytest.mark.parametrize("value", ["on", "off"])
def test_on_and_off_pin_checkpointing_and_flags_pin_their_keys(tmp_path: Path, value: str) -> None:
    a = side(tmp_path, "--checkpointing", value)
    assert pinned_keys(tmp_path, a) == {"model.gradient_checkpointing": value == "on"}
    a = side(tmp_path, "--checkpointing", value, "--micro-batch-tokens", "0", "--chunk-size", "2048")
    assert pinned_keys(tmp_path, a) == {"model.gradient_checkpointing": value == "on",
                                        "grpo.micro_batch_tokens": 0, "grpo.logprob_chunk_size": 2048}


def test_a_memory_budget_bounds_the_plan_without_pinning_a_planned_key(tmp_path: Path) -> None:
    a = side(tmp_path, "--checkpointing", "plan", "--memory-budget-gb", "2.5")
    assert grpo_bench_sides.our_run_config(a)["trainer"] == {"memory_budget_gb": 2.5}
    assert pinned_keys(tmp_path, a) == {}


def test_the_default_is_checkpointing_on() -> None:
    assert grpo_bench_sides.parse_args(["trl", "--model-dir", "m", "--prompts", "p", "--out-dir", "o",
                                        "--length", "8"]).checkpointing == "on"


def runner_args(**over: object) -> argparse.Namespace:
    base = {"generations": 8, "steps": 3, "lora_rank": 16, "dtype": "float32", "memory_limit_gb": 0.0,
            "chunk_size": None, "micro_batch_tokens": None, "device": "cuda"}
    return argparse.Namespace(**{**base, **over})


def flag_values(cmd: list[str], flag: str) -> list[str]:
    return [cmd[i + 1] for i, word in enumerate(cmd) if word == flag]


def test_the_gpu_benchmark_hands_ours_no_planned_key_unless_pinned(tmp_path: Path) -> None:
    for ckpt in gpu_vs_trl.CHECKPOINTING:
        b = gpu_vs_trl.side_args(runner_args(), "lora", ckpt)
        cmd = vs_trl.side_command("ours", 1024, b, tmp_path, "3,600", tmp_path / "out")
        assert flag_values(cmd, "--micro-batch-tokens") == [] and flag_values(cmd, "--chunk-size") == []
        assert flag_values(cmd, "--checkpointing") == [ckpt]
    b = gpu_vs_trl.side_args(runner_args(micro_batch_tokens=40000, chunk_size=4096), "full", "plan", 0.25)
    cmd = vs_trl.side_command("ours", 4096, b, tmp_path, "3,600", tmp_path / "out")
    assert flag_values(cmd, "--micro-batch-tokens") == ["40000"] and flag_values(cmd, "--chunk-size") == ["4096"]
    assert flag_values(cmd, "--memory-fraction") == ["0.25"] and flag_values(cmd, "--dtype") == ["auto"]


def test_the_cpu_reference_benchmark_pins_its_documented_configuration(tmp_path: Path) -> None:
    """README: ours with micro_batch_tokens 4096 (the config's default), 1024-token head tiles, checkpointing."""
    for argv, pins in (([], (4096, 1024)), (["--micro-batch-tokens", "48", "--chunk-size", "64"], (48, 64))):
        a = vs_trl.parse_args(argv)
        cmd = vs_trl.side_command("ours", 512, a, tmp_path, "3,600", tmp_path / "out")
        parsed = grpo_bench_sides.parse_args(cmd[2:])
        assert (parsed.micro_batch_tokens, parsed.chunk_size, parsed.checkpointing) == (*pins, "on")
        raw = grpo_bench_sides.our_run_config(parsed)
        assert raw["model"]["gradient_checkpointing"] is True
        assert (raw["grpo"]["micro_batch_tokens"], raw["grpo"]["logprob_chunk_size"]) == pins


def test_plan_fields_name_what_the_planner_chose_and_what_was_pinned() -> None:
    plan = {"micro_batch_tokens": 0, "gradient_checkpointing": False, "mlp_chunk_tokens": 0,
            "logprob_chunk_size": 4096, "packing_kernel": "flex", "autocast_dtype": "bfloat16",
            "estimated_peak_gb": 3.21, "reasons": {"grpo.micro_batch_tokens": "8 of 8 rows per pass",
                                                   "model.gradient_checkpointing": "set",
                                                   "grpo.share_prompts": "set (a dense mask here)"}}
    assert gpu_vs_trl.plan_fields(plan) == (
        "micro_batch_tokens=0 gradient_checkpointing=false mlp_chunk_tokens=0 logprob_chunk_size=4096 "
        "packing_kernel=flex autocast=bfloat16 estimated_peak_gib=3.2100 "
        "set=grpo.share_prompts,model.gradient_checkpointing")
    assert gpu_vs_trl.plan_fields(None) == "plan=unavailable"
