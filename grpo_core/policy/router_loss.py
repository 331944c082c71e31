"""``[grpo] router_aux_loss_coef`` (TRL's name): the weight of a Mixture-of-Experts model's load-balancing loss.

TRL adds ``router_aux_loss_coef * aux_loss`` to the loss of a model whose config has ``output_router_logits`` (unset:
the model config's own coefficient) and raises when a non-zero value is set for a model without router logits.
This trainer does not add the load-balancing loss yet. :func:`router_loss_problem` is what the policy's loading
(:func:`grpo_core.policy.models.prepare_policy`) refuses, one line naming the key: a non-zero value on a dense model,
as TRL refuses it, and, in the grpo_core trainer, a non-zero value on an MoE model (the loss is not added);
:func:`router_loss_warning` says so when an MoE model's config asks for the loss and the key is unset.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from grpo_core.config import RunConfig


def _text_config(model_config: Any) -> Any:
    get = getattr(model_config, "get_text_config", None)
    return get() if callable(get) else model_config


def is_moe(model_config: Any) -> bool:
    """Whether the model returns its router logits (TRL's test: ``output_router_logits`` in its config)."""
    return hasattr(_text_config(model_config), "output_router_logits")


def router_loss_problem(cfg: RunConfig, model_config: Any, model_name: str) -> str | None:
    """What ``grpo.router_aux_loss_coef`` cannot do with this model (None: nothing)."""
    coef = cfg.grpo.router_aux_loss_coef
    if not coef:
        return None
    if not is_moe(model_config):
        return (f"grpo.router_aux_loss_coef: is {coef} but {model_name} is not a Mixture-of-Experts model that "
                "returns its router logits, so there is no auxiliary loss to weight; leave it unset")
    if cfg.trainer.backend == "grpo_core":
        return (f"grpo.router_aux_loss_coef: the grpo_core trainer does not add {model_name}'s load-balancing loss "
                "yet; set 0 to train without it, or run trainer.backend = \"trl\"")
    return None


def router_loss_warning(cfg: RunConfig, model_config: Any, model_name: str) -> str | None:
    """A warning when an MoE model's own config weighs its router loss and the key is unset (TRL would add it)."""
    own = getattr(_text_config(model_config), "router_aux_loss_coef", 0.0)
    if (cfg.grpo.router_aux_loss_coef is None and is_moe(model_config) and own
            and cfg.trainer.backend == "grpo_core"):
        return (f"{cfg.path}: warning: {model_name}'s config weighs its load-balancing loss by {own}, which TRL adds "
                "to the loss; the grpo_core trainer does not (set grpo.router_aux_loss_coef = 0 to silence this)")
    return None
