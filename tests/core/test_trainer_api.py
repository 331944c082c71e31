"""The Python API (``Trainer(config_from_dict(...)).train()``) on a tiny model: LoRA with the KL
reference being the same model with the adapter disabled (no second copy), the lifecycle hooks,
metrics and samples files, and the saved adapter loading back with ``from_pretrained``."""

from __future__ import annotations

import json
import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from grpo_rewards import hookimpl, load_registry  # noqa: E402


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, int | None]] = []

    @hookimpl
    def grpo_on_train_start(self, trainer):
        self.calls.append(("start", None))

    @hookimpl
    def grpo_on_rewards_scored(self, trainer, step, rows):
        assert {"prompt", "completion", "correct", "total", "advantage"} <= set(rows[0])
        self.calls.append(("scored", step))

    @hookimpl
    def grpo_on_step_end(self, trainer, step, metrics):
        self.calls.append(("step", step))

    @hookimpl
    def grpo_on_checkpoint(self, trainer, step, path):
        self.calls.append(("checkpoint", step))

    @hookimpl
    def grpo_on_train_end(self, trainer, metrics):
        self.calls.append(("end", metrics["step"]))


class ContextReader:
    """Reads only the documented context (and the event's own arguments), never the trainer."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, int, int, str, dict]] = []
        self.contexts: list = []

    def _see(self, event, context):
        self.contexts.append(context)
        self.seen.append((event, context.step, context.max_steps, str(context.run_dir), dict(context.metrics)))

    @hookimpl
    def grpo_on_train_start(self, context):
        self._see("start", context)

    @hookimpl
    def grpo_on_rewards_scored(self, context, step):
        assert context.step == step - 1  # the step being taken is not finished yet
        self._see("scored", context)

    @hookimpl
    def grpo_on_step_end(self, context, metrics):
        assert dict(context.metrics) == metrics
        self._see("step", context)

    @hookimpl
    def grpo_on_checkpoint(self, context, path):
        assert path.startswith(str(context.run_dir))
        self._see("checkpoint", context)

    @hookimpl
    def grpo_on_train_end(self, context, metrics):
        assert metrics["step"] == context.step
        self._see("end", context)


class Raiser:
    @hookimpl
    def grpo_on_step_end(self, context, step):
        raise RuntimeError(f"listener broke at step {step}")


def test_lora_run_with_kl_hooks_and_saved_adapter(tmp_path, arithmetic_model_dir):
    from grpo_core import Trainer, config_from_dict
    from grpo_core.policy import models

    model_dir = arithmetic_model_dir
    recorder = Recorder()
    reader = ContextReader()
    registry = load_registry(extra_plugins=[("recorder", recorder), ("raiser", Raiser()), ("reader", reader)])
    cfg = config_from_dict({
        "model": {"name_or_path": str(model_dir), "dtype": "float32"},  # gradient checkpointing on (default)
        "data": {"source": "demo:arithmetic?max_operand=9", "answer_field": "answer", "chat_template": False},
        "generation": {"num_generations": 4, "max_completion_length": 8},
        "grpo": {"learning_rate": 1e-2, "prompts_per_step": 2, "max_steps": 3, "beta": 0.04, "num_iterations": 2,
                 "loss_type": "grpo", "scale_rewards": "batch", "mask_truncated_completions": True},
        "lora": {"enabled": True, "r": 4, "alpha": 8},
        "logging": {"output_dir": str(tmp_path / "run"), "progress": False, "plot": False, "sample_every": 1,
                    "num_samples": 3},
        "rewards": {"correct": {"use": "exact_match", "reference_extract": "none"},
                    "near": {"use": "numeric_proximity", "reference_extract": "none"}},
    }, registry=registry)
    trainer = Trainer(cfg, registry=registry)
    result = trainer.train()

    assert result["step"] == 3 and not result["interrupted"]
    assert models.is_peft(trainer.model) and trainer.model not in models._REFERENCES  # no second copy
    assert math.isfinite(result["kl"]) and result["kl"] > 0  # the adapter moved away from the reference
    assert recorder.calls == [("start", None), ("scored", 1), ("step", 1), ("scored", 2), ("step", 2),
                              ("scored", 3), ("step", 3), ("checkpoint", 3), ("end", 3)]
    # a listener that raises is recorded and skipped each time; the run and the other listeners go on
    assert registry.hook_failures == {("raiser", "grpo_on_step_end"): 3}
    assert any("listener broke at step 1" in p for p in registry.problems)
    # the context: step, max_steps, run_dir, config, backend and the last logged metrics, read-only
    run = str(tmp_path / "run")
    assert [(e, s, m, d) for e, s, m, d, _ in reader.seen] == [
        ("start", 0, 3, run), ("scored", 0, 3, run), ("step", 1, 3, run), ("scored", 1, 3, run), ("step", 2, 3, run),
        ("scored", 2, 3, run), ("step", 3, 3, run), ("checkpoint", 3, 3, run), ("end", 3, 3, run)]
    assert reader.seen[0][4] == {} and reader.seen[3][4] == reader.seen[2][4] and "loss" in reader.seen[2][4]
    assert reader.seen[-1][4] == reader.seen[-3][4]  # at the end: the last step's metrics
    assert all(c.config is cfg and c.backend == "grpo_core" for c in reader.contexts)
    from dataclasses import FrozenInstanceError

    with pytest.raises(FrozenInstanceError):
        reader.contexts[0].step = 7
    with pytest.raises(TypeError):
        reader.contexts[2].metrics["loss"] = 0.0  # type: ignore[index]
    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2, 3]
    for key in ("reward/mean", "rewards/correct", "rewards/near", "advantages/std", "entropy", "clip_ratio/region_mean",
                "completion_length/mean", "step_time", "tokens_per_s", "peak_memory_gb", "grad_norm", "kl"):
        assert key in metrics[-1], key
    samples = (tmp_path / "run" / "samples.jsonl").read_text().splitlines()
    assert len(samples) == 9 and "completion" in json.loads(samples[0])

    from peft import AutoPeftModelForCausalLM

    reloaded = AutoPeftModelForCausalLM.from_pretrained(tmp_path / "run" / "model")
    trained = dict(trainer.model.named_parameters())
    for name, p in reloaded.named_parameters():
        if "lora_" in name:
            torch.testing.assert_close(p, trained[name].detach())
