"""The ``cispo`` loss type: clipped importance-sampling-weight policy optimisation (MiniMax-M1, ScaleRL).

Every token keeps its gradient: the importance ratio, clipped from above at ``epsilon_high`` (ε_max, ScaleRL
recommends 5) and detached, weighs the REINFORCE term ``-A * log pi``; the sum is normalised as ``dapo`` (a
global token mean over the generation batch). TRL 1.16's ``loss_type = "cispo"``, term for term: the clipped
fraction ``cispo_clip_ratio`` counts tokens with ``ratio > epsilon_high`` and a positive advantage.
``delta`` (two-sided clipping) does not apply: refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from grpo_core.algorithm.loss_types import DAPO, LossInputs, LossType

if TYPE_CHECKING:
    import torch


class CISPO(LossType):
    """``-sg(min(ratio, epsilon_high)) * A * log pi``, normalised as ``dapo``."""

    name = "cispo"
    sums_tokens = True

    def surrogate(self, x: LossInputs) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        weight = x.ratio.clamp(max=x.epsilon_high).detach()
        clipped = ((x.ratio.detach() > x.epsilon_high) & (x.advantages > 0)).to(x.mask.dtype)
        return -weight * x.advantages * x.per_token_logps, {"cispo_clip_ratio": clipped}

    normalise = DAPO.normalise

    @classmethod
    def config_warnings(cls, sections: Any) -> list[str]:
        lines = super().config_warnings(sections)
        if sections["grpo"].epsilon_high < 1:
            lines.append(f'grpo.epsilon_high = {sections["grpo"].epsilon_high:g} with loss_type = "cispo": it is the '
                         "clipped weight's upper bound, below an on-policy ratio of 1, so every token is clipped "
                         "(ScaleRL uses 5)")
        return lines

    @classmethod
    def config_problems(cls, sections: Any) -> list[tuple[tuple[str, str], str]]:
        if sections["grpo"].delta is not None:
            return [(("grpo", "delta"), "does not apply to loss_type = \"cispo\" (its only bound is epsilon_high, "
                                        "the ε_max of the clipped weight): remove it")]
        return []
