"""The trainer's extension hooks as a third-party plugin uses them: a trainer backend registered through
``grpo_register_trainer_backends`` runs ``grpo train`` when ``[trainer] backend`` names it, and a generation
backend registered through ``grpo_register_generation_backends`` is what ``[generation] backend`` builds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from grpo_rewards import RewardSpec, hookimpl
from grpo_rewards.command_line import main

CONFIG = """\
[model]
name_or_path = "{model}"
dtype = "float32"

[data]
source = "{rows}"
prompt_field = "question"
chat_template = false

[generation]
num_generations = 2
max_completion_length = 8

[rewards.short]
use = "shortness"
"""


def shortness() -> Any:
    """Shorter completions score higher."""
    return lambda completions, **_: [-len(str(c)) / 100 for c in completions]


class EchoTrainer:
    """A trainer backend that trains nothing: it records what it was given and reports a step count."""

    made: list[EchoTrainer] = []

    def __init__(self, config: Any, resume: bool = False):
        self.config, self.resume = config, resume
        EchoTrainer.made.append(self)

    def train(self) -> dict[str, Any]:
        return {"step": 7, "interrupted": False}


class CannedBackend:
    """A generation backend answering every prompt with the same text."""

    def __init__(self, config: Any, model: Any, tokenizer: Any):
        self.config, self.model, self.tokenizer = config, model, tokenizer

    def generate(self, prompts: list[str], num_generations: int) -> list[list[str]]:
        return [["<answer>4</answer>"] * num_generations for _ in prompts]


class ThirdParty:
    @hookimpl
    def grpo_register_rewards(self, register: Any) -> None:
        register(RewardSpec("shortness", shortness))

    @hookimpl
    def grpo_register_trainer_backends(self, register: Any) -> None:
        register("echo_trainer", EchoTrainer)

    @hookimpl
    def grpo_register_generation_backends(self, register: Any) -> None:
        register("canned", CannedBackend)


@pytest.fixture
def third_party_registry() -> Any:
    """A registry with the third party's plugin, given per call (the process-wide one is left alone)."""
    import grpo_rewards.plugins as plugins

    EchoTrainer.made.clear()
    return plugins.load_registry(extra_plugins=[("third_party", ThirdParty())])


@pytest.fixture
def third_party(third_party_registry: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The same registry as the process-wide one (``grpo train`` on the command line reads that)."""
    import grpo_rewards.plugins as plugins

    monkeypatch.setattr(plugins, "_default", third_party_registry)
    return third_party_registry


def run_config(tmp_path: Path, model: Path, extra: str) -> Path:
    (tmp_path / "rows.jsonl").write_text('{"question": "2+2?", "answer": "4"}\n{"question": "1+3?", "answer": "4"}\n')
    path = tmp_path / "run.toml"
    path.write_text(CONFIG.format(model=model, rows=tmp_path / "rows.jsonl") + extra)
    return path


def test_a_registered_trainer_backend_runs_grpo_train(third_party: Any, tiny_model_dir: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    config = run_config(tmp_path, tiny_model_dir, '\n[trainer]\nbackend = "echo_trainer"\n')
    assert main(["train", str(config), "--set", f"logging.output_dir={tmp_path / 'run'}"]) == 0
    assert f"done at step 7: {tmp_path / 'run'}" in capsys.readouterr().err
    [trainer] = EchoTrainer.made
    assert trainer.config.trainer.backend == "echo_trainer" and trainer.resume is False
    assert trainer.config.rewards.aliases == ["short"]  # the validated config, rewards built


def test_a_registered_generation_backend_is_built_from_the_config(third_party_registry: Any, tiny_model_dir: Path,
                                                                  tmp_path: Path) -> None:
    from grpo_core.config import load_config
    from grpo_core.generation.transformers_backend import build_backend

    cfg = load_config(str(run_config(tmp_path, tiny_model_dir, "")), ['generation.backend="canned"'],
                      registry=third_party_registry)
    backend = build_backend(cfg, "the model", "the tokenizer", third_party_registry)
    assert isinstance(backend, CannedBackend)
    assert (backend.config, backend.model, backend.tokenizer) == (cfg, "the model", "the tokenizer")
    assert backend.generate(["2+2?"], 2) == [["<answer>4</answer>"] * 2]


def test_an_unregistered_backend_name_is_a_config_error_with_a_did_you_mean(
        third_party_registry: Any, tiny_model_dir: Path, tmp_path: Path) -> None:
    from grpo_core.config import load_config
    from grpo_rewards.errors import ConfigError

    config = run_config(tmp_path, tiny_model_dir, '\n[trainer]\nbackend = "echo_trainr"\n')
    with pytest.raises(ConfigError) as caught:
        load_config(str(config), ['generation.backend="caned"'], registry=third_party_registry)
    text = str(caught.value)
    assert "trainer.backend: unknown trainer backend 'echo_trainr'; did you mean 'echo_trainer'?" in text
    assert "generation.backend: unknown generation backend 'caned'; did you mean 'canned'?" in text
