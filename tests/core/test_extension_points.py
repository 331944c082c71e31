"""A new engine, a new generation backend and a new loss type each come from one file outside the package,
registered as a plugin would register them, and a training step runs with them (what ARCHITECTURE.md's "where
to add" says)."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from tests.core.conftest import tiny_run  # noqa: E402

TOY_ENGINE = '''
"""A toy engine: the single-process engine, counting its backwards and optimizer steps."""
from grpo_core.parallel.engine import Engine
from grpo_rewards import hookimpl


class CountingEngine(Engine):
    backwards = 0
    steps = 0

    def backward(self, loss):
        type(self).backwards += 1
        super().backward(loss)

    def optimizer_step(self):
        type(self).steps += 1
        return super().optimizer_step()


@hookimpl
def grpo_register_engines(register):
    register("counting", lambda: CountingEngine)
'''

TOY_BACKEND = '''
"""A toy generation backend: every completion is the same text, sampled from nothing."""
import torch

from grpo_core.generation import Generation, completion_mask_from_eos
from grpo_rewards import hookimpl

TEXT = "12"


class FixedBackend:
    calls = 0

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def generate(self, prompts, num_generations, *, greedy=False):
        type(self).calls += 1
        tok = self.tokenizer
        tok.padding_side = "left"
        rows = [p for p in prompts for _ in range(num_generations)]
        prompt = tok(rows, return_tensors="pt", padding=True, add_special_tokens=False)
        ids = tok([TEXT] * len(rows), add_special_tokens=False)["input_ids"]
        completion = torch.tensor([row + [tok.eos_token_id] for row in ids])
        mask, truncated = completion_mask_from_eos(completion, [tok.eos_token_id])
        return Generation(prompt["input_ids"], prompt["attention_mask"], completion, mask, [TEXT] * len(rows),
                          truncated)


@hookimpl
def grpo_register_generation_backends(register):
    register("fixed", lambda config, model, tokenizer: FixedBackend(tokenizer))
'''

TOY_LOSS = '''
"""A toy loss type: each sequence's token mean, averaged over the sequences (GRPO's own normaliser, written
anew), keeping the losses it returned; it has no use for a KL term and says so."""
from grpo_core.algorithm.loss_types import LossType
from grpo_rewards import hookimpl


class SequenceMean(LossType):
    name = "seq_mean"
    returned = []
    built_with = []

    def __init__(self, config=None):
        super().__init__(config)
        type(self).built_with.append(config)

    def normalise(self, per_token_loss, x):
        per_sequence = (per_token_loss * x.mask).sum(-1) / x.mask.sum(-1).clamp(min=1.0)
        loss = per_sequence.sum() / x.rows / x.grad_accum_steps
        type(self).returned.append(float(loss.detach()))
        return loss

    @staticmethod
    def config_problems(sections):
        if sections["grpo"].beta != 0:
            return [(("grpo", "beta"), "seq_mean has no KL term: leave beta at 0")]
        return []


@hookimpl
def grpo_register_loss_types(register):
    register("seq_mean", SequenceMean)
'''


def load_file(path: Path, text: str) -> ModuleType:
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def model_dir(arithmetic_model_dir: Path) -> Path:
    return arithmetic_model_dir  # the demo's tiny model (tests/core/conftest.py), built once per session


def one_step(model_dir: Path, tmp_path: Path, plugins: list[tuple[str, Any]], **sections: dict[str, Any]) -> Any:
    from grpo_core import Trainer, config_from_dict
    from grpo_rewards.plugins import load_registry

    registry = load_registry(extra_plugins=plugins)
    data = tiny_run(model_dir, tmp_path / "run", model={"gradient_checkpointing": False},
                    data={"source": "demo:arithmetic?max_operand=9", "answer_field": "answer", "chat_template": False},
                    grpo={"learning_rate": 1e-3, "max_steps": 1}, checkpoint={"every": 0},
                    rewards={"correct": {"use": "exact_match"}})
    for name, values in sections.items():
        data[name] = {**data.get(name, {}), **values}
    trainer = Trainer(config_from_dict(data, registry=registry), registry=registry)
    return trainer, trainer.train()


def test_a_toy_engine_from_one_file_runs_a_step(model_dir: Path, tmp_path: Path) -> None:
    toy = load_file(tmp_path / "toy_engine.py", TOY_ENGINE)
    trainer, summary = one_step(model_dir, tmp_path, [("toy_engine", toy)], distributed={"engine": "counting"})
    assert type(trainer.engine) is toy.CountingEngine
    assert toy.CountingEngine.steps == 1 and toy.CountingEngine.backwards >= 1
    assert summary["step"] == 1 and math.isfinite(summary["loss"])


def test_a_toy_generation_backend_from_one_file_runs_a_step(model_dir: Path, tmp_path: Path) -> None:
    toy = load_file(tmp_path / "toy_backend.py", TOY_BACKEND)
    trainer, summary = one_step(model_dir, tmp_path, [("toy_backend", toy)], generation={"backend": "fixed"})
    assert type(trainer.backend) is toy.FixedBackend and toy.FixedBackend.calls == 1
    tokens = len(trainer.tokenizer(toy.TEXT, add_special_tokens=False)["input_ids"]) + 1  # and the EOS
    assert summary["step"] == 1 and summary["completion_length/mean"] == tokens


def test_an_unregistered_engine_is_a_config_error_naming_the_key(model_dir: Path, tmp_path: Path) -> None:
    from grpo_rewards.errors import ConfigError

    with pytest.raises(ConfigError, match=r"distributed\.engine.*must be one of ddp, fsdp2, deepspeed, got 'counting'"):
        one_step(model_dir, tmp_path, [], distributed={"engine": "counting"})


def test_a_toy_loss_type_from_one_file_runs_a_step(model_dir: Path, tmp_path: Path) -> None:
    toy = load_file(tmp_path / "toy_loss.py", TOY_LOSS)
    trainer, summary = one_step(model_dir, tmp_path, [("toy_loss", toy)], grpo={"loss_type": "seq_mean"})
    assert toy.SequenceMean.built_with == [trainer.cfg]  # built once, with the run config
    # one generation batch, one micro-batch: the step's loss is what the toy's normaliser returned
    assert len(toy.SequenceMean.returned) == 1
    assert summary["step"] == 1 and summary["loss"] == pytest.approx(toy.SequenceMean.returned[0], abs=1e-7)


def test_a_loss_types_own_config_checks_run_and_an_unregistered_one_is_refused(model_dir: Path,
                                                                               tmp_path: Path) -> None:
    from grpo_rewards.errors import ConfigError

    toy = load_file(tmp_path / "toy_loss.py", TOY_LOSS)
    with pytest.raises(ConfigError, match=r"grpo\.beta: seq_mean has no KL term"):
        one_step(model_dir, tmp_path, [("toy_loss", toy)], grpo={"loss_type": "seq_mean", "beta": 0.04})
    with pytest.raises(ConfigError, match=r"grpo\.loss_type: must be one of grpo, bnpo, dr_grpo, dapo, cispo, sapo, luspo, vespo, "
                                          r"got 'seq_mean'$"):
        one_step(model_dir, tmp_path, [], grpo={"loss_type": "seq_mean"})
    assert toy.SequenceMean.returned == []
