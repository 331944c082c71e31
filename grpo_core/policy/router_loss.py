"""``[grpo] router_aux_loss_coef`` (TRL's name): a Mixture-of-Experts model's load-balancing loss in the update.

As TRL 1.16's ``GRPOTrainer``: a model whose config has ``output_router_logits`` returns its router logits, and each
micro-batch's loss gets ``coef * aux_loss / gradient_accumulation_steps``, ``aux_loss`` the family's own
``load_balancing_loss_func`` (transformers' module of the model's class, called as its ``forward`` calls it:
``(router_logits, num_experts, num_experts_per_tok, attention_mask)``) over the micro-batch's rows, prompt and
completion tokens, the attention mask keeping padding out. Unset, ``coef`` is the model config's own
``router_aux_loss_coef`` (0 where it has none); a non-zero value on a model without router logits is refused, as
TRL refuses it, and so is a family whose loss this module cannot call that way (:func:`router_loss_problem`, one
line naming the key, at load). The metric ``aux_loss`` is the micro-batches' mean, TRL's; ``loss`` includes the term.

The loss is not a sum over tokens (a product of two means over the micro-batch: the share of top-k picks and the
mean routing probability of each expert), so a micro-batch run as several row slices, or over several processes,
does not get it by adding the slices' own. :meth:`RouterLoss.step` then takes the router logits of every row of
the micro-batch from one no-grad forward at this optimizer step's weights (gathered over the ranks, as the
high-entropy mask's entropies are), and each slice calls the family's function on its own live logits beside the
others' detached ones: every slice sees the micro-batch's value and its exact share of the gradient, so the slices
and ranks give the micro-batch's loss and gradient (the trainer's rule: two processes update as one does). With
one process and one slice per micro-batch nothing extra runs. A disabled loss (dense model, coefficient 0) asks
the forward for nothing and adds nothing.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from grpo_core.config import RunConfig

RouterLogits = tuple[torch.Tensor, ...]  # one [rows * columns, experts] tensor per MoE layer


def _text_config(model_config: Any) -> Any:
    get = getattr(model_config, "get_text_config", None)
    return get() if callable(get) else model_config


def is_moe(model_config: Any) -> bool:
    """Whether the model returns its router logits (TRL's test: ``output_router_logits`` in its config)."""
    return hasattr(_text_config(model_config), "output_router_logits")


def resolved_coef(cfg: RunConfig, model_config: Any) -> float:
    """The weight the update gives the loss: the key, or unset the model config's own (TRL's rule); 0 for a dense
    model."""
    if not is_moe(model_config):
        return 0.0
    coef = cfg.grpo.router_aux_loss_coef
    return float(getattr(_text_config(model_config), "router_aux_loss_coef", 0.0) if coef is None else coef)


def _family(model: Any) -> tuple[Callable[..., Any], int, int] | None:
    """``(load_balancing_loss_func, num_experts, top_k)`` as ``model``'s own forward passes them, or None."""
    balance = getattr(sys.modules.get(type(model).__module__), "load_balancing_loss_func", None)
    if not callable(balance):
        return None
    if list(inspect.signature(balance).parameters)[:4] != ["gate_logits", "num_experts", "top_k", "attention_mask"]:
        return None
    text = _text_config(model.config)
    experts = getattr(model, "num_experts", None) or getattr(text, "num_experts", None)
    top_k = getattr(model, "num_experts_per_tok", None) or getattr(text, "num_experts_per_tok", None)
    if not isinstance(experts, int) or not isinstance(top_k, int):
        return None
    return balance, experts, top_k


def _base(model: Any) -> Any:
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def router_loss_problem(cfg: RunConfig, model: Any) -> str | None:
    """What ``grpo.router_aux_loss_coef`` cannot do with this model (None: nothing)."""
    base = _base(model)
    coef, name = cfg.grpo.router_aux_loss_coef, type(base).__name__
    if coef and not is_moe(base.config):
        return (f"grpo.router_aux_loss_coef: is {coef} but {name} is not a Mixture-of-Experts model that "
                "returns its router logits, so there is no auxiliary loss to weight; leave it unset")
    if cfg.trainer.backend == "grpo_core" and resolved_coef(cfg, base.config) and _family(base) is None:
        return (f"grpo.router_aux_loss_coef: {name}'s load-balancing loss is not transformers' "
                "load_balancing_loss_func(router_logits, num_experts, top_k, attention_mask), which this trainer "
                "calls; set 0 to train without it, or run trainer.backend = \"trl\"")
    return None


class RouterLoss:
    """The policy's load-balancing loss in the update (see the module docs); ``enabled`` False: nothing to do."""

    def __init__(self, coef: float, family: tuple[Callable[..., Any], int, int] | None, grad_accum_steps: int):
        self.enabled = bool(coef) and family is not None
        self.coef, self.family, self.grad_accum_steps = coef, family, grad_accum_steps

    @classmethod
    def of(cls, model: Any, cfg: RunConfig) -> RouterLoss:
        base = _base(model)
        coef = resolved_coef(cfg, base.config)
        return cls(coef, _family(base) if coef else None, cfg.grpo.gradient_accumulation_steps)

    def value(self, live: RouterLogits, mask: torch.Tensor,
              others: Sequence[tuple[RouterLogits, torch.Tensor]] = ()) -> torch.Tensor:
        """The family's loss over the rows of ``live`` (``mask``: their attention mask) and of ``others`` (the
        rest of the micro-batch, detached), the gradient reaching ``live`` only."""
        balance, experts, top_k = self.family  # type: ignore[misc]
        if others:
            device = live[0].device
            live = tuple(torch.cat([layer, *(o[i].to(device) for o, _ in others)]) for i, layer in enumerate(live))
            mask = torch.cat([mask, *(m.to(mask.device) for _, m in others)])
        return balance(live, experts, top_k, mask)

    def step(self, slices: list[Sequence[torch.Tensor]], attention_mask: torch.Tensor,
             router_logits: Callable[[torch.Tensor], RouterLogits],
             gather: Callable[[Any], list[Any]] | None, rank: int = 0) -> RouterStep:
        """The loss of one optimizer step's micro-batches (``slices``: this rank's rows of each, one tensor of row
        indices per forward). ``gather`` (None: one process) gathers an object from every rank in rank order;
        ``rank`` is this one; ``router_logits(rows)`` is a no-grad forward's router logits, called only when some
        micro-batch spans several slices or ranks."""
        if not self.enabled or (gather is None and all(len(parts) <= 1 for parts in slices)):
            return RouterStep(self, None, rank)
        mine = [[(tuple(t.detach().cpu() for t in router_logits(part)), attention_mask[part].cpu()) for part in parts]
                for parts in slices]
        return RouterStep(self, gather(mine) if gather is not None else [mine], rank)


class RouterStep:
    """One optimizer step's load-balancing loss: :meth:`add` it to each slice's loss (see :meth:`RouterLoss.step`)."""

    def __init__(self, loss: RouterLoss, every: list[Any] | None, rank: int):
        self.loss, self.every, self.rank = loss, every, rank

    def add(self, loss: torch.Tensor, metrics: dict[str, torch.Tensor], micro: int, index: int, rows: int,
            group_rows: int, attention_mask: torch.Tensor, router_logits: RouterLogits | None = None) -> torch.Tensor:
        """``loss`` plus this slice's share of ``coef * aux_loss / gradient_accumulation_steps`` (slice ``index`` of
        micro-batch ``micro`` on this rank, ``rows`` of its ``group_rows``, ``attention_mask`` theirs); ``metrics``
        get ``aux_loss``, and ``loss`` the term (TRL logs the loss with it)."""
        if router_logits is None or not self.loss.enabled:
            return loss
        others: list[tuple[RouterLogits, torch.Tensor]] = []
        if self.every is not None:
            others = [entry for r, theirs in enumerate(self.every) for j, entry in enumerate(theirs[micro])
                      if (r, j) != (self.rank, index)]
        aux = self.loss.value(router_logits, attention_mask, others)
        # the micro-batch's value in the slices' shares, the gradient through this slice's own logits
        share = aux.detach() * (rows / group_rows) + (aux - aux.detach())
        term = self.loss.coef * share / self.loss.grad_accum_steps
        metrics["aux_loss"] = aux.detach()
        metrics["loss"] = metrics["loss"] + term.detach() * self.loss.grad_accum_steps
        return loss + term
