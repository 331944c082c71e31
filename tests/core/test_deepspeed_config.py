"""``[distributed] engine = "deepspeed"``: the keys' validation, the mapping onto DeepSpeed's config (checked by
DeepSpeed's own parser when the package is installed), the seed-recipe example, what is refused before training
(DeepSpeed missing, 4-bit weights, float16 gradients, ZeRO-3, keys the trainer owns)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from grpo_core.config import config_from_dict, load_config
from grpo_core.parallel.deepspeed import check_precision, check_trainable, deepspeed_config
from grpo_rewards.tomlfile import ConfigError

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "deepspeed_zero2.toml"
BASE = {"model": {"name_or_path": "m", "dtype": "bfloat16"}, "data": {"source": "hub/name"},
        "rewards": {"len": {"use": "core_len"}},
        "generation": {"num_generations": 4},
        "grpo": {"prompts_per_step": 4, "gradient_accumulation_steps": 2, "max_grad_norm": 0.5},
        "distributed": {"engine": "deepspeed", "zero_stage": 2, "offload_optimizer": "cpu"}}


def problems(info: pytest.ExceptionInfo) -> list[str]:
    return [str(p) for p in info.value.problems]


def with_(section: str, **keys: Any) -> dict[str, Any]:
    return {**BASE, section: {**BASE.get(section, {}), **keys}}


def test_the_mapping_of_a_two_process_run(core_registry: Any) -> None:
    ds = deepspeed_config(config_from_dict(BASE, registry=core_registry), world_size=2)
    # 4 prompts over 2 processes x 4 generations = 8 sequences per process, in 2 micro-batches of 4
    assert (ds["train_micro_batch_size_per_gpu"], ds["gradient_accumulation_steps"], ds["train_batch_size"]) == (4, 2, 16)
    # precision is the trainer's (bf16 autocast, fp32 master weights): DeepSpeed's own sections stay off
    assert ds["gradient_clipping"] == 0.5 and ds["bf16"] == {"enabled": False} and ds["fp16"] == {"enabled": False}
    assert ds["zero_optimization"] == {"stage": 2, "offload_optimizer": {"device": "cpu", "pin_memory": True}}


def test_the_example_is_the_seed_recipe(core_registry: Any) -> None:
    cfg = load_config(EXAMPLE)
    assert (cfg.lora.enabled, cfg.lora.r, cfg.lora.target_modules) == (True, 16, ["q_proj", "k_proj", "v_proj", "o_proj"])
    ds = deepspeed_config(cfg)
    assert (ds["train_micro_batch_size_per_gpu"], ds["gradient_accumulation_steps"], ds["gradient_clipping"]) == (1, 8, 1.0)
    assert cfg.model.dtype == "bfloat16" and ds["zero_optimization"]["stage"] == 2
    assert ds["zero_optimization"]["offload_optimizer"]["device"] == "cpu"


def test_deepspeed_parses_the_mapping(core_registry: Any) -> None:
    pytest.importorskip("deepspeed", reason="deepspeed is not installed (pip install deepspeed)")
    from deepspeed.runtime.config import DeepSpeedConfig
    from deepspeed.runtime.zero.offload_config import OffloadDeviceEnum

    parsed = DeepSpeedConfig(deepspeed_config(load_config(EXAMPLE)))  # DeepSpeed's own reading (one process)
    assert (parsed.train_micro_batch_size_per_gpu, parsed.gradient_accumulation_steps) == (1, 8)
    assert (parsed.train_batch_size, parsed.gradient_clipping, parsed.bfloat16_config.enabled) == (8, 1.0, False)
    assert parsed.zero_optimization_stage == 2
    assert parsed.zero_config.offload_optimizer.device == OffloadDeviceEnum.cpu
    assert parsed.optimizer_name == "adamw" and parsed.optimizer_params["lr"] == 5e-6


def test_a_users_json_is_laid_over_and_may_not_contradict(core_registry: Any, tmp_path: Path) -> None:
    own = tmp_path / "ds.json"
    own.write_text(json.dumps({"zero_optimization": {"overlap_comm": True}, "gradient_clipping": "auto",
                               "steps_per_print": 50}))
    ds = deepspeed_config(config_from_dict(with_("distributed", deepspeed_config=str(own)), registry=core_registry))
    assert ds["zero_optimization"] == {"stage": 2, "offload_optimizer": {"device": "cpu", "pin_memory": True},
                                       "overlap_comm": True}
    assert (ds["steps_per_print"], ds["gradient_clipping"]) == (50, 0.5)
    own.write_text(json.dumps({"gradient_accumulation_steps": 4}))
    with pytest.raises(ConfigError) as info:
        deepspeed_config(config_from_dict(with_("distributed", deepspeed_config=str(own)), registry=core_registry))
    assert problems(info) == ["<dict>: distributed.deepspeed_config: gradient_accumulation_steps = 4 contradicts 2 "
                              "from grpo.gradient_accumulation_steps; leave it out or set \"auto\""]
    own.write_text("[1]")
    with pytest.raises(ConfigError, match="must hold a JSON object"):
        deepspeed_config(config_from_dict(with_("distributed", deepspeed_config=str(own)), registry=core_registry))


def test_what_cannot_map_is_named(core_registry: Any) -> None:
    with pytest.raises(ConfigError) as info:
        deepspeed_config(config_from_dict(BASE, registry=core_registry), world_size=3)
    assert problems(info) == ["<dict>: grpo.prompts_per_step: must be a multiple of the number of processes (3), got 4"]
    with pytest.raises(ConfigError) as info:
        deepspeed_config(config_from_dict(with_("distributed", zero_stage=0), registry=core_registry))
    assert "distributed.offload_optimizer: needs zero_stage 1 or 2" in problems(info)[0]


def test_the_keys_are_validated(core_registry: Any) -> None:
    with pytest.raises(ConfigError) as info:
        config_from_dict(with_("distributed", zero_stage=4, offload_optimizer="nvme"), registry=core_registry)
    found = problems(info)
    assert any("distributed.zero_stage" in p for p in found), found
    assert any("distributed.offload_optimizer: must be one of none, cpu, got 'nvme'" in p for p in found), found
    with pytest.raises(ConfigError) as info:
        config_from_dict({**BASE, "distributed": {"engine": "ddp", "offload_optimizer": "cpu"}}, registry=core_registry)
    assert problems(info) == ['<dict>: distributed.offload_optimizer: only meaningful with engine = "deepspeed", '
                              "not 'ddp'"]


def test_what_cannot_train_is_refused_with_the_reason(core_registry: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    qlora = {**BASE, "lora": {"enabled": True}, "quantization": {"load_in_4bit": True}}
    with pytest.raises(ConfigError) as info:
        check_trainable(config_from_dict(qlora, registry=core_registry))
    assert problems(info) == ["<dict>: quantization.load_in_4bit: 4-bit weights do not go through DeepSpeed's engine; "
                              "use engine = \"ddp\" or 16-bit weights"]
    check_trainable(config_from_dict({**qlora, "distributed": {"engine": "ddp"}}, registry=core_registry))
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "deepspeed" else find_spec(name, *a))
    with pytest.raises(ConfigError) as info:
        check_trainable(config_from_dict(BASE, registry=core_registry))
    assert problems(info) == ["<dict>: distributed.engine: \"deepspeed\" needs the deepspeed package: pip install "
                              "'.[deepspeed]' (DeepSpeed builds from source: DS_BUILD_OPS=0 pip install "
                              "--no-build-isolation)"]


def test_keys_the_trainer_owns_and_zero3_are_refused(core_registry: Any, tmp_path: Path) -> None:
    own = tmp_path / "ds.json"
    cfg = config_from_dict(with_("distributed", deepspeed_config=str(own)), registry=core_registry)
    for user, why in [({"bf16": {"enabled": True}}, "bf16 = {'enabled': True} contradicts {'enabled': False} from "
                                                    "model.dtype (the trainer's own mixed precision)"),
                      ({"scheduler": {"type": "WarmupLR"}}, "scheduler = {'type': 'WarmupLR'} contradicts the "
                                                            "trainer's own (grpo.lr_scheduler)"),
                      ({"zero_optimization": {"stage": 3}}, "zero_optimization.stage 3 shards the weights, which "
                                                            "generation needs whole on every rank"),
                      ({"zero_optimization": 2}, "zero_optimization must be a JSON object, got 2")]:
        own.write_text(json.dumps(user))
        with pytest.raises(ConfigError) as info:
            deepspeed_config(cfg)
        (found,) = problems(info)
        assert found.startswith(f"<dict>: distributed.deepspeed_config: {why}"), found
    with pytest.raises(ConfigError) as info:
        config_from_dict(with_("distributed", zero_stage=3), registry=core_registry)
    assert any(p.startswith("<dict>: distributed.zero_stage: ") for p in problems(info))


def test_float16_gradients_are_refused_in_one_line(core_registry: Any) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = config_from_dict(BASE, registry=core_registry)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=16, hidden_size=8, intermediate_size=16, num_hidden_layers=1,
                                         num_attention_heads=2, num_key_value_heads=1))
    check_precision(model, cfg)  # float32: accepted
    with pytest.raises(ConfigError) as info:
        check_precision(model.to(torch.float16), cfg)
    assert problems(info) == ["<dict>: model.dtype: float16 training needs loss scaling, which the trainer does not "
                              "run inside engine = \"deepspeed\"; use bfloat16 or float32"]


def test_the_trl_backend_does_not_take_the_engine(core_registry: Any) -> None:
    assert "trl" in core_registry.trainer_backends
    with pytest.raises(ConfigError) as info:
        config_from_dict({**BASE, "trainer": {"backend": "trl"}}, registry=core_registry)
    assert "<dict>: distributed.engine: \"deepspeed\" runs the grpo_core trainer's update, not the 'trl' backend's; " \
           "leave it out with that backend" in problems(info)
