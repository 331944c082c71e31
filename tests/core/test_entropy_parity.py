"""Parity with TRL 1.16 for the entropy options: ``grpo_loss`` with :mod:`grpo_core.algorithm.entropy`'s inputs
(the high-entropy token mask of ``top_entropy_quantile``, the bonus of ``entropy_coef``, the adaptive coefficient)
gives the loss and gradients of ``trl.GRPOTrainer._compute_loss`` on a real, minimal GRPOTrainer (fp32, 1e-5), the
entropy computed by each side's own chunked head, over loss types and both importance-sampling levels with
perturbed old log-probs; each case asserts that its mask drops some tokens but not all and that its bonus moves
the loss. The adaptive coefficient moves as TRL's controller moves it."""

from __future__ import annotations

import dataclasses
import math
import zlib

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")
pytest.importorskip("datasets")

from grpo_core.algorithm.entropy import (  # noqa: E402
    EntropyControl,
    EntropyInputs,
    entropy_threshold,
    high_entropy_mask,
)
from grpo_core.algorithm.loss import BUILTIN, grpo_loss  # noqa: E402
from grpo_core.config.sections import GRPOConfig  # noqa: E402
from grpo_core.policy.logprobs import completion_logprobs  # noqa: E402
from tests.core.test_loss_parity import (  # noqa: E402
    EPSILON,
    EPSILON_HIGH,
    GRAD_ACCUM,
    MAX_COMPLETION,
    TEMPERATURE,
    _assert_same_update,
    _batch,
    _trl_loss,
    _trl_trainer,
    tiny_model_dir,  # noqa: F401 (the fixture)
)

# (loss type, level, top_entropy_quantile, entropy_coef, adaptive: None or (entropy_target, last step's entropy))
CASES = [
    ("dapo", "token", 0.2, 0.0, None),
    ("grpo", "token", 1.0, 0.05, None),
    ("bnpo", "sequence", 0.5, 0.1, None),
    ("dr_grpo", "token", 0.6, 0.03, None),
    ("cispo", "token", 0.3, 0.02, None),
    ("sapo", "sequence", 0.4, 0.03, None),
    ("luspo", "sequence", 0.5, 0.0, None),
    ("vespo", "token", 0.5, 0.05, None),
    ("grpo", "sequence", 0.6, 0.04, (5.0, 1.0)),  # the previous step at or below the target: the bonus applies
    ("dapo", "token", 1.0, 0.04, (0.2, math.inf)),  # the first step: nothing applied yet
]
CISPO_EPSILON_HIGH = 1.3


def _options(quantile: float, coef: float, adaptive: tuple[float, float] | None) -> dict:
    out = {"top_entropy_quantile": quantile, "entropy_coef": coef}
    if adaptive is not None:
        out.update(use_adaptive_entropy=True, entropy_target=adaptive[0], entropy_coef_delta=0.01,
                   entropy_coef_min=0.02, entropy_coef_max=0.045)
    return out


@pytest.mark.parametrize("loss_type,level,quantile,coef,adaptive", CASES)
def test_entropy_options_match_trl(tiny_model_dir, tmp_path, loss_type, level, quantile, coef,  # noqa: F811
                                   adaptive):
    from transformers import AutoModelForCausalLM

    options = _options(quantile, coef, adaptive)
    epsilon_high = CISPO_EPSILON_HIGH if loss_type == "cispo" else EPSILON_HIGH
    trainer = _trl_trainer(tiny_model_dir, tmp_path, loss_type, 0.0, 2, None, epsilon_high=epsilon_high,
                           importance_sampling_level=level, **options)
    control = EntropyControl(dataclasses.replace(GRPOConfig(), **options))
    if adaptive is not None:
        trainer._last_world_entropy = control.last_entropy = adaptive[1]
    ours = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    ours.train()

    g = torch.Generator().manual_seed(zlib.crc32(f"entropy-{loss_type}-{level}".encode()) % 1000)
    prompt_ids, prompt_mask, completion_ids, completion_mask, advantages = _batch(ours.config.vocab_size, g)
    input_ids = torch.cat([prompt_ids, completion_ids], 1)
    attention_mask = torch.cat([prompt_mask, completion_mask], 1)
    k = completion_ids.size(1)
    with torch.no_grad():
        base, _ = completion_logprobs(ours, input_ids, attention_mask, k, temperature=TEMPERATURE)
    old = base + torch.tensor([[-0.6], [0.6], [-0.1], [-0.3]]) + 0.3 * torch.randn(base.shape, generator=g)
    is_ratio = (0.8 + 0.4 * torch.rand(base.shape, generator=g)) if loss_type == "vespo" else None
    num_items = completion_mask.sum() + 7
    trl_loss = _trl_loss(trainer, prompt_ids, prompt_mask, completion_ids, completion_mask, advantages, num_items,
                         old_per_token_logps=old, importance_sampling_ratio=is_ratio)

    logps, entropy = completion_logprobs(ours, input_ids, attention_mask, k, temperature=TEMPERATURE,
                                         with_entropy=True, entropy_grad=control.needs_grad)
    token_mask = None
    if control.masks_tokens:
        threshold = entropy_threshold(entropy.detach()[completion_mask.bool()], quantile)
        token_mask = high_entropy_mask(entropy, completion_mask, threshold)
        kept = token_mask.sum().item()
        assert 0 < kept < completion_mask.sum().item()  # some tokens dropped, not all
    common = dict(old_per_token_logps=old, loss_type=BUILTIN[loss_type](), epsilon=EPSILON,
                  epsilon_high=epsilon_high, max_completion_length=MAX_COMPLETION, num_items_in_batch=num_items,
                  grad_accum_steps=GRAD_ACCUM, importance_sampling_ratio=is_ratio, importance_sampling_level=level)
    loss, metrics = grpo_loss(logps, completion_mask, advantages,
                              entropy=control.loss_inputs(entropy, completion_mask, token_mask, None), **common)
    loss.backward()
    _assert_same_update(loss, trl_loss, ours, trainer)
    theirs = dict(trainer.model.named_parameters())
    worst = max([abs(loss.item() - trl_loss.item())]
                + [(p.grad - theirs[n].grad).abs().max().item() for n, p in ours.named_parameters()])
    print(f"{loss_type}-{level}-{options}: largest difference from TRL {worst:.3g}")

    with torch.no_grad():  # what each case exercises: the bonus moves the loss where it applies
        without, _ = grpo_loss(logps.detach(), completion_mask, advantages,
                               entropy=EntropyInputs(entropy.detach(), token_mask, 0.0, None), **common)
    if control.applied_coef:
        assert abs(loss.item() - without.item()) > 1e-4
    else:
        assert abs(loss.item() - without.item()) < 1e-7
    logged = trainer._metrics["train"]
    ours_entropy = (entropy.detach() * completion_mask).sum() / completion_mask.sum()
    assert abs(ours_entropy.item() - logged["entropy"][-1]) < 1e-5
    if control.bonus:  # the coefficient after the step, as TRL's controller leaves it
        control.step(lambda totals: totals)
        assert control.coef == pytest.approx(trainer.entropy_coef, abs=1e-12)
        assert logged["entropy_coef"][-1] == pytest.approx(control.metrics()["entropy_coef"], abs=1e-12)
        if adaptive is not None:
            assert control.last_entropy == pytest.approx(trainer._last_world_entropy, abs=1e-5)
            assert control.coef != coef  # it moved


def test_threshold_ties_and_an_empty_micro_batch_are_trls():
    """TRL's get_high_entropy_mask on the same tensors: ties at the threshold keep, padding never trains, and a
    micro-batch without completion tokens trains nothing."""
    trl = pytest.importorskip("trl")

    class _Accel:
        def pad_across_processes(self, x, dim, pad_index):
            return x

        def gather(self, x):
            return x

    fake = type("T", (), {"accelerator": _Accel()})()
    get_mask = trl.GRPOTrainer.get_high_entropy_mask
    g = torch.Generator().manual_seed(0)
    entropies = torch.rand(5, 7, generator=g).round(decimals=1)  # ties
    mask = (torch.rand(5, 7, generator=g) > 0.3).long()
    for quantile in (0.0, 0.1, 0.25, 0.5, 0.8, 1.0):
        theirs = get_mask(fake, entropies, mask, 1 - quantile)
        ours = high_entropy_mask(entropies, mask, entropy_threshold(entropies[mask.bool()], quantile))
        assert torch.equal(ours.bool(), theirs), quantile
    empty = torch.zeros_like(mask)
    assert not get_mask(fake, entropies, empty, 0.5).any()
    assert not high_entropy_mask(entropies, empty, entropy_threshold(entropies[empty.bool()], 0.5)).any()
