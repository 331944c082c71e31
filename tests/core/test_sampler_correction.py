"""The sampler-mismatch correction against TRL's rule and hand-computed cases."""

from __future__ import annotations

import math

import pytest
import torch

from grpo_core.algorithm.sampler_correction import MODES, importance_ratio
from tests.core.test_loss_parity import tiny_model_dir  # noqa: F401  (the parity test's TRL-loadable model)


def trl_rule(old, sampling, completion_mask, mode, clip_min, clip_max):
    """TRL's own block, copied from huggingface/trl trl/trainer/grpo_trainer.py
    (commit f2cd57710ae345ea6428ae95363267fcf38a3dc8, ``_generate_and_score_completions``), only the
    ``self.`` prefixes renamed and ``tool_mask`` None."""
    mask = completion_mask
    per_token_logps_diff = (old - sampling) * mask
    sequence_level_is = mode in ["sequence_mask", "sequence_truncate"]
    if sequence_level_is:
        logps_diff = per_token_logps_diff.sum(dim=-1, keepdim=True)
    else:
        logps_diff = per_token_logps_diff
    ratio = torch.exp(logps_diff)
    if mode in ["sequence_truncate", "token_truncate"]:
        ratio = torch.clamp(ratio, min=clip_min, max=clip_max)
    elif mode in ["sequence_mask", "token_mask"]:
        min_val = clip_min if clip_min is not None else -math.inf
        max_val = clip_max if clip_max is not None else math.inf
        invalid = (ratio < min_val) | (ratio > max_val)
        ratio = ratio.masked_fill(invalid, value=0.0)
    return ratio


@pytest.mark.parametrize("mode", [m for m in MODES if m != "none"])
@pytest.mark.parametrize("clip_min, clip_max", [(None, 3.0), (0.5, 2.0), (0.9, None)])
def test_matches_trl(mode, clip_min, clip_max):
    g = torch.Generator().manual_seed(0)
    old = -torch.rand(6, 9, generator=g) * 3
    sampling = old + torch.randn(6, 9, generator=g) * 0.4
    mask = torch.ones(6, 9)
    mask[1, 5:] = 0
    mask[4, 2:] = 0
    rho, metrics = importance_ratio(old, sampling, mask, mode, clip_min, clip_max)
    expected = trl_rule(old, sampling, mask, mode, clip_min, clip_max)
    torch.testing.assert_close(rho, expected, rtol=0, atol=0)
    flat = expected.flatten() if mode.startswith("sequence") else expected[mask.bool()]
    assert metrics["sampling/importance_sampling_ratio/min"] == pytest.approx(flat.min().item())
    assert metrics["sampling/importance_sampling_ratio/mean"] == pytest.approx(flat.mean().item())
    assert metrics["sampling/importance_sampling_ratio/max"] == pytest.approx(flat.max().item())


def test_sequence_mask_drops_a_completion_over_the_cap():
    trainer = torch.tensor([[-1.0, -1.0, -5.0], [-1.0, -1.0, -1.0]])
    sampler = torch.tensor([[-2.0, -1.5, 0.0], [-1.0, -1.1, -9.0]])  # row 0: log-ratio 1 + 0.5 = 1.5
    mask = torch.tensor([[1, 1, 0], [1, 1, 0]])  # padding beyond the mask is ignored
    rho, _ = importance_ratio(trainer, sampler, mask, "sequence_mask", None, 3.0)
    assert rho.shape == (2, 1)
    assert rho[0, 0] == 0.0  # exp(1.5) = 4.48 > 3
    assert rho[1, 0].item() == pytest.approx(math.exp(0.1))


def test_token_truncate_caps_each_token():
    trainer = torch.tensor([[0.0, -1.0, -2.0]])
    sampler = torch.tensor([[-2.0, -1.0, -1.0]])
    rho, metrics = importance_ratio(trainer, sampler, torch.ones(1, 3), "token_truncate", None, 3.0)
    torch.testing.assert_close(rho, torch.tensor([[3.0, 1.0, math.exp(-1.0)]]))
    assert metrics["sampling/sampling_logp_difference/max"] == pytest.approx(2.0)
    assert metrics["sampling/sampling_logp_difference/mean"] == pytest.approx(1.0)


def test_none_applies_nothing_but_reports_the_gap():
    rho, metrics = importance_ratio(torch.zeros(2, 2), torch.full((2, 2), -0.5), torch.ones(2, 2), "none")
    assert rho is None
    assert metrics["sampling/sampling_logp_difference/mean"] == pytest.approx(0.5)


def test_unknown_mode():
    with pytest.raises(ValueError, match="sequence_mask"):
        importance_ratio(torch.zeros(1, 1), torch.zeros(1, 1), torch.ones(1, 1), "sequence")


@pytest.mark.parametrize("loss_type, beta, mu, mode", [("dapo", 0.04, 1, "sequence_mask"),
                                                       ("grpo", 0.0, 2, "token_truncate")])
def test_corrected_loss_and_grads_match_trl(tiny_model_dir, tmp_path, loss_type, beta, mu, mode):  # noqa: F811
    """``grpo_loss(importance_sampling_ratio=...)`` against ``trl.GRPOTrainer._compute_loss`` with its vLLM
    correction switched on and the same ratio in ``inputs`` (TRL multiplies the surrogate by it)."""
    pytest.importorskip("trl")
    pytest.importorskip("datasets")
    from transformers import AutoModelForCausalLM

    from grpo_core.algorithm.loss import grpo_loss
    from grpo_core.policy.logprobs import completion_logprobs
    from tests.core import test_loss_parity as parity

    path = tiny_model_dir
    trainer = parity._trl_trainer(path, tmp_path, loss_type, beta, mu, None)
    trainer.use_vllm, trainer.vllm_importance_sampling_correction = True, True
    ours = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    ours.train()
    g = torch.Generator().manual_seed(3)
    prompt_ids, prompt_mask, completion_ids, completion_mask, advantages = parity._batch(ours.config.vocab_size, g)
    input_ids = torch.cat([prompt_ids, completion_ids], 1)
    attention_mask = torch.cat([prompt_mask, completion_mask], 1)
    k = completion_ids.size(1)
    with torch.no_grad():
        base, _ = completion_logprobs(ours, input_ids, attention_mask, k, temperature=parity.TEMPERATURE)
    old = base + 0.3 * torch.randn(base.shape, generator=g) if mu > 1 else base
    sampler = old + 0.4 * torch.randn(base.shape, generator=g)
    rho, _ = importance_ratio(old, sampler, completion_mask, mode, None, 1.5)
    assert ((rho == 0) | (rho == 1.5)).any() and (rho != 1.5).any()  # the bound is exercised, not everywhere
    ref = base + 0.5 * torch.randn(base.shape, generator=g) if beta else None
    num_items = completion_mask.sum()
    inputs = {"prompt_ids": prompt_ids, "prompt_mask": prompt_mask, "completion_ids": completion_ids,
              "completion_mask": completion_mask, "advantages": advantages, "num_items_in_batch": num_items,
              "importance_sampling_ratio": rho}
    if mu > 1:
        inputs["old_per_token_logps"] = old
    if ref is not None:
        inputs["ref_per_token_logps"] = ref
    trl_loss = trainer._compute_loss(trainer.model, inputs)
    trl_loss.backward()

    logps, _ = completion_logprobs(ours, input_ids, attention_mask, k, temperature=parity.TEMPERATURE)
    loss, _ = grpo_loss(logps, completion_mask, advantages, old_per_token_logps=old if mu > 1 else None,
                        ref_per_token_logps=ref, loss_type=loss_type, epsilon=parity.EPSILON,
                        epsilon_high=parity.EPSILON_HIGH, beta=beta, max_completion_length=parity.MAX_COMPLETION,
                        num_items_in_batch=num_items, grad_accum_steps=parity.GRAD_ACCUM,
                        importance_sampling_ratio=rho)
    loss.backward()
    torch.testing.assert_close(loss, trl_loss.detach(), rtol=0, atol=1e-5)
    theirs = dict(trainer.model.named_parameters())
    for name, p in ours.named_parameters():
        torch.testing.assert_close(p.grad, theirs[name].grad, rtol=0, atol=1e-5)
