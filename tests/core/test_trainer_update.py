"""The policy update of the loop: gradient accumulation splits a generation batch without changing
the gradient (grpo and dapo normalisers), ``num_iterations`` takes one optimizer step per pass with
old log-probs computed once, and ``mask_truncated_completions`` removes truncated rows from the loss."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

# the tests replace optimizer.step to record gradients; the scheduler notices and warns
pytestmark = pytest.mark.filterwarnings("ignore:Seems like `optimizer.step\\(\\)` has been overridden")


@pytest.fixture(scope="module")
def model_dir(arithmetic_model_dir):
    return arithmetic_model_dir  # the demo's tiny model (tests/core/conftest.py), built once per session


def make_trainer(model_dir, tmp_path, **grpo):
    from grpo_core import Trainer, config_from_dict

    cfg = config_from_dict({
        "model": {"name_or_path": str(model_dir), "dtype": "float32", "gradient_checkpointing": False},
        "data": {"source": "demo:arithmetic?max_operand=9", "answer_field": "answer", "chat_template": False},
        "generation": {"num_generations": 4, "max_completion_length": 6},
        "grpo": {"learning_rate": 1e-3, "prompts_per_step": 2, "max_steps": 1, **grpo},
        "logging": {"output_dir": str(tmp_path / "run"), "progress": False, "plot": False},
        "rewards": {"correct": {"use": "exact_match"}},
    })
    return Trainer(cfg)


def grads_of_update(trainer, batch, advantages):
    """Run ``_update`` and record the clipped gradients each optimizer step sees (instead of stepping)."""
    seen = []
    trainer.optimizer.step = lambda: seen.append([p.grad.clone() for p in trainer.params])
    trainer._update(batch, advantages)
    return seen


@pytest.mark.parametrize("loss_type", ["grpo", "dapo", "dr_grpo"])
def test_gradient_accumulation_does_not_change_the_gradient(model_dir, tmp_path, loss_type):
    one = make_trainer(model_dir, tmp_path, loss_type=loss_type, gradient_accumulation_steps=1, max_grad_norm=1e9)
    two = make_trainer(model_dir, tmp_path, loss_type=loss_type, gradient_accumulation_steps=2, max_grad_norm=1e9)
    torch.manual_seed(0)
    batch = one.backend.generate([one.prompts[0], one.prompts[1]], 4)
    advantages = torch.tensor([1.0, -0.5, 0.3, -0.8, 0.2, 1.1, -1.2, 0.0])
    (g1,), (g2,) = grads_of_update(one, batch, advantages), grads_of_update(two, batch, advantages)
    assert any(g.abs().sum() > 0 for g in g1)
    for a, b in zip(g1, g2, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)


def test_num_iterations_steps_once_per_pass_and_clips(model_dir, tmp_path):
    trainer = make_trainer(model_dir, tmp_path, num_iterations=3, epsilon=0.05)
    torch.manual_seed(0)
    batch = trainer.backend.generate([trainer.prompts[0], trainer.prompts[1]], 4)
    advantages = torch.tensor([1.0, -0.5, 0.3, -0.8, 0.2, 1.1, -1.2, 0.4])
    stats = trainer._update(batch, advantages)  # real optimizer steps: the policy moves away from "old"
    assert trainer.optimizer.state[trainer.params[0]]["step"] == 3
    assert trainer.scheduler.last_epoch == 3
    assert stats["clip_ratio/region_mean"] > 0  # later passes see ratios != 1, against the same old log-probs


def test_mask_truncated_completions_drops_truncated_rows(model_dir, tmp_path):
    from grpo_core.generation.transformers_backend import Generation

    trainer = make_trainer(model_dir, tmp_path, mask_truncated_completions=True, max_grad_norm=1e9)
    torch.manual_seed(0)
    batch = trainer.backend.generate([trainer.prompts[0], trainer.prompts[1]], 4)
    truncated = torch.tensor([True] + [False] * 7)
    forced = Generation(batch.prompt_ids, batch.prompt_mask, batch.completion_ids, batch.completion_mask,
                        batch.completions_text, truncated)
    only_first = torch.tensor([1.0] + [0.0] * 7)  # only the truncated row carries signal
    (grads,) = grads_of_update(trainer, forced, only_first)
    assert all(g.abs().sum() == 0 for g in grads)
    (grads,) = grads_of_update(trainer, forced, torch.tensor([0.0, 1.0] + [0.0] * 6))
    assert any(g.abs().sum() > 0 for g in grads)


def test_trainer_accepts_a_toml_path_and_a_dict(model_dir, tmp_path):
    from grpo_core import Trainer

    sections = {
        "model": {"name_or_path": str(model_dir), "dtype": "float32", "gradient_checkpointing": False},
        "data": {"source": "demo:arithmetic?max_operand=9", "answer_field": "answer", "chat_template": False},
        "generation": {"max_completion_length": 8},
        "grpo": {"max_steps": 2},
        "rewards": {"correct": {"use": "exact_match"}},
    }
    assert Trainer(sections).cfg.grpo.max_steps == 2
    path = tmp_path / "run.toml"
    path.write_text(
        f'[model]\nname_or_path = "{model_dir}"\ndtype = "float32"\n'
        '[data]\nsource = "demo:arithmetic?max_operand=9"\nchat_template = false\n'
        '[generation]\nmax_completion_length = 8\n[grpo]\nmax_steps = 3\n[rewards.correct]\nuse = "exact_match"\n'
    )
    assert Trainer(str(path)).cfg.grpo.max_steps == 3


@pytest.mark.parametrize("loss_type", ["grpo", "bnpo", "dr_grpo", "dapo"])
@pytest.mark.parametrize(("accumulation", "beta", "iterations"), [(1, 0.0, 1), (2, 0.04, 1), (1, 0.04, 2), (2, 0.0, 2)])
def test_token_budget_slices_give_the_same_update(model_dir, tmp_path, loss_type, accumulation, beta, iterations):
    """``micro_batch_tokens`` only changes how many rows share a forward/backward: gradients and metrics of
    every optimizer step are those of the unsliced micro-batch (uneven slices included)."""
    import grpo_core.trainer as sliced_module
    from grpo_core.trainer import rows_per_slice

    common = dict(loss_type=loss_type, gradient_accumulation_steps=accumulation, beta=beta,
                  num_iterations=iterations, max_grad_norm=1e9)
    whole = make_trainer(model_dir, tmp_path / "whole", micro_batch_tokens=0, **common)
    torch.manual_seed(0)
    batch = whole.backend.generate([whole.prompts[0], whole.prompts[1]], 4)
    width = batch.prompt_ids.size(1) + batch.completion_ids.size(1)
    advantages = torch.tensor([1.0, -0.5, 0.3, -0.8, 0.2, 1.1, -1.2, 0.0])
    reference = list(grads_of_update(whole, batch, advantages))
    metrics = whole._update(batch, advantages)
    for budget in (1, 3 * width):  # one row per pass; 3 + 1 (and 3 + 3 + 2) rows per pass
        assert rows_per_slice(width, budget) == max(1, budget // width)
        sliced = make_trainer(model_dir, tmp_path / f"sliced{budget}", micro_batch_tokens=budget, **common)
        got = grads_of_update(sliced, batch, advantages)
        assert len(got) == len(reference) == iterations
        assert any(g.abs().sum() > 0 for g in got[0])
        for step_a, step_b in zip(reference, got, strict=True):
            for a, b in zip(step_a, step_b, strict=True):
                torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)
        sizes: list[int] = []
        with pytest.MonkeyPatch.context() as mp:  # (optimizer.step is still the recorder: same weights)
            mp.setattr(sliced_module, "completion_logprobs", _counting(sliced_module.completion_logprobs, sizes))
            sliced_metrics = sliced._update(batch, advantages)
        per_pass = rows_per_slice(width, budget)
        assert max(sizes) == min(per_pass, 8 // accumulation) and sum(sizes) % 8 == 0
        assert set(sliced_metrics) == set(metrics)
        for key, value in metrics.items():
            assert sliced_metrics[key] == pytest.approx(value, rel=1e-4, abs=1e-6), key


def _counting(forward, sizes):
    """``completion_logprobs`` that records the rows of every pass."""
    def wrapper(model, input_ids, *args, **kwargs):
        sizes.append(input_ids.size(0))
        return forward(model, input_ids, *args, **kwargs)
    return wrapper


def test_the_policy_as_sampler_needs_no_old_policy_pass_or_correction(model_dir, tmp_path):
    """The transformers backend samples from the training model itself (its log-probs are the trainer's to 1e-4):
    with ``num_iterations = 1`` the update runs the policy pass alone, no importance correction. The same batch
    from another sampler (vLLM) is corrected, from the training pass's own log-probs (one pass); with a dropout
    in the forward the old policy is not the training pass, and an old-policy pass comes first."""
    import dataclasses

    import grpo_core.trainer as trainer_module

    trainer = make_trainer(model_dir, tmp_path, micro_batch_tokens=0)
    torch.manual_seed(0)
    batch = trainer.backend.generate([trainer.prompts[0], trainer.prompts[1]], 4)
    assert batch.sampler_is_policy and batch.sampling_logps is not None
    advantages = torch.tensor([1.0, -0.5, 0.3, -0.8, 0.2, 1.1, -1.2, 0.0])
    attention = next(m for m in trainer.model.modules() if isinstance(getattr(m, "attention_dropout", None), float))
    for is_policy, p, passes in ((True, 0.0, 1), (False, 0.0, 1), (False, 0.1, 2)):
        sizes: list[int] = []
        attention.attention_dropout = p
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(trainer_module, "completion_logprobs", _counting(trainer_module.completion_logprobs, sizes))
            metrics = trainer._update(dataclasses.replace(batch, sampler_is_policy=is_policy), advantages)
        assert len(sizes) == passes
        assert ("sampling/importance_sampling_ratio/mean" in metrics) is not is_policy


@pytest.mark.parametrize("mode", ["sequence_mask", "token_mask", "sequence_truncate", "token_truncate"])
@pytest.mark.parametrize(("accumulation", "budget"), [(1, 0), (2, 1)])
def test_the_correction_from_the_training_pass_is_the_old_pass_correction(model_dir, tmp_path, mode, accumulation,
                                                                          budget):
    """Another sampler's batch, one optimizer step: reading the correction off each training forward gives the
    gradients and metrics of an old-policy pass first (the same weights, no dropout), every rule, with
    micro-batches and one-row slices."""
    import dataclasses

    import grpo_core.trainer as trainer_module

    common = dict(gradient_accumulation_steps=accumulation, micro_batch_tokens=budget, max_grad_norm=1e9,
                  loss_type="dapo")
    trainer = make_trainer(model_dir, tmp_path, **common)
    trainer.cfg.generation.importance_sampling = mode
    trainer.cfg.generation.importance_sampling_min = 0.5 if mode.startswith("token") else None
    trainer.cfg.generation.importance_sampling_max = 1.5
    torch.manual_seed(0)
    batch = trainer.backend.generate([trainer.prompts[0], trainer.prompts[1]], 4)
    g = torch.Generator().manual_seed(5)
    noisy = (batch.sampling_logps + 0.3 * torch.randn(batch.sampling_logps.shape, generator=g)) * batch.completion_mask
    other = dataclasses.replace(batch, sampler_is_policy=False, sampling_logps=noisy)
    advantages = torch.tensor([1.0, -0.5, 0.3, -0.8, 0.2, 1.1, -1.2, 0.4])
    def update(old_pass: bool) -> tuple[list[torch.Tensor], dict[str, float], int]:
        seen: list[list[torch.Tensor]] = []
        sizes: list[int] = []
        trainer.optimizer.step = lambda: seen.append([p.grad.clone() for p in trainer.params])
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(trainer_module, "completion_logprobs", _counting(trainer_module.completion_logprobs, sizes))
            mp.setattr(trainer_module, "has_active_dropout", lambda model: old_pass)  # forces the old-policy pass
            metrics = trainer._update(other, advantages)
        return seen[0], metrics, len(sizes)

    runs = {old_pass: update(old_pass) for old_pass in (False, True)}
    (fused, fused_metrics, fused_passes), (separate, separate_metrics, separate_passes) = runs[False], runs[True]
    assert separate_passes == 2 * fused_passes
    assert any(g.abs().sum() > 0 for g in fused)
    for a, b in zip(fused, separate, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)
    assert set(fused_metrics) == set(separate_metrics)
    assert any(k.startswith("rollout_corr/rollout_") and v > 0 for k, v in fused_metrics.items())  # the rule bites
    for key, value in separate_metrics.items():
        assert fused_metrics[key] == pytest.approx(value, rel=1e-4, abs=1e-6), key
