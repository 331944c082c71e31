"""The ``vespo`` loss type: smooth sequence-level soft clipping (arXiv 2602.10693, as TRL 1.16 has it).

Each sequence gets one weight from its importance ratio ``w = exp(sum of its token log-ratios)`` (clamped in
log space to [log 1e-8, 20], the sampler's token ratios folded in when there is one): the gamma shape
``phi(w) = exp(lambda) * w**k * exp(-lambda * w)``, equal to 1 at w = 1, falling away on both sides, with
``(k, lambda)`` = ``(vespo_k_pos, vespo_lambda_pos)`` for a non-negative advantage and ``(vespo_k_neg,
vespo_lambda_neg)`` otherwise (TRL's defaults 2, 3 and 3, 2). ``phi`` is detached and weighs the REINFORCE term
``-A * log pi``; normalised as ``dapo``. The sampler's correction is inside ``phi``, so it does not multiply the
loss again (``corrects_sampler = False``); with vLLM, a sequence-level correction rule is refused, as TRL refuses it. It
has no clipping bounds (``delta``, ``epsilon_high`` refused) and computes its sequence weights itself:
``importance_sampling_level = "sequence"`` runs with the warning TRL gives.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from grpo_core.algorithm.loss_sapo import _no_clipping_bounds
from grpo_core.algorithm.loss_types import DAPO, LossInputs, LossType

if TYPE_CHECKING:
    import torch

K_POS, LAMBDA_POS, K_NEG, LAMBDA_NEG = 2.0, 3.0, 3.0, 2.0  # TRL's GRPOConfig defaults
LOWER = math.log(1e-8)


class VESPO(LossType):
    """``-sg(phi(w_seq)) * A * log pi``, normalised as ``dapo``."""

    name = "vespo"
    corrects_sampler = False  # the sampler's ratio is folded into w_seq

    def surrogate(self, x: LossInputs) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        phi = self.weights(x).detach()
        return -phi * x.advantages * x.per_token_logps, {"vespo/phi_seq_mean": phi}

    def weights(self, x: LossInputs) -> torch.Tensor:
        """``phi(w)`` per sequence, ``[B, 1]`` (TRL's ``get_gamma_weights``)."""
        log_ratio = x.log_ratio.detach().clamp(-20.0, 20.0)
        seq = (log_ratio * x.mask).sum(-1, keepdim=True)
        if x.importance_sampling_ratio is not None:
            seq = seq + x.importance_sampling_ratio.log().clamp(LOWER, 20.0).sum(-1, keepdim=True)
        log_w = seq.clamp(LOWER, 20.0)
        nonneg = (x.advantages >= 0).to(log_w.dtype)
        k = nonneg * self.option("vespo_k_pos", K_POS) + (1 - nonneg) * self.option("vespo_k_neg", K_NEG)
        lam = (nonneg * self.option("vespo_lambda_pos", LAMBDA_POS)
               + (1 - nonneg) * self.option("vespo_lambda_neg", LAMBDA_NEG)).clamp(min=1e-4)
        return (lam + k * log_w - lam * log_w.exp()).exp().nan_to_num(nan=0.0, posinf=0.0, neginf=0.0)

    normalise = DAPO.normalise

    @classmethod
    def config_problems(cls, sections: Any) -> list[tuple[tuple[str, str], str]]:
        problems = _no_clipping_bounds(sections, cls.name)
        rule = sections["generation"].importance_sampling
        if sections["generation"].backend == "vllm" and rule not in ("none", "token_truncate", "token_mask"):
            problems.append((("generation", "importance_sampling"),
                             f'loss_type = "vespo" folds the sampler\'s per-token ratios into its sequence weight: '
                             f'use "token_truncate" or "token_mask", not {rule!r}'))
        return problems

    @classmethod
    def config_warnings(cls, sections: Any) -> list[str]:
        if sections["grpo"].importance_sampling_level != "token":
            return ['grpo.loss_type = "vespo" computes its sequence-level weights itself: '
                    'importance_sampling_level should be "token" (the default)']
        return []
