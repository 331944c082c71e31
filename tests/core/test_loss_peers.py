"""Our loss types against verl's and Unsloth's own code, on identical tensors (fp32, loss and gradient at 1e-5).

The peers' functions come from the releases pinned in ``pyproject.toml`` (``[tool.grpo-toolkit] peer-sources``:
verl 0.9.1's ``verl/trainer/ppo/core_algos.py``, unsloth_zoo 2026.10.9's ``unsloth_zoo/rl_replacements.py``),
installed by ``scripts/setup.sh`` and read out of the installed files by :mod:`tests.core.peer_code` (neither
package imports without ray or a GPU; the function bodies run unchanged). Each case perturbs the old log-probs so
that its clipping (or gate, or weight) is exercised, and asserts it was. Where a peer differs from TRL and us, the
difference is asserted to exist, so the list in ``docs/algorithms.md`` ("Peers") stays true.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

from grpo_core.algorithm.advantages import group_advantages  # noqa: E402
from grpo_core.algorithm.loss import BUILTIN, grpo_loss  # noqa: E402
from tests.core import peer_code  # noqa: E402

ROWS, WIDTH, MAX_COMPLETION, GRAD_ACCUM = 6, 8, 10, 2  # WIDTH < MAX_COMPLETION: Dr. GRPO's constant shows
LENGTHS = [8, 5, 3, 8, 6, 1]
ADVANTAGES = [1.3, -0.7, 0.4, -1.1, 0.9, -0.5]
EPSILON, EPSILON_HIGH = 0.2, 0.28
BETA = 0.04
REST_OF_BATCH = 7  # completion tokens of the generation batch's other micro-batch (dapo's global token count)


class ActorConfig:
    """The fields of verl's ``verl.workers.config.ActorConfig`` that its policy losses read, at verl's defaults
    (``clip_ratio*`` 0.2, ``clip_ratio_c`` 3.0, ``tau_pos`` 1.0, ``tau_neg`` 1.05), and its ``global_batch_info``."""

    def __init__(self, **fields):
        self.__dict__.update(dict(clip_ratio=0.2, clip_ratio_low=0.2, clip_ratio_high=0.2, clip_ratio_c=3.0,
                                  tau_pos=1.0, tau_neg=1.05), **fields)
        self.global_batch_info: dict = {}

    def get(self, key, default=None):
        return getattr(self, key, default)


class AlgoConfig:
    """verl's algorithm config: only ``isinstance`` checks see it here."""


class _Options:
    """The [grpo] keys a loss type reads (``LossType.option``), as a run config would give them."""

    def __init__(self, **keys):
        self.grpo = type("Grpo", (), keys)()


@pytest.fixture(scope="module")
def verl():
    functional = peer_code.load("verl", "verl/utils/torch_functional.py", ["masked_sum", "masked_mean"],
                                {"torch": torch})
    namespace = {"torch": torch, "np": np, "defaultdict": defaultdict, "ActorConfig": ActorConfig,
                 "AlgoConfig": AlgoConfig, "verl_F": functional}
    return peer_code.load("verl", "verl/trainer/ppo/core_algos.py", [
        "agg_loss", "compute_policy_loss_vanilla", "compute_policy_loss_gspo", "compute_policy_loss_cispo",
        "compute_policy_loss_sapo", "kl_penalty", "kl_penalty_forward", "compute_grpo_outcome_advantage",
    ], namespace)


@pytest.fixture(scope="module")
def unsloth():
    return peer_code.load("unsloth-zoo", "unsloth_zoo/rl_replacements.py", ["grpo_compute_loss"],
                          {"torch": torch, "math": math, "logging": logging})


def _batch(seed: int, shift: list[float], lengths: list[int] = LENGTHS) -> dict:
    """Per-token log-probs, old ones a few updates away (a shift per row plus token noise), reference ones."""
    g = torch.Generator().manual_seed(seed)
    logps = -0.1 - 2.0 * torch.rand(ROWS, WIDTH, generator=g)
    old = logps - torch.tensor(shift)[:, None] + 0.3 * torch.randn(ROWS, WIDTH, generator=g)
    ref = logps + 0.5 * torch.randn(ROWS, WIDTH, generator=g)
    mask = (torch.arange(WIDTH)[None] < torch.tensor(lengths)[:, None]).float()
    return {"logps": logps, "old": old, "ref": ref, "mask": mask, "advantages": torch.tensor(ADVANTAGES)}


# row shifts of log pi - log pi_old: row 0 (A > 0) above 1 + eps_high, row 1 (A < 0) past verl's dual clip 3,
# row 3 (A < 0) below 1 - eps, the others near 1
SHIFT = [0.6, 1.3, 0.05, -0.6, -0.1, 0.2]


def _ours(b: dict, loss_type: str, **kwargs) -> tuple[torch.Tensor, torch.Tensor, dict]:
    """Our loss, its gradient with respect to the per-token log-probs, and its metrics."""
    logps = b["logps"].clone().requires_grad_(True)
    options = kwargs.pop("options", None)
    loss, metrics = grpo_loss(logps, b["mask"], b["advantages"], old_per_token_logps=b["old"],
                              loss_type=BUILTIN[loss_type](options), max_completion_length=MAX_COMPLETION, **kwargs)
    loss.backward()
    return loss.detach(), logps.grad, metrics


def _verl(verl, b: dict, name: str, mode: str, config: ActorConfig, kl: bool = True):
    """verl's actor loss (``verl/workers/utils/losses.py`` ``ppo_loss``: the policy loss ``name`` plus
    ``kl_loss_coef`` times the ``low_var_kl`` penalty aggregated by the same mode), its gradient with respect to the
    log-probs, and its policy-loss metrics."""
    logps = b["logps"].clone().requires_grad_(True)
    advantages = b["advantages"][:, None] * b["mask"]  # verl's advantages are per token
    loss, metrics = getattr(verl, name)(old_log_prob=b["old"], log_prob=logps, advantages=advantages,
                                        response_mask=b["mask"].bool(), loss_agg_mode=mode, config=config)
    if kl:
        kld = verl.kl_penalty(logprob=logps, ref_logprob=b["ref"], kl_penalty="low_var_kl")
        loss = loss + BETA * verl.agg_loss(loss_mat=kld, loss_mask=b["mask"].bool(), loss_agg_mode=mode,
                                           **config.global_batch_info)
    loss.backward()
    return loss.detach(), logps.grad, metrics


def _close(ours: tuple, theirs: tuple) -> None:
    torch.testing.assert_close(ours[0], theirs[0], rtol=0, atol=1e-5)
    torch.testing.assert_close(ours[1], theirs[1], rtol=0, atol=1e-5)
    assert ours[0].abs().item() > 1e-3 and ours[1].abs().sum().item() > 1e-3  # a real loss, a real gradient


# ---- verl ----

# (our loss type, verl's loss_agg_mode, gradient accumulation): the normalisers are the same sums over the same
# counts, given verl's global_batch_info for a micro-batch of a generation batch split in GRAD_ACCUM
CLIPPED = [("grpo", "seq-mean-token-mean", GRAD_ACCUM), ("bnpo", "token-mean", 1), ("dapo", "token-mean", GRAD_ACCUM),
           ("dr_grpo", "seq-mean-token-sum-norm", GRAD_ACCUM), ("luspo", "seq-mean-token-sum", GRAD_ACCUM)]


def _global_batch_info(b: dict, loss_type: str, grad_accum: int) -> dict:
    items = b["mask"].sum() + REST_OF_BATCH
    return {"dp_size": 1, "batch_num_tokens": None if loss_type == "bnpo" else items,
            "global_batch_size": ROWS * grad_accum, "loss_scale_factor": MAX_COMPLETION}


@pytest.mark.parametrize("loss_type,mode,grad_accum", CLIPPED)
def test_clipped_loss_types_match_verl_vanilla_with_dual_clip(verl, loss_type, mode, grad_accum):
    """grpo, bnpo, dapo, dr_grpo, luspo (token level, ``delta = 3``, k3 KL without the ratio's correction) =
    verl's ``compute_policy_loss_vanilla`` (``clip_ratio_c = 3``) aggregated by the matching mode, plus its
    ``low_var_kl`` loss."""
    b = _batch(1, SHIFT)
    info = _global_batch_info(b, loss_type, grad_accum)
    ours = _ours(b, loss_type, ref_per_token_logps=b["ref"], epsilon=EPSILON, epsilon_high=EPSILON_HIGH, delta=3.0,
                 beta=BETA, kl_bias_correction=False, grad_accum_steps=grad_accum,
                 num_items_in_batch=info["batch_num_tokens"])
    config = ActorConfig(clip_ratio_low=EPSILON, clip_ratio_high=EPSILON_HIGH, clip_ratio_c=3.0)
    config.global_batch_info.update(info)
    theirs = _verl(verl, b, "compute_policy_loss_vanilla", mode, config)
    _close(ours, theirs)
    assert abs(ours[2]["clip_ratio/region_mean"].item() - theirs[2]["actor/pg_clipfrac"]) < 1e-6
    assert ours[2]["clip_ratio/region_mean"].item() > 0  # clipped tokens
    assert theirs[2]["actor/pg_clipfrac_lower"] > 0  # and tokens past the dual clip


def test_verl_differs_on_the_dual_clip_the_dr_grpo_constant_and_empty_rows(verl):
    """verl's vanilla loss always applies its dual clip (``clip_ratio_c``, 3 by default), which TRL and we apply
    only with ``delta``; ``seq-mean-token-sum-norm`` divides by the tensor's width unless ``loss_scale_factor`` is
    set, where Dr. GRPO (TRL, us) divides by ``max_completion_length``; and without ``global_batch_size`` its
    sequence means leave fully masked rows out of the count."""
    b = _batch(2, SHIFT)
    plain = {"epsilon": EPSILON, "epsilon_high": EPSILON_HIGH}
    config = ActorConfig(clip_ratio_low=EPSILON, clip_ratio_high=EPSILON_HIGH)  # clip_ratio_c: verl's default, 3
    default = _verl(verl, b, "compute_policy_loss_vanilla", "token-mean", config, kl=False)
    without_delta = _ours(b, "bnpo", **plain)
    with_delta = _ours(b, "bnpo", delta=3.0, **plain)
    _close(with_delta, default)
    assert (without_delta[0] - default[0]).abs().item() > 1e-3  # row 1's ratio past 3 with A < 0

    config = ActorConfig(clip_ratio_low=EPSILON, clip_ratio_high=EPSILON_HIGH, clip_ratio_c=1e9)  # dual clip off
    width_normalised = _verl(verl, b, "compute_policy_loss_vanilla", "seq-mean-token-sum-norm", config, kl=False)
    dr_grpo = _ours(b, "dr_grpo", **plain)
    torch.testing.assert_close(width_normalised[0], dr_grpo[0] * MAX_COMPLETION / WIDTH, rtol=1e-6, atol=0)
    assert (width_normalised[0] - dr_grpo[0]).abs().item() > 1e-3

    lengths = [8, 0, 3, 8, 0, 1]
    b = _batch(3, SHIFT, lengths)
    verl_mean = _verl(verl, b, "compute_policy_loss_vanilla", "seq-mean-token-mean", config, kl=False)
    grpo = _ours(b, "grpo", **plain)
    nonempty = sum(n > 0 for n in lengths)
    torch.testing.assert_close(verl_mean[0], grpo[0] * ROWS / nonempty, rtol=1e-6, atol=0)
    assert (verl_mean[0] - grpo[0]).abs().item() > 1e-3


# GSPO: (our loss type at sequence level, verl's mode); the paper's clipping bounds, 3e-4 and 4e-4
GSPO = [("grpo", "seq-mean-token-mean"), ("dapo", "token-mean"), ("luspo", "seq-mean-token-sum")]
GSPO_LOW, GSPO_HIGH = 3e-4, 4e-4


@pytest.mark.parametrize("loss_type,mode", GSPO)
def test_sequence_level_matches_verl_gspo(verl, loss_type, mode):
    """``importance_sampling_level = "sequence"`` = verl's ``compute_policy_loss_gspo``: TRL's ``[B, 1]`` ratio
    ``exp(mean log-ratio)`` and verl's per-token ``sg(s_i) pi / sg(pi)`` have the same value and the same gradient
    once aggregated."""
    b = _batch(4, [0.2, -0.3, 0.0002, 0.1, -0.0002, 0.05])
    info = _global_batch_info(b, loss_type, GRAD_ACCUM)
    ours = _ours(b, loss_type, ref_per_token_logps=b["ref"], epsilon=GSPO_LOW, epsilon_high=GSPO_HIGH, beta=BETA,
                 kl_bias_correction=False, importance_sampling_level="sequence", grad_accum_steps=GRAD_ACCUM,
                 num_items_in_batch=info["batch_num_tokens"])
    config = ActorConfig(clip_ratio_low=GSPO_LOW, clip_ratio_high=GSPO_HIGH)
    config.global_batch_info.update(info)
    theirs = _verl(verl, b, "compute_policy_loss_gspo", mode, config)
    _close(ours, theirs)
    assert 0 < ours[2]["clip_ratio/region_mean"].item() < 1 and 0 < theirs[2]["actor/pg_clipfrac"] < 1


def test_verl_gspo_caps_the_sequence_log_ratio_at_10(verl):
    """verl clamps GSPO's log-ratio at 10 (TRL and we do not): a sequence whose mean log-ratio is 11 and whose
    advantage is negative (so the unclipped branch counts) gets a loss e^10 where ours is e^11."""
    b = _batch(5, [11.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    b["advantages"] = torch.tensor([-1.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    b["old"][0] = b["logps"][0] - 11.0
    ours = _ours(b, "grpo", importance_sampling_level="sequence")
    theirs = _verl(verl, b, "compute_policy_loss_gspo", "seq-mean-token-mean", ActorConfig(), kl=False)
    torch.testing.assert_close(ours[0], torch.tensor(math.exp(11) / ROWS), rtol=1e-5, atol=0)
    torch.testing.assert_close(theirs[0], torch.tensor(math.exp(10) / ROWS), rtol=1e-5, atol=0)


CISPO_MAX = 1.3  # our epsilon_high, cispo's ε_max: verl's clip_ratio_high is ε_max - 1


def test_cispo_matches_verl_cispo(verl):
    """``cispo`` (``epsilon_high`` the weight's upper bound) = verl's ``compute_policy_loss_cispo`` with
    ``clip_ratio_high = epsilon_high - 1`` and ``clip_ratio_low = 1`` (a lower bound of 0: never reached)."""
    b = _batch(6, SHIFT)
    items = b["mask"].sum() + REST_OF_BATCH
    ours = _ours(b, "cispo", ref_per_token_logps=b["ref"], epsilon_high=CISPO_MAX, beta=BETA,
                 kl_bias_correction=False, num_items_in_batch=items)
    config = ActorConfig(clip_ratio_low=1.0, clip_ratio_high=CISPO_MAX - 1)
    config.global_batch_info.update(dp_size=1, batch_num_tokens=items, global_batch_size=None, loss_scale_factor=None)
    theirs = _verl(verl, b, "compute_policy_loss_cispo", "token-mean", config)
    _close(ours, theirs)
    assert 0 < ours[2]["cispo_clip_ratio"].item() < 1 and 0 < theirs[2]["actor/pg_clipfrac"] < 1


def test_verl_cispo_also_clips_from_below(verl):
    """verl clips CISPO's weight to ``[1 - clip_ratio_low, 1 + clip_ratio_high]`` (0.2 each by default); TRL
    (MiniMax-M1) and we clip it from above only: a token whose ratio is below 0.8 weighs 0.8 there."""
    b = _batch(7, SHIFT)
    ours = _ours(b, "cispo", epsilon_high=1.2)
    theirs = _verl(verl, b, "compute_policy_loss_cispo", "token-mean", ActorConfig(), kl=False)
    assert ((b["logps"] - b["old"]).exp()[b["mask"].bool()] < 0.8).any()
    assert (ours[0] - theirs[0]).abs().item() > 1e-3


def test_sapo_matches_verl_sapo(verl):
    """``sapo`` = verl's ``compute_policy_loss_sapo`` (which always aggregates ``seq-mean-token-mean``, our
    ``grpo`` normaliser), at temperatures other than the defaults."""
    b = _batch(8, SHIFT)
    options = _Options(sapo_temperature_pos=0.8, sapo_temperature_neg=1.3)
    ours = _ours(b, "sapo", options=options, ref_per_token_logps=b["ref"], beta=BETA, kl_bias_correction=False,
                 grad_accum_steps=GRAD_ACCUM)
    config = ActorConfig(tau_pos=0.8, tau_neg=1.3)
    config.global_batch_info.update(dp_size=1, batch_num_tokens=None, global_batch_size=ROWS * GRAD_ACCUM,
                                    loss_scale_factor=None)
    theirs = _verl(verl, b, "compute_policy_loss_sapo", "seq-mean-token-mean", config)
    _close(ours, theirs)
    plain = _ours(b, "grpo", epsilon=1e9)  # the unclipped surrogate: the gate changed the loss
    assert (plain[0] - ours[0]).abs().item() > 1e-3


def test_k3_kl_matches_verl_low_var_kl_and_differs_where_verl_clamps(verl):
    """Our k3 term (without the ratio's bias correction) = verl's ``kl_penalty(..., "low_var_kl")``, value and
    gradient, for moderate gaps; verl caps the estimate at 10 (its gradient then 0, from ``ref - logp`` about
    2.53 up); and with ``use_bias_correction_kl`` (TRL's default) ours is the estimate times the ratio."""
    b = _batch(9, SHIFT)
    b["ref"][0, 0] = b["logps"][0, 0] + 4.0  # exp(4) - 4 - 1 = 49.6: capped by verl
    on_policy = {**b, "old": b["logps"]}
    ours = _ours(on_policy, "dapo", ref_per_token_logps=b["ref"], beta=1.0, kl_bias_correction=False)
    plain = _ours(on_policy, "dapo")  # the policy term alone: the difference is the KL term
    logps = b["logps"].clone().requires_grad_(True)
    kld = verl.kl_penalty(logprob=logps, ref_logprob=b["ref"], kl_penalty="low_var_kl")
    theirs = verl.agg_loss(loss_mat=kld, loss_mask=b["mask"].bool(), loss_agg_mode="token-mean")
    theirs.backward()
    capped = torch.zeros_like(b["mask"], dtype=torch.bool)
    capped[0, 0] = True
    n = b["mask"].sum()
    our_kl_grad = ours[1] - plain[1]
    torch.testing.assert_close(our_kl_grad[~capped], logps.grad[~capped], rtol=0, atol=1e-6)
    assert logps.grad[0, 0].item() == 0 and our_kl_grad[0, 0].item() < -1e-2
    uncapped_kl = (ours[0] - plain[0]) * n
    torch.testing.assert_close(uncapped_kl - (math.exp(4) - 5), theirs.detach() * n - 10.0, rtol=0, atol=1e-4)

    corrected = _ours(b, "dapo", ref_per_token_logps=b["ref"], beta=1.0, kl_bias_correction=True)
    uncorrected = _ours(b, "dapo", ref_per_token_logps=b["ref"], beta=1.0, kl_bias_correction=False)
    assert (corrected[2]["kl"] - uncorrected[2]["kl"]).abs().item() > 1e-3


def test_group_advantages_match_verl_grpo_outcome_advantage(verl):
    """``scale_rewards = "group"`` = verl's ``compute_grpo_outcome_advantage`` given our epsilon (1e-4, TRL's);
    verl's default epsilon is 1e-6. ``scale_rewards = "none"`` = ``norm_adv_by_std_in_grpo = False`` (Dr. GRPO)."""
    g = torch.Generator().manual_seed(10)
    rewards = torch.rand(12, generator=g).round(decimals=1)
    rewards[8:] = torch.tensor([0.5, 0.5, 0.5, 0.5001])  # one group of nearly equal rewards: a tiny std
    index = np.repeat(np.arange(3), 4)
    token_rewards = torch.zeros(12, 5)
    token_rewards[:, -1] = rewards
    mask = torch.ones(12, 5)

    for scale, normalise in (("group", True), ("none", False)):
        ours, _ = group_advantages(rewards, 4, scale)
        theirs, _ = verl.compute_grpo_outcome_advantage(token_rewards, mask, index, epsilon=1e-4,
                                                        norm_adv_by_std_in_grpo=normalise)
        torch.testing.assert_close(ours, theirs[:, 0], rtol=0, atol=1e-5)
    ours, _ = group_advantages(rewards, 4, "group")
    default, _ = verl.compute_grpo_outcome_advantage(token_rewards.clone(), mask, index)
    assert (ours - default[:, 0]).abs().max().item() > 0.1  # the near-equal group: std 5e-5 next to epsilon


# ---- Unsloth ----

UNSLOTH = [(lt, level) for lt in ("grpo", "bnpo", "dr_grpo", "dapo", "cispo", "sapo", "luspo", "vespo")
           for level in ("token", "sequence")]
SAPO = {"sapo_temperature_pos": 0.8, "sapo_temperature_neg": 1.3}
VESPO = {"vespo_k_pos": 1.5, "vespo_lambda_pos": 2.5, "vespo_k_neg": 2.5, "vespo_lambda_neg": 1.5}


@pytest.mark.parametrize("loss_type,level", UNSLOTH)
def test_every_loss_type_matches_unsloth_grpo_compute_loss(unsloth, loss_type, level):
    """Every loss type at both importance-sampling levels, with ``delta``, asymmetric clipping, gradient
    accumulation, the k3 KL (bias-corrected at token level, not at sequence level) and, for dapo and luspo, the
    off-policy sequence mask = Unsloth's ``grpo_compute_loss`` (VESPO's gamma weights and the mask are TRL's
    ``get_gamma_weights`` and ``get_off_policy_mask``, which Unsloth's trainer hands it)."""
    b = _batch(11, SHIFT)
    epsilon_high = CISPO_MAX if loss_type == "cispo" else EPSILON_HIGH
    keys = {**(SAPO if loss_type == "sapo" else {}), **(VESPO if loss_type == "vespo" else {})}
    delta = 3.0 if loss_type in ("grpo", "bnpo", "dr_grpo", "dapo", "luspo") else None
    items = b["mask"].sum() + REST_OF_BATCH
    common = {"epsilon_high": epsilon_high, "delta": delta, "importance_sampling_level": level,
              "num_items_in_batch": items}
    if loss_type in ("dapo", "luspo"):  # row 3 (A < 0, old above the policy by 0.6 a token) is masked out
        common["off_policy_mask_threshold"] = 0.5
    correction = level == "token"
    ours = _ours(b, loss_type, options=_Options(**keys), ref_per_token_logps=b["ref"], epsilon=EPSILON,
                 beta=BETA, grad_accum_steps=GRAD_ACCUM, kl_bias_correction=correction, **common)

    trl_functions = {}
    if loss_type in ("vespo", "dapo", "luspo"):
        from trl import GRPOTrainer

        trl_functions = {"get_gamma_weights": GRPOTrainer.get_gamma_weights,
                         "get_off_policy_mask": GRPOTrainer.get_off_policy_mask}
    logps = b["logps"].clone().requires_grad_(True)
    loss, *_ = unsloth.grpo_compute_loss(
        b["ref"], logps, b["old"], None, torch.zeros(ROWS, WIDTH, dtype=torch.long), b["mask"], BETA,
        b["advantages"], loss_type=loss_type, epsilon_low=EPSILON, max_completion_length=MAX_COMPLETION,
        current_gradient_accumulation_steps=GRAD_ACCUM, use_bias_correction_kl=correction, **trl_functions, **common,
        **keys)
    loss.backward()
    _close(ours, (loss.detach(), logps.grad))
    # the clipping or the weight was exercised (sapo has no indicator: its gate is checked against the plain
    # surrogate in test_sapo_matches_verl_sapo, on the same shifts)
    indicators = {key: value.item() for key, value in ours[2].items() if "clip" in key or "phi" in key}
    if loss_type != "sapo":
        assert any(value > 0 and abs(value - 1) > 1e-3 for value in indicators.values()), indicators
    if "off_policy_mask_threshold" in common:
        from grpo_core.algorithm.loss import off_policy_mask

        kept = off_policy_mask(b["advantages"][:, None], b["logps"], b["old"], b["mask"], 0.5)
        assert 0 < kept.sum().item() < ROWS


def test_unsloth_caps_the_kl_term_at_10(unsloth):
    """Unsloth clamps the (bias-corrected) k3 term at 10 per token, where TRL and we do not."""
    b = _batch(12, SHIFT)
    b["ref"][0, 0] = b["logps"][0, 0] + 4.0
    ours = _ours(b, "dapo", ref_per_token_logps=b["ref"], beta=1.0)
    logps = b["logps"].clone().requires_grad_(True)
    loss, *_ = unsloth.grpo_compute_loss(b["ref"], logps, b["old"], None, torch.zeros(ROWS, WIDTH, dtype=torch.long),
                                         b["mask"], 1.0, b["advantages"], loss_type="dapo", epsilon_high=EPSILON,
                                         num_items_in_batch=b["mask"].sum(), use_bias_correction_kl=True)
    loss.backward()
    assert (ours[0] - loss.detach()).abs().item() > 1e-2
    assert logps.grad[0, 0].item() != pytest.approx(ours[1][0, 0].item(), abs=1e-3)
    torch.testing.assert_close(logps.grad[1:], ours[1][1:], rtol=0, atol=1e-5)
