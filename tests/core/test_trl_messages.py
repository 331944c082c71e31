"""A TRL name anywhere a run config is read (a TOML file's section or key, a dict, ``--set``, the command line)
is answered with what it is here ("TRL's X is our section.key", or "not supported: why"), never with a
look-alike key of another meaning; our own key in the wrong section points to its section."""

from __future__ import annotations

from pathlib import Path

import pytest

from grpo_core.config import config_from_dict, load_config
from grpo_rewards.command_line import main
from grpo_rewards.errors import ConfigError


def _base(tmp_path: Path) -> dict:
    (tmp_path / "rows.jsonl").write_text('{"prompt": "1+1=", "answer": "2"}\n')
    return {"model": {"name_or_path": "m"}, "data": {"source": str(tmp_path / "rows.jsonl")},
            "rewards": {"fmt": {"use": "xml_count"}}}


def _messages(data: dict, overrides: tuple[str, ...] = ()) -> list[str]:
    with pytest.raises(ConfigError) as info:
        config_from_dict(data, overrides=overrides)
    return str(info.value).splitlines()


@pytest.mark.parametrize("section, key, says", [
    ("grpo", "num_train_epochs", "TRL's num_train_epochs is our grpo.max_steps"),
    ("grpo", "generation_kwargs", "TRL's generation_kwargs has no key in a run file: pass "
                                  "args=GRPOConfig(generation_kwargs=...) to GRPOTrainer"),
    ("grpo", "temperature", "it is generation.temperature"),
    ("grpo", "max_prompt_length", "it is data.max_prompt_length"),
    ("grpo", "per_device_train_batch_size", "TRL's per_device_train_batch_size is our grpo.prompts_per_step"),
    ("grpo", "torch_compile", "TRL's torch_compile is not supported: the model is not compiled"),
    ("logging", "logging_steps", "TRL's logging_steps is our logging.log_every"),
])
def test_a_trl_key_in_a_section_says_what_it_is(tmp_path, section, key, says):
    data = _base(tmp_path)
    data[section] = {key: 3}
    (line,) = _messages(data)
    assert line == f"<dict>: {section}.{key}: unknown key: {says}" or line.startswith(
        f"<dict>: {section}.{key}: unknown key: {says} (")
    assert "did you mean" not in line  # num_train_epochs is not num_iterations, generation_kwargs not num_generations


def test_a_flat_trl_key_and_a_set_override(tmp_path):
    data = {**_base(tmp_path), "num_train_epochs": 3}
    lines = _messages(data, ("grpo.generation_batch_size=2", "grpo.learning_rat=1e-5"))
    assert lines[0].startswith("<dict>: num_train_epochs: unknown section: TRL's num_train_epochs is our "
                               "grpo.max_steps")
    assert lines[1].startswith("--set grpo.generation_batch_size=2: grpo.generation_batch_size: unknown key: TRL's "
                               "generation_batch_size is our grpo.prompts_per_step")
    assert lines[2] == "--set grpo.learning_rat=1e-5: grpo.learning_rat: unknown key; did you mean 'learning_rate'?"


def test_a_toml_file_and_the_command_line(tmp_path, capsys):
    base = _base(tmp_path)
    run = tmp_path / "run.toml"
    run.write_text(f'num_train_epochs = 3\n\n[model]\nname_or_path = "m"\n\n[data]\nsource = "{base["data"]["source"]}"'
                   f'\n\n[grpo]\ngeneration_kwargs = {{}}\n\n[rewards.fmt]\nuse = "xml_count"\n')
    with pytest.raises(ConfigError) as info:
        load_config(run)
    first, second = str(info.value).splitlines()
    assert first.startswith(f"{run}:1: num_train_epochs: unknown section: TRL's num_train_epochs is our grpo.max_steps")
    assert second.startswith(f"{run}:10: grpo.generation_kwargs: unknown key: TRL's generation_kwargs has no key")
    assert main(["config", "validate", str(run), "--set", "generation.num_train_epochs=2"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 3 and "did you mean" not in "".join(err)
    assert err[2].startswith("--set generation.num_train_epochs=2: generation.num_train_epochs: unknown key: TRL's "
                             "num_train_epochs is our grpo.max_steps")
