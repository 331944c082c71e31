"""The ``sapo`` loss type: soft adaptive policy optimisation (Gao et al. 2025, arXiv 2511.20347).

In place of the hard clip, a sigmoid gate of the ratio: ``-(4 / tau) * sigmoid(tau * (ratio - 1)) * A``, whose
gradient at ratio 1 is the policy gradient and fades smoothly as the ratio leaves 1; ``tau`` is
``sapo_temperature_pos`` for tokens with a positive advantage and ``sapo_temperature_neg`` otherwise (TRL's
defaults 1.0 and 1.05). Normalised as ``grpo`` (each sequence's token mean, averaged over sequences), as in TRL
1.16. It has no clipping bounds: ``delta`` and an ``epsilon_high`` other than ``epsilon`` are refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from grpo_core.algorithm.loss_types import GRPO, LossInputs, LossType

if TYPE_CHECKING:
    import torch

TEMPERATURE_POS, TEMPERATURE_NEG = 1.0, 1.05  # TRL's GRPOConfig defaults


class SAPO(LossType):
    """``-(4 / tau) * sigmoid(tau * (ratio - 1)) * A``, normalised as ``grpo``."""

    name = "sapo"

    def surrogate(self, x: LossInputs) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        pos = self.option("sapo_temperature_pos", TEMPERATURE_POS)
        neg = self.option("sapo_temperature_neg", TEMPERATURE_NEG)
        positive = (x.advantages > 0).to(x.ratio.dtype)
        tau = positive * pos + (1 - positive) * neg
        return -((tau * (x.ratio - 1)).sigmoid() * 4 / tau) * x.advantages, {}

    normalise = GRPO.normalise

    @classmethod
    def config_problems(cls, sections: Any) -> list[tuple[tuple[str, str], str]]:
        return _no_clipping_bounds(sections, cls.name)


def _no_clipping_bounds(sections: Any, name: str) -> list[tuple[tuple[str, str], str]]:
    """A loss type without hard clipping refuses the keys that set clipping bounds (TRL ignores them)."""
    g, problems = sections["grpo"], []
    if g.delta is not None:
        problems.append((("grpo", "delta"), f"does not apply to loss_type = \"{name}\" (it has no clipping): "
                                            "remove it"))
    if g.epsilon_high is not None and g.epsilon_high != g.epsilon:
        problems.append((("grpo", "epsilon_high"), f"does not apply to loss_type = \"{name}\" (it has no "
                                                   "clipping): remove it"))
    return problems
