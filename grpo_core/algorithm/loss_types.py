"""Loss types, what ``[grpo] loss_type`` names: an extension point, registered through ``grpo_register_loss_types``.

A loss type owns the two parts of the policy loss (:func:`grpo_core.algorithm.loss.grpo_loss`) on which
TRL's loss types differ (``GRPOTrainer._compute_loss``, TRL 1.16):

``surrogate``          the per-token objective from the importance ratio, the advantages and the log-probs
                       (by default PPO's clipped surrogate: DAPO's asymmetric bounds, the two-sided ``delta``),
                       and the per-token indicators whose masked means it logs (``clip_ratio/*`` by default)
``normalise``          how one micro-batch's masked per-token losses become its share of the step's loss: the
                       denominator (its sequences, its tokens, the generation batch's tokens, a constant) and
                       the division by ``grad_accum_steps``
``corrects_sampler``   whether the sampler's importance ratio (:mod:`grpo_core.algorithm.sampler_correction`)
                       multiplies the surrogate (True); one that folds that ratio into its own weights says False

What stays with ``grpo_loss``, the same for every loss type as in TRL: the importance ratio ``exp(logp - old)``
(``[grpo] importance_sampling_level``: per token, or GSPO's one ratio per sequence, which reaches ``surrogate`` as
a ``[B, 1]`` tensor and combines with any loss type), the off-policy sequence mask, the k3 KL term added after the
surrogate, and the logged metrics (the indicators' masked means, ``kl``, ``loss``).

The built-ins here, for one micro-batch of a generation batch split into ``grad_accum_steps``:

``grpo``     mean over sequences of (masked token mean per sequence), / grad_accum_steps
``bnpo``     masked token mean over the micro-batch, / grad_accum_steps
``dr_grpo``  masked token sum / (rows * max_completion_length), / grad_accum_steps
``dapo``     masked token sum / ``items`` (completion tokens of the whole generation batch, so the accumulated
             loss is a global token mean)

TRL's newer loss types are one module each, registered the same way: ``loss_cispo``, ``loss_sapo``,
``loss_luspo``, ``loss_vespo`` (``docs/algorithms.md`` has their formulas and papers).

A micro-batch may itself be run as several row slices (the trainer's ``micro_batch_tokens`` memory budget):
``rows`` and ``tokens`` are the whole micro-batch's, so each slice's loss is its exact share and the slices'
losses (and gradients) sum to the micro-batch's.

*Adding a loss type* (``loss_cispo`` is a complete example): a subclass of :class:`LossType` with a ``name``,
its ``normalise`` and, where its objective is not the clipped one, its ``surrogate``; a plugin registers the
class (its own factory, called with the run config)::

    @hookimpl
    def grpo_register_loss_types(register):
        register("cispo", CISPO)

A loss type with parameters of its own (SAPO's temperatures, VESPO's gamma shape) reads them from the run
config it is built with (:meth:`LossType.option`, ``[grpo]`` keys); one that refuses other settings says so
with a ``config_problems(sections) -> [(key, message)]`` classmethod (run by ``grpo_core.config``; ``sections``
maps each section's name to its dataclass, ``sections["grpo"].beta``), and one that only advises against them
with ``config_warnings(sections) -> [message]`` (printed before the run).
The trainer does not change: it builds the registered loss type and hands it to ``grpo_loss``. The ``trl``
trainer backend runs TRL's own loss of the same name, and refuses a name TRL does not have.

Imports no torch (the tensors' own methods do the work), so that the trainer's plugin registers the built-ins
without loading it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class LossInputs:
    """What a loss type sees of one micro-batch (or row slice of one), ``[B, K]`` tensors."""

    per_token_logps: torch.Tensor  # the policy's log-probs of the completion tokens (differentiable)
    ratio: torch.Tensor  # the importance ratio, 1 on-policy with the policy gradient (differentiable): [B, K] at
    # token level, exp(per_token_logps - old); [B, 1] at sequence level (GSPO), exp of the masked mean log-ratio
    log_ratio: torch.Tensor  # per_token_logps - old, [B, K], whatever the level (VESPO's sequence weight sums it)
    advantages: torch.Tensor  # [B, 1] (one per sequence) or [B, K]
    mask: torch.Tensor  # the completion mask, in the log-probs' dtype
    epsilon: float  # the lower clipping bound, 1 - epsilon
    epsilon_high: float  # the upper clipping bound, 1 + epsilon_high
    delta: float | None  # the two-sided bound of the unclipped branch (None: off)
    importance_sampling_ratio: torch.Tensor | None  # the sampler's correction, [B, K] or [B, 1] (None: off)
    rows: int  # sequences of the micro-batch this slice belongs to
    tokens: torch.Tensor | int | None  # completion tokens of that micro-batch (None: this slice's own)
    items: torch.Tensor | int | None  # completion tokens of the whole generation batch (None: this slice's own)
    max_completion_length: int | None
    grad_accum_steps: int


class LossType:
    """One loss type (see the module docs); this base class is the clipped surrogate with no normaliser."""

    name: ClassVar[str] = ""
    corrects_sampler: ClassVar[bool] = True
    #: the normaliser sums per-token terms: with one ratio per sequence (GSPO) a sequence then weighs by its length
    sums_tokens: ClassVar[bool] = False

    def __init__(self, config: Any = None) -> None:
        self.config = config  # the run's RunConfig (None outside a run): where a loss type reads its own keys

    def option(self, key: str, default: Any) -> Any:
        """``[grpo] key`` of the run this loss type was built for (``default`` outside a run)."""
        return default if self.config is None else getattr(self.config.grpo, key, default)

    @classmethod
    def config_problems(cls, sections: Any) -> list[tuple[tuple[str, str], str]]:
        """``[(key, message)]``: settings this loss type refuses (exit 2 before the run)."""
        return []

    @classmethod
    def config_warnings(cls, sections: Any) -> list[str]:
        """Settings this loss type accepts but advises against, one line each (printed before the run)."""
        if cls.sums_tokens and sections["grpo"].importance_sampling_level == "sequence":
            return [f'grpo.importance_sampling_level = "sequence" with loss_type = "{cls.name}": its normaliser '
                    "sums per-token terms, so each sequence weighs by its length instead of the per-sequence "
                    'objective (GSPO\'s setup is loss_type = "grpo")']
        return []

    def surrogate(self, x: LossInputs) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Per-token losses ``[B, K]`` and per-token indicators (no gradient) whose masked means are logged."""
        coef_1 = x.ratio
        coef_2 = coef_1.clamp(1 - x.epsilon, 1 + x.epsilon_high)
        if x.delta is not None:  # two-sided clipping of the unclipped branch
            coef_1 = coef_1.clamp(max=x.delta)
        per_token_loss = -(coef_1 * x.advantages).min(coef_2 * x.advantages)
        dtype = x.mask.dtype
        low = ((coef_1.detach() < 1 - x.epsilon) & (x.advantages < 0)).to(dtype)
        high = ((coef_1.detach() > 1 + x.epsilon_high) & (x.advantages > 0)).to(dtype)
        return per_token_loss, {"clip_ratio/low_mean": low, "clip_ratio/high_mean": high,
                                "clip_ratio/region_mean": low.maximum(high)}

    def normalise(self, per_token_loss: torch.Tensor, x: LossInputs) -> torch.Tensor:
        """This micro-batch's share of the step's loss (a scalar) from its per-token losses."""
        raise NotImplementedError(f"loss type {self.name or type(self).__name__!r} has no normalise()")


def _as_tensor(value: torch.Tensor | int, like: torch.Tensor) -> torch.Tensor:
    """``torch.as_tensor(value, dtype=like.dtype)``: a number becomes a CPU scalar, a tensor keeps its device."""
    if hasattr(value, "to"):
        return value.to(like.dtype)  # type: ignore[union-attr]
    return like.new_tensor(value, device="cpu")


class GRPO(LossType):
    """Each sequence's token mean, averaged over the micro-batch's sequences."""

    name = "grpo"

    def normalise(self, per_token_loss: torch.Tensor, x: LossInputs) -> torch.Tensor:
        mask = x.mask
        return ((per_token_loss * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).sum() / x.rows / x.grad_accum_steps


class BNPO(LossType):
    """The token mean over the micro-batch."""

    name = "bnpo"
    sums_tokens = True

    def normalise(self, per_token_loss: torch.Tensor, x: LossInputs) -> torch.Tensor:
        mask = x.mask
        tokens = mask.sum() if x.tokens is None else _as_tensor(x.tokens, mask)
        return (per_token_loss * mask).sum() / tokens.clamp(min=1.0) / x.grad_accum_steps


class DrGRPO(LossType):
    """The token sum over a constant: rows times the longest completion."""

    name = "dr_grpo"
    sums_tokens = True

    def normalise(self, per_token_loss: torch.Tensor, x: LossInputs) -> torch.Tensor:
        if x.max_completion_length is None:
            raise ValueError("loss_type 'dr_grpo' needs max_completion_length")
        return (per_token_loss * x.mask).sum() / (x.rows * x.max_completion_length) / x.grad_accum_steps


class DAPO(LossType):
    """The token sum over the generation batch's tokens: the accumulated loss is a global token mean."""

    name = "dapo"
    sums_tokens = True

    def normalise(self, per_token_loss: torch.Tensor, x: LossInputs) -> torch.Tensor:
        mask = x.mask
        items = mask.sum() if x.items is None else _as_tensor(x.items, mask)
        return (per_token_loss * mask).sum() / items.clamp(min=1.0)


#: the built-in loss types, in the order the config's error messages list them (the trainer's plugin registers
#: each; :func:`grpo_core.algorithm.loss.grpo_loss` also takes their names)
BUILTIN_LOSS_TYPES: tuple[type[LossType], ...] = (GRPO, BNPO, DrGRPO, DAPO)
