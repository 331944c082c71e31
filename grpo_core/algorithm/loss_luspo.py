"""The ``luspo`` loss type: length-unbiased sequence policy optimisation (arXiv 2602.05261, as TRL 1.16 has it).

The clipped surrogate (``delta`` and ``epsilon_high`` as for ``grpo``), each sequence's masked token SUM (not
mean, so a sequence weighs by its length), averaged over the micro-batch's sequences and divided by
``grad_accum_steps``. Meant for ``importance_sampling_level = "sequence"`` (one GSPO ratio per sequence); at token
level it runs, with the warning TRL gives.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from grpo_core.algorithm.loss_types import LossInputs, LossType

if TYPE_CHECKING:
    import torch


class LUSPO(LossType):
    """The clipped surrogate; per-sequence token sums averaged over sequences."""

    name = "luspo"

    def normalise(self, per_token_loss: torch.Tensor, x: LossInputs) -> torch.Tensor:
        return (per_token_loss * x.mask).sum() / x.rows / x.grad_accum_steps

    @classmethod
    def config_warnings(cls, sections: Any) -> list[str]:
        if sections["grpo"].importance_sampling_level != "sequence":
            return ['grpo.loss_type = "luspo" is meant for importance_sampling_level = "sequence" (the paper\'s '
                    "setup); it runs at token level"]
        return []
