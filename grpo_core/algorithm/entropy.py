"""TRL 1.16's entropy options on tensors: the high-entropy token mask, the entropy bonus and its adaptive coefficient.

``[grpo] top_entropy_quantile = rho`` (< 1; "Beyond the 80/20 Rule", arXiv 2506.01939): only the tokens whose entropy
is at or above the ``1 - rho`` quantile of the micro-batch's completion-token entropies keep their policy loss
(:func:`entropy_threshold`, :func:`high_entropy_mask`: TRL's ``get_high_entropy_mask``). The quantile is taken over
the whole micro-batch, every rank's rows of it (TRL gathers them across processes): the trainer hands over the
entropies of that whole set, so row slices (``micro_batch_tokens``) and ranks give the loss of the micro-batch
run at once. The masked tokens still count in the loss type's normaliser, as in TRL.

``[grpo] entropy_coef = c``: ``loss = policy loss - c * H``, ``H`` the mean per-token entropy over the tokens the
policy loss trains on (every completion token, or the high-entropy ones), divided by ``gradient_accumulation_steps``
only: not rescaled by the loss type's normaliser, so ``c`` means the same for every loss type (TRL's ``_compute_loss``).
The bonus trains through the entropy, which the chunked head then computes with a gradient
(``grpo_core.policy.logprobs``, ``entropy_grad``); with the bonus off, nothing computes an entropy gradient.

``[grpo] use_adaptive_entropy`` (Skywork-OR1, arXiv 2505.22312): ``c`` starts at ``entropy_coef`` and after each
optimizer step moves by ``entropy_coef_delta`` within ``[entropy_coef_min, entropy_coef_max]``: up when the step's
entropy (token-weighted over every micro-batch and rank, on the tokens the loss trains on) is at or below
``entropy_target``, down otherwise; a step applies ``c`` only when the previous step's entropy was at or below the
target (none before the first step). :class:`EntropyControl` holds that state, saved in checkpoints.

Tensors in, tensors out, no process group: the trainer gathers what crosses ranks and passes a reduction.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class EntropyInputs:
    """What :func:`grpo_core.algorithm.loss.grpo_loss` needs of the entropy options for one slice ``[B, K]``."""

    entropy: torch.Tensor  # per-token entropy of the policy, differentiable when ``coef`` is not 0
    token_mask: torch.Tensor | None  # the high-entropy tokens (top_entropy_quantile), None: every token
    coef: float  # the bonus coefficient this step applies (0: no bonus)
    tokens: torch.Tensor | int | None  # tokens the bonus averages over in the whole micro-batch (None: this slice's)


def entropy_threshold(entropies: torch.Tensor, quantile: float) -> torch.Tensor | None:
    """The entropy at or above which a token trains: the ``1 - quantile`` quantile (linear interpolation, as
    ``torch.quantile``) of ``entropies``, the 1-D entropies of every completion token of the micro-batch (all
    ranks); None when there is none (then no token trains, as in TRL)."""
    if entropies.numel() == 0:
        return None
    return torch.quantile(entropies.float(), 1 - quantile)


def high_entropy_mask(entropies: torch.Tensor, mask: torch.Tensor, threshold: torch.Tensor | None) -> torch.Tensor:
    """``[B, K]`` 1 for a completion token whose entropy is at or above ``threshold``, else 0 (in ``mask``'s
    float dtype, or float32)."""
    dtype = mask.dtype if mask.is_floating_point() else torch.float32
    if threshold is None:
        return torch.zeros(mask.shape, dtype=dtype, device=mask.device)
    keep = ((entropies.detach() * mask.to(entropies.dtype)) >= threshold.to(entropies.device)) & mask.bool()
    return keep.to(dtype)


def entropy_bonus(x: EntropyInputs, mask: torch.Tensor, grad_accum_steps: int) -> torch.Tensor:
    """The slice's share of ``H / grad_accum_steps``: its entropy summed over the tokens the loss trains on, over
    the micro-batch's count of them."""
    active = mask if x.token_mask is None else mask * x.token_mask
    tokens = active.sum() if x.tokens is None else torch.as_tensor(x.tokens, dtype=active.dtype,
                                                                   device=active.device)
    return (x.entropy * active).sum() / tokens.clamp(min=1.0) / grad_accum_steps


class EntropyControl:
    """The run's entropy options (``[grpo]``, module docs) and the adaptive coefficient's state across steps."""

    def __init__(self, grpo: Any) -> None:
        self.quantile = float(grpo.top_entropy_quantile)
        self.coef = float(grpo.entropy_coef)
        self.adaptive = bool(grpo.use_adaptive_entropy)
        self.target, self.delta = float(grpo.entropy_target), float(grpo.entropy_coef_delta)
        self.bounds = (float(grpo.entropy_coef_min), float(grpo.entropy_coef_max))
        self.last_entropy = math.inf  # the previous optimizer step's entropy (inf: no step yet)
        self._window: torch.Tensor | None = None  # [entropy sum, tokens] of this optimizer step so far

    @property
    def masks_tokens(self) -> bool:
        """Whether the loss trains on the high-entropy tokens only."""
        return self.quantile < 1.0

    @property
    def bonus(self) -> bool:
        """Whether the loss has an entropy bonus (the adaptive one counts even while its coefficient is 0)."""
        return self.coef != 0.0 or self.adaptive

    @property
    def applied_coef(self) -> float:
        """The coefficient this optimizer step applies (the adaptive one only at or below the target)."""
        if self.adaptive:
            return self.coef if self.last_entropy <= self.target else 0.0
        return self.coef

    @property
    def needs_entropy(self) -> bool:
        """Whether the training forward must give the entropy."""
        return self.masks_tokens or self.bonus

    @property
    def needs_grad(self) -> bool:
        """Whether the training forward's entropy needs a gradient (a bonus applied this step)."""
        return self.bonus and self.applied_coef != 0.0

    def loss_inputs(self, entropy: torch.Tensor | None, mask: torch.Tensor, token_mask: torch.Tensor | None,
                    tokens: torch.Tensor | int | None) -> EntropyInputs | None:
        """One slice's :class:`EntropyInputs` (None when no option is on); its entropy over the tokens it trains
        on counts towards the step's entropy (the adaptive coefficient's measure)."""
        if not self.needs_entropy or entropy is None:
            return None
        if self.adaptive:
            active = mask if token_mask is None else mask * token_mask
            stats = torch.stack([(entropy.detach() * active).sum(), active.sum()]).double()
            self._window = stats if self._window is None else self._window + stats
        return EntropyInputs(entropy, token_mask, self.applied_coef if self.bonus else 0.0, tokens)

    def step(self, reduce: Callable[[torch.Tensor], torch.Tensor]) -> None:
        """After an optimizer step: the step's entropy over every rank (``reduce`` sums a tensor over them; every
        rank calls this) moves the adaptive coefficient for the next step."""
        if not self.adaptive:
            return
        totals = reduce(self._window if self._window is not None else torch.zeros(2, dtype=torch.float64))
        self._window = None
        entropy = float(totals[0] / totals[1].clamp(min=1.0))
        low, high = self.bounds
        self.coef = min(self.coef + self.delta, high) if entropy <= self.target else max(self.coef - self.delta, low)
        self.last_entropy = entropy

    def metrics(self) -> dict[str, float]:
        """``entropy_coef`` (the coefficient after the step) when a bonus is on."""
        return {"entropy_coef": self.coef} if self.bonus else {}

    def state_dict(self) -> dict[str, float]:
        return {"entropy_coef": self.coef, "last_world_entropy": self.last_entropy}

    def load_state_dict(self, state: dict[str, float] | None) -> None:
        """Restore :meth:`state_dict` (None, a checkpoint written without it: keep the run config's start)."""
        if state and self.adaptive:
            self.coef, self.last_entropy = float(state["entropy_coef"]), float(state["last_world_entropy"])
