"""The ``[distributed]`` section: defaults, what engine = "deepspeed" cannot train refused with one line (exit 2)
before anything loads, what ``engine = "fsdp2"`` cannot shard."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from grpo_core.config import config_from_dict
from grpo_rewards.tomlfile import ConfigError

BASE = {"model": {"name_or_path": "m"}, "data": {"source": "hub/name"}, "rewards": {"len": {"use": "core_len"}}}


def problems(info: pytest.ExceptionInfo) -> list[str]:
    return [str(p) for p in info.value.problems]


def test_defaults_are_ddp_and_an_automatic_backend(core_registry: Any) -> None:
    cfg = config_from_dict(BASE, registry=core_registry)
    assert (cfg.distributed.engine, cfg.distributed.backend) == ("ddp", "auto")
    assert cfg.to_dict()["distributed"] == {"engine": "ddp", "backend": "auto", "zero_stage": 2,
                                            "offload_optimizer": "none", "deepspeed_config": ""}


WHY_NOT_4BIT = "quantization.load_in_4bit: 4-bit weights do not go through DeepSpeed's engine; use engine = \"ddp\" " \
               "or 16-bit weights"


def test_deepspeed_with_4bit_weights_is_refused_before_anything_loads(core_registry: Any, tmp_path: Path) -> None:
    from grpo_core.trainer import Trainer

    cfg = config_from_dict({**BASE, "distributed": {"engine": "deepspeed"}, "lora": {"enabled": True},
                            "quantization": {"load_in_4bit": True},
                            "logging": {"output_dir": str(tmp_path / "run")}}, registry=core_registry)
    with pytest.raises(ConfigError) as info:
        Trainer(cfg, registry=core_registry)  # the model "m" does not exist: nothing was loaded
    assert problems(info) == [f"<dict>: {WHY_NOT_4BIT}"]
    assert not (tmp_path / "run").exists()


def test_unknown_engine_and_backend_are_named(core_registry: Any) -> None:
    with pytest.raises(ConfigError) as info:
        config_from_dict({**BASE, "distributed": {"engine": "dp", "backend": "mpi"}}, registry=core_registry)
    found = problems(info)
    assert len(found) == 2
    assert found[0].startswith("<dict>: distributed.engine: must be one of ddp, fsdp2, deepspeed, got 'dp'")
    assert found[1].startswith("<dict>: distributed.backend: must be one of auto, gloo, nccl, got 'mpi'")


def test_fsdp2_is_accepted_and_refuses_4bit_weights_with_several_processes(core_registry: Any) -> None:
    from grpo_core.parallel.distributed import world_problems

    cfg = config_from_dict({**BASE, "distributed": {"engine": "fsdp2"}}, registry=core_registry)
    assert cfg.distributed.engine == "fsdp2" and world_problems(cfg, 2) == []
    qlora = config_from_dict({**BASE, "distributed": {"engine": "fsdp2"}, "lora": {"enabled": True},
                              "quantization": {"load_in_4bit": True}}, registry=core_registry)
    assert world_problems(qlora, 1) == []
    assert world_problems(qlora, 2) == [("quantization.load_in_4bit", "4-bit weights cannot be sharded by engine = "
                                                                      "\"fsdp2\"; use engine = \"ddp\" or 16-bit weights")]


def test_the_command_line_validates_deepspeed_and_refuses_4bit_weights_with_it(tmp_path: Path) -> None:
    data = tmp_path / "rows.jsonl"
    data.write_text('{"prompt": "1+1", "answer": "2"}\n')
    run = tmp_path / "run.toml"
    run.write_text(f"""[model]
name_or_path = "some/model"
[data]
source = "{data}"
[distributed]
engine = "deepspeed"
[lora]
enabled = true
[quantization]
load_in_4bit = true
[rewards.exact]
use = "exact_match"
""")
    for command in (["config", "validate"], ["train"]):  # one set of checks: validate refuses what train refuses
        proc = subprocess.run([sys.executable, "-m", "grpo_rewards", *command, str(run)],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.strip().splitlines() == [f"{run}: {WHY_NOT_4BIT}"]


def test_fsdp2_refuses_float16_training_in_one_line(core_registry: Any) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from grpo_core.parallel.fsdp import check_precision

    cfg = config_from_dict({**BASE, "distributed": {"engine": "fsdp2"}}, registry=core_registry)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=16, hidden_size=8, intermediate_size=16, num_hidden_layers=1,
                                         num_attention_heads=2, num_key_value_heads=1))
    check_precision(model, cfg)  # float32: accepted
    with pytest.raises(ConfigError) as info:
        check_precision(model.to(torch.float16), cfg)
    assert problems(info) == ["<dict>: model.dtype: float16 training needs loss scaling, which engine = \"fsdp2\" "
                              "does not shard; use bfloat16 or float32, or engine = \"ddp\""]
