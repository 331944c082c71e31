"""grpo_core.config: the run file, --set overrides, every problem at once with file:line and did-you-mean."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest

from grpo_core.config import RunConfig, config_from_dict, load_config, parse_override
from grpo_rewards import ConfigError, compose

GOOD = """\
[model]
name_or_path = "some/model"
dtype = "bfloat16"

[data]
source = "rows.jsonl"
prompt_field = "question"
answer_field = "answer"
system_prompt = "Think, then answer."

[generation]
num_generations = 4
max_completion_length = 64

[grpo]
learning_rate = 1
prompts_per_step = 2
gradient_accumulation_steps = 4
max_steps = 10

[lora]
enabled = true
target_modules = ["q_proj", "v_proj"]

[rewards.short]
use = "core_len"
weight = 0.5

[rewards.right]
use = "core_match"
"""


def write(tmp_path: Path, text: str, name: str = "run.toml") -> Path:
    (tmp_path / "rows.jsonl").write_text('{"question": "q", "answer": "a"}\n')
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def problems(exc: pytest.ExceptionInfo[ConfigError]) -> list[str]:
    return str(exc.value).splitlines()


def test_good_file_loads_with_defaults_and_resolution(tmp_path: Path, core_registry: Any, monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path.parent)  # rows.jsonl is not in the cwd: found next to the config
    cfg = load_config(write(tmp_path, GOOD), registry=core_registry)
    assert isinstance(cfg, RunConfig)
    assert cfg.model.name_or_path == "some/model" and cfg.model.gradient_checkpointing is True
    assert cfg.data.source == str(tmp_path / "rows.jsonl")  # resolved next to the config file
    assert cfg.grpo.learning_rate == 1.0 and isinstance(cfg.grpo.learning_rate, float)
    assert cfg.grpo.epsilon_high == cfg.grpo.epsilon == 0.2 and cfg.grpo.loss_type == "dapo"
    assert cfg.lora.target_modules == ["q_proj", "v_proj"]
    assert cfg.sequences_per_step == 8 and cfg.logging.output_dir == "runs/run"
    assert cfg.rewards.aliases == ["short", "right"] and cfg.rewards.weights == [0.5, 1.0]
    assert cfg.rewards(["bcde", "xa"], answer=["a", "a"]) == [pytest.approx(-0.02), pytest.approx(0.99)]
    d = cfg.to_dict()
    assert d["grpo"]["max_steps"] == 10 and d["rewards"]["short"] == {"use": "core_len", "weight": 0.5}


def test_every_problem_at_once_with_lines_and_suggestions(tmp_path: Path, core_registry: Any) -> None:
    path = write(tmp_path, GOOD.replace('dtype = "bfloat16"', 'dtyp = "bfloat16"')
                 .replace("max_steps = 10", "max_steps = \"ten\"\nloss_type = \"dapoo\"\nscale_rewards = \"groups\"")
                 .replace("[lora]", "[lroa]")
                 .replace('use = "core_match"', 'use = "core_mtch"'))
    with pytest.raises(ConfigError) as info:
        load_config(path, registry=core_registry)
    got = problems(info)
    p = str(path)
    assert f"{p}:3: model.dtyp: unknown key; did you mean 'dtype'?" in got
    assert f"{p}:19: grpo.max_steps: expected int, got str 'ten'" in got
    assert f"{p}:20: grpo.loss_type: must be one of grpo, bnpo, dr_grpo, dapo, cispo, sapo, luspo, vespo, got 'dapoo'; did you mean 'dapo'?" in got
    assert f"{p}:21: grpo.scale_rewards: must be one of group, batch, none, got 'groups'; did you mean 'group'?" in got
    assert f"{p}:23: lroa: unknown section; did you mean 'lora'?" in got
    assert f"{p}:32: rewards.right.use: unknown reward 'core_mtch'; did you mean 'core_match'?" in got
    assert len(got) == 6, got


@pytest.mark.parametrize("change, expected", [
    (("num_generations = 4", "num_generations = 1"), "generation.num_generations: must be >= 2"),
    (("gradient_accumulation_steps = 4", "gradient_accumulation_steps = 3"),
     "grpo.gradient_accumulation_steps: must divide prompts_per_step * num_generations = 8"),
    (("[lora]\nenabled = true", "[quantization]\nload_in_4bit = true\n[lora]\nenabled = false"),
     "quantization.load_in_4bit: 4-bit weights cannot be trained directly"),
    (('source = "rows.jsonl"', 'source = "missing.jsonl"'), "data.source: file not found: missing.jsonl"),
    (('source = "rows.jsonl"', 'source = "nosuch:abc"'), "data.source: unknown dataset source 'nosuch'"),
    (("learning_rate = 1", "learning_rate = -1e-5"), "grpo.learning_rate: must be > 0 and <= 1, got -1e-05"),
    (("learning_rate = 1", "learning_rate = true"), "grpo.learning_rate: expected float, got a boolean"),
    (("learning_rate = 1", "learning_rate = 1\ndelta = 0.5"), "grpo.delta: must be > 1"),
    (('dtype = "bfloat16"', 'dtype = "bf16"'), "model.dtype: must be one of auto, float32, bfloat16, float16, got 'bf16'"),
    (('[generation]', '[generation]\nbackend = "vllmm"'), "generation.backend: unknown generation backend 'vllmm'"),
    (('name_or_path = "some/model"', ''), "model: missing required key 'name_or_path'"),
    (('name_or_path = "some/model"', 'name_or_path = "./no/such/folder"'), "model.name_or_path: folder not found"),
    (("target_modules = [\"q_proj\", \"v_proj\"]", "target_modules = [1, 2]"),
     "lora.target_modules: expected str or a list of strings, got list [1, 2]"),
    (('[rewards.short]\nuse = "core_len"\nweight = 0.5', '[rewards.short]\nuse = "core_len"\nweight = "x"'),
     "rewards.short.weight: must be a number, got 'x'"),
])
def test_single_problems(tmp_path: Path, core_registry: Any, change: tuple[str, str], expected: str) -> None:
    old, new = change
    assert old in GOOD
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, GOOD.replace(old, new)), registry=core_registry)
    assert any(expected in line for line in problems(info)), problems(info)
    assert all(line.startswith(str(tmp_path / "run.toml")) for line in problems(info))


def test_no_rewards_and_bad_toml(tmp_path: Path, core_registry: Any) -> None:
    with pytest.raises(ConfigError, match="no rewards configured"):
        load_config(write(tmp_path, GOOD.split("[rewards.short]")[0]), registry=core_registry)
    with pytest.raises(ConfigError, match=r"run.toml:2: invalid TOML"):
        load_config(write(tmp_path, "[model]\nname_or_path = \n"), registry=core_registry)
    with pytest.raises(ConfigError, match="absent.toml: file not found"):
        load_config(tmp_path / "absent.toml", registry=core_registry)


def test_overrides_apply_and_errors_name_the_override(tmp_path: Path, core_registry: Any) -> None:
    path = write(tmp_path, GOOD)
    cfg = load_config(path, ["grpo.learning_rate=1e-5", "generation.temperature=0.7", "data.system_prompt=Be brief",
                             "lora.enabled=false", "rewards.short.weight=2", "logging.output_dir=out/x",
                             "lora.target_modules=[\"o_proj\"]"], registry=core_registry)
    assert cfg.grpo.learning_rate == 1e-5 and cfg.generation.temperature == 0.7
    assert cfg.data.system_prompt == "Be brief" and cfg.lora.enabled is False
    assert cfg.rewards.weights == [2.0, 1.0] and cfg.logging.output_dir == "out/x"
    assert cfg.lora.target_modules == ["o_proj"]
    with pytest.raises(ConfigError) as info:
        load_config(path, ["grpo.max_steps=many", "grpo.lr=1", "nonsense", "model.name_or_path.x=1",
                           "rewards.right.use=core_lenn", "generation.top_p=2"], registry=core_registry)
    got = problems(info)
    assert "--set grpo.max_steps=many: grpo.max_steps: expected int, got str 'many'" in got
    assert "--set grpo.lr=1: grpo.lr: unknown key" in got
    assert "--set nonsense: expected section.key=value" in got
    assert "--set model.name_or_path.x=1: model.name_or_path: is not a table" in got
    assert "--set rewards.right.use=core_lenn: rewards.right.use: unknown reward 'core_lenn'; did you mean 'core_len'?" in got
    assert "--set generation.top_p=2: generation.top_p: must be in (0, 1], got 2.0" in got
    assert len(got) == 6, got


def test_parse_override_values() -> None:
    assert parse_override("a.b=3") == (("a", "b"), 3)
    assert parse_override("a.b = true") == (("a", "b"), True)
    assert parse_override("a.b=\"x y\"") == (("a", "b"), "x y")
    assert parse_override("a.b=Qwen/Qwen2.5-1.5B") == (("a", "b"), "Qwen/Qwen2.5-1.5B")
    assert parse_override("a.b.c=[1, 2]") == (("a", "b", "c"), [1, 2])
    assert parse_override("a.b=") == (("a", "b"), "")
    with pytest.raises(ValueError):
        parse_override("ab=1")


def test_python_api_dict_and_ready_reward(core_registry: Any) -> None:
    data = {"model": {"name_or_path": "m"}, "data": {"source": "hub/name"},
            "grpo": {"max_steps": 3}, "rewards": {"len": {"use": "core_len", "scale": 1.0}}}
    cfg = config_from_dict({**data, "logging": {"output_dir": Path("out") / "x"}}, registry=core_registry)
    assert cfg.logging.output_dir == "out/x"  # Path objects are accepted for paths
    cfg = config_from_dict(data, registry=core_registry)
    assert cfg.path == "<dict>" and cfg.grpo.max_steps == 3 and cfg.logging.output_dir == "runs/run"
    assert cfg.rewards(["ab"]) == [-2.0]
    assert data["rewards"]["len"] == {"use": "core_len", "scale": 1.0}  # the caller's dict is not modified

    composed = compose({"one": lambda completions, **_: [1.0] * len(completions)})
    cfg = config_from_dict({**data, "rewards": composed}, registry=core_registry)
    assert cfg.rewards is composed
    with pytest.raises(ConfigError) as info:
        config_from_dict({"model": {}, "data": {"source": "x"}, "grpo": {"beta": -1}, "rewards": composed},
                         registry=core_registry)
    assert problems(info) == ["<dict>: model: missing required key 'name_or_path'", "<dict>: grpo.beta: must be >= 0, got -1.0"]


def test_problems_are_sorted_by_line_then_overrides(tmp_path: Path, core_registry: Any) -> None:
    path = write(tmp_path, GOOD.replace("max_steps = 10", "max_steps = 0").replace('dtype = "bfloat16"', 'dtype = 1'))
    with pytest.raises(ConfigError) as info:
        load_config(path, ["grpo.beta=-1"], registry=core_registry)
    assert [line.split(": ")[0].rsplit(":", 1)[-1] for line in problems(info)] == ["3", "19", "--set grpo.beta=-1"]


def test_as_run_config_accepts_path_dict_or_config(tmp_path: Path, use_core_registry: Any) -> None:
    from grpo_core.config import as_run_config

    cfg = as_run_config(write(tmp_path, GOOD), ["grpo.max_steps=3"])
    assert cfg.grpo.max_steps == 3 and as_run_config(cfg) is cfg
    assert as_run_config({"model": {"name_or_path": "m"}, "data": {"source": "h/x"},
                          "rewards": {"a": {"use": "core_len"}}}).model.name_or_path == "m"
    with pytest.raises(ValueError, match="overrides apply to a path or a dict"):
        as_run_config(cfg, ["grpo.max_steps=4"])


def test_every_key_is_documented() -> None:
    import dataclasses

    from grpo_core.config import SECTIONS

    doc = (Path(__file__).resolve().parents[2] / "docs" / "run-config.md").read_text()
    missing = [f"{name}.{f.name}" for name, cls in SECTIONS.items() for f in dataclasses.fields(cls)
               if f"`{f.name}`" not in doc or f"`[{name}]`" not in doc]
    assert not missing, f"document these in docs/run-config.md: {missing}"


def test_memory_keys_are_checked(core_registry: Any) -> None:
    base = {"data": {"source": "hub/name"}, "rewards": {"len": {"use": "core_len"}}}
    cfg = config_from_dict({**base, "model": {"name_or_path": "m"}}, registry=core_registry)
    assert cfg.grpo.micro_batch_tokens == 4096 and cfg.model.mlp_chunk_tokens is None  # None: the hidden size
    cfg = config_from_dict({**base, "model": {"name_or_path": "m", "mlp_chunk_tokens": 0},
                            "grpo": {"micro_batch_tokens": 0}}, registry=core_registry)
    assert cfg.grpo.micro_batch_tokens == 0 and cfg.model.mlp_chunk_tokens == 0  # 0: off
    with pytest.raises(ConfigError) as info:
        config_from_dict({**base, "model": {"name_or_path": "m", "mlp_chunk_tokens": -2},
                          "grpo": {"micro_batch_tokens": -1}}, registry=core_registry)
    assert problems(info) == ["<dict>: model.mlp_chunk_tokens: must be >= 0 and <= 1000000000, got -2",
                              "<dict>: grpo.micro_batch_tokens: must be >= 0 and <= 1000000000, got -1"]
