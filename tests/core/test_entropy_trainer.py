"""The entropy options through the whole trainer: row slices (``micro_batch_tokens``) give the update of the unsliced
micro-batch with ``top_entropy_quantile`` and ``entropy_coef`` on (the threshold over the whole micro-batch, not
per slice); each option reaches the trainer's loss in a one-step run on a tiny model and changes the update; the
adaptive coefficient moves, is logged, and survives a resume; and with the options off no entropy gradient is
computed (the default path costs nothing). Equality with TRL's own loss is ``tests/core/test_entropy_parity.py``;
two processes against one, ``tests/core/test_distributed.py``."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from tests.core.conftest import tiny_run  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Seems like `optimizer.step\\(\\)` has been overridden")

ADVANTAGES = torch.tensor([1.0, -0.5, 0.3, -0.8, 0.2, 1.1, -1.2, 0.4])


@pytest.fixture(scope="module")
def model_dir(arithmetic_model_dir: Path) -> Path:
    return arithmetic_model_dir


def _trainer(model_dir: Path, out: Path, **grpo: Any) -> Any:
    from grpo_core import Trainer, config_from_dict

    return Trainer(config_from_dict(tiny_run(
        model_dir, out, model={"gradient_checkpointing": False},
        data={"source": "demo:arithmetic?max_operand=9", "answer_field": "answer", "chat_template": False},
        grpo={"learning_rate": 1e-3, "max_steps": 1, "max_grad_norm": 1e9, **grpo},
        checkpoint={"every": 0}, rewards={"near": {"use": "numeric_proximity"}})))


def _grads(trainer: Any, batch: Any) -> tuple[list[list[torch.Tensor]], dict[str, float]]:
    """The gradients each optimizer step of one ``_update`` sees (recorded instead of stepping), and its metrics."""
    seen: list[list[torch.Tensor]] = []
    trainer.optimizer.step = lambda: seen.append([p.grad.clone() for p in trainer.params])
    metrics = trainer._update(batch, ADVANTAGES)
    return seen, metrics


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Every log-prob pass the trainer runs: its keyword arguments, and whether gradients were on."""
    import grpo_core.trainer as trainer_module

    calls: list[dict[str, Any]] = []
    real = trainer_module.completion_logprobs

    def spy(model: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append({**kwargs, "grad": torch.is_grad_enabled()})
        return real(model, *args, **kwargs)

    monkeypatch.setattr(trainer_module, "completion_logprobs", spy)
    return calls


def test_row_slices_give_the_update_of_the_whole_micro_batch(model_dir: Path, tmp_path: Path):
    """The whole micro-batch in one pass (threshold read off the training forward) against one row per pass and
    3 + 1 rows per pass (threshold from a no-grad pass over the micro-batch), two micro-batches: the same gradients
    and metrics for both optimizer steps; and the options did change the update. One trainer, its step plan's
    token budget changed between updates (the optimizer only records, so the weights stay put)."""
    import dataclasses

    from grpo_core.algorithm.entropy import EntropyControl

    trainer = _trainer(model_dir, tmp_path / "run", micro_batch_tokens=0, top_entropy_quantile=0.3,
                       entropy_coef=0.05, gradient_accumulation_steps=2, num_iterations=2)
    torch.manual_seed(0)
    batch = trainer.backend.generate([trainer.prompts[0], trainer.prompts[1]], 4)
    width = batch.prompt_ids.size(1) + batch.completion_ids.size(1)
    reference, metrics = _grads(trainer, batch)
    assert len(reference) == 2 and "entropy" in metrics
    whole_plan = trainer.step_plan
    for budget in (1, 3 * width):
        trainer.step_plan = dataclasses.replace(whole_plan, micro_batch_tokens=budget)
        assert max(len(parts) for parts in trainer._plans(batch)[0].slices) > 1
        got, sliced_metrics = _grads(trainer, batch)
        for step_a, step_b in zip(reference, got, strict=True):
            for a, b in zip(step_a, step_b, strict=True):
                torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-7)
        assert sliced_metrics.keys() == metrics.keys()
        for key, value in metrics.items():
            assert sliced_metrics[key] == pytest.approx(value, rel=1e-4, abs=1e-6), key
    trainer.step_plan = whole_plan
    trainer.entropy = EntropyControl(dataclasses.replace(trainer.cfg.grpo, top_entropy_quantile=1.0, entropy_coef=0.0))
    without, _ = _grads(trainer, batch)
    assert max((a - b).abs().max().item() for a, b in zip(reference[0], without[0], strict=True)) > 1e-4


def test_a_slice_alone_would_take_another_threshold(model_dir: Path, tmp_path: Path, monkeypatch):
    """What the test above guards against: each slice's own quantile keeps other tokens than the micro-batch's."""
    from grpo_core.algorithm.entropy import entropy_threshold, high_entropy_mask

    trainer = _trainer(model_dir, tmp_path / "run", micro_batch_tokens=1, top_entropy_quantile=0.3)
    torch.manual_seed(0)
    batch = trainer.backend.generate([trainer.prompts[0], trainer.prompts[1]], 4)
    plan = trainer._plans(batch)[0]
    masks = trainer._entropy_masks(plan)
    assert len(plan.slices[0]) == 8 and masks.mask is not None
    kept = masks.mask.sum().item()
    assert 0 < kept < plan.mask.sum().item() and masks.tokens == [int(kept)]
    with torch.no_grad():
        _, entropy = trainer._logps(trainer.model, plan, torch.arange(8), with_entropy=True)
    per_row = torch.cat([high_entropy_mask(entropy[i:i + 1], plan.mask[i:i + 1],
                                           entropy_threshold(entropy[i][plan.mask[i].bool()], 0.3))
                         for i in range(8)])
    assert not torch.equal(per_row, masks.mask)
    whole = high_entropy_mask(entropy, plan.mask, entropy_threshold(entropy[plan.mask.bool()], 0.3))
    assert torch.equal(whole, masks.mask)


OPTIONS = [
    {"top_entropy_quantile": 0.2},
    {"entropy_coef": 0.05, "loss_type": "grpo"},
    {"use_adaptive_entropy": True, "entropy_coef": 0.01, "entropy_target": 10.0, "entropy_coef_delta": 0.02,
     "entropy_coef_max": 0.04, "num_iterations": 2, "top_entropy_quantile": 0.5},
]


@pytest.mark.parametrize("grpo", OPTIONS, ids=["quantile", "coef", "adaptive"])
def test_each_entropy_option_reaches_the_trainers_loss(model_dir: Path, tmp_path: Path, monkeypatch,
                                                        grpo: dict[str, Any]):
    import grpo_core.trainer as trainer_module
    from grpo_core.algorithm.loss import grpo_loss

    seen: list[Any] = []

    def loss_spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs["entropy"])
        return grpo_loss(*args, **kwargs)

    monkeypatch.setattr(trainer_module, "grpo_loss", loss_spy)
    passes = _spy(monkeypatch)
    trainer = _trainer(model_dir, tmp_path / "run", **grpo)
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
    summary = trainer.train()
    assert summary["step"] == 1 and math.isfinite(summary["loss"]) and seen and all(e is not None for e in seen)
    assert any(not torch.equal(p, before[n]) for n, p in trainer.model.named_parameters() if p.requires_grad)
    training = [c for c in passes if c["grad"]]
    if "top_entropy_quantile" in grpo:
        assert all(e.token_mask is not None and 0 < e.token_mask.sum() < e.token_mask.numel() for e in seen)
    if "use_adaptive_entropy" in grpo:
        # the first optimizer step applies nothing (no entropy measured yet); the step's entropy (~3 nats) is below
        # the target, so the coefficient rises by delta, the second step applies it, and it rises to the bound
        assert {e.coef for e in seen[: len(seen) // 2]} == {0.0} and {e.coef for e in seen[len(seen) // 2:]} == {0.03}
        assert [c["entropy_grad"] for c in training] == [False] * (len(training) // 2) + [True] * (len(training) // 2)
        assert summary["entropy_coef"] == pytest.approx(0.04)
        assert trainer.entropy.state_dict() == {"entropy_coef": pytest.approx(0.04),
                                                "last_world_entropy": pytest.approx(summary["entropy"], rel=0.5)}
    elif "entropy_coef" in grpo:
        assert {e.coef for e in seen} == {0.05} and all(c["entropy_grad"] for c in training)
        assert summary["entropy_coef"] == 0.05
    else:
        assert {e.coef for e in seen} == {0.0} and not any(c["entropy_grad"] for c in training)
        assert "entropy_coef" not in summary


def test_the_adaptive_coefficient_survives_a_resume(model_dir: Path, tmp_path: Path):
    from grpo_core import Trainer

    options = dict(use_adaptive_entropy=True, entropy_coef=0.01, entropy_target=10.0, entropy_coef_delta=0.02,
                   entropy_coef_max=1.0)
    first = _trainer(model_dir, tmp_path / "run", **options)
    first.train()
    state = first.entropy.state_dict()
    assert state["entropy_coef"] == pytest.approx(0.03) and state["last_world_entropy"] < 10
    resumed = Trainer(first.cfg, resume=True)
    resumed.cfg.grpo.max_steps = 2
    resumed.train()
    assert resumed.step == 2 and resumed.entropy.coef == pytest.approx(0.05)  # 0.01 + 2 steps of 0.02


def test_with_the_options_off_no_entropy_gradient_is_computed(model_dir: Path, tmp_path: Path, monkeypatch):
    """The default path: the entropy only for the metric, on the first pass over the batch, without a gradient,
    and no extra pass."""
    passes = _spy(monkeypatch)
    trainer = _trainer(model_dir, tmp_path / "run", num_iterations=2, micro_batch_tokens=1)
    trainer.train()
    training = [c for c in passes if c["grad"]]
    assert training and not any(c["entropy_grad"] for c in passes)
    assert [c["with_entropy"] for c in training] == [True] * 8 + [False] * 8  # the metric, first iteration only
    assert len([c for c in passes if not c["grad"] and c.get("with_entropy")]) == 0  # no threshold pass


@pytest.mark.parametrize("grpo,message", [
    ({"top_entropy_quantile": 1.5}, "grpo.top_entropy_quantile: "),
    ({"entropy_target": -0.1}, "grpo.entropy_target: "),
    ({"use_adaptive_entropy": True, "entropy_coef_min": 0.5, "entropy_coef_max": 0.1},
     "grpo.entropy_coef_min: must be <= entropy_coef_max (0.1), got 0.5"),
])
def test_bad_entropy_values_are_one_line_naming_the_key(core_registry: Any, grpo: dict[str, Any], message: str):
    from grpo_core.config import config_from_dict
    from grpo_rewards.errors import ConfigError

    with pytest.raises(ConfigError) as info:
        config_from_dict({"model": {"name_or_path": "m"}, "data": {"source": "hub/x"}, "grpo": grpo,
                          "rewards": {"a": {"use": "core_len"}}}, registry=core_registry)
    (line,) = str(info.value).splitlines()
    assert line.startswith(f"<dict>: {message}")
