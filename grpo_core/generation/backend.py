"""The generation backend protocol: prompts in, a :class:`Generation` out; and what every backend shares.

A :class:`Generation` holds, for ``N = len(prompts) * num_generations`` rows (each prompt's group
consecutive): left-padded ``prompt_ids``/``prompt_mask`` ``[N, P]``, right-padded ``completion_ids``/
``completion_mask`` ``[N, K]`` (the mask covers tokens up to and including the first EOS), the decoded
``completions_text`` and ``truncated`` (no EOS within the limit); a backend that knows them sets
``sampling_logps`` ``[N, K]``, the sampler's log-prob of each token, and ``sampler_is_policy`` when it sampled
from the training model itself (the trainer then runs no importance correction and no old-policy pass). A
multi-turn rollout with tools also sets ``tool_mask`` (0 on the tools' tokens: the trainer's loss mask is
``completion_mask * tool_mask``), ``conversations`` and ``tool_facts``; its ``completion_mask`` covers every
token of the conversation, the model's and the tools'.

A backend that produces its completions in pieces may also hand each run of finished groups over while the
rest still generates: it sets ``hands_over_groups = True`` and its ``generate`` takes ``on_groups``
(:data:`OnGroups`), called in order, on the generating thread, with the index of the run's first group and
the :class:`Generation` of its groups alone (equal to their rows of the batch ``generate`` returns). The
trainer scores those groups while generation goes on. ``generate(prompts, num_generations, greedy=...)`` stays
the whole contract: a backend without the attribute (or handing over only some groups) is scored afterwards.

Backends are registered by name through ``grpo_register_generation_backends`` (``register(name, factory)``
with ``factory(config, model, tokenizer)``, the factory carrying ``config_problems(sections)``, its config
checks) and picked with ``[generation] backend``: :func:`build_backend`. A completion ends at any of
:func:`eos_token_ids` (the checkpoint's EOS ids and the chat template's end-of-turn token). The backends
that tokenize prompts themselves (transformers, vLLM) share their setup: :class:`TokenizerBackend`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import torch

from grpo_rewards.plugins import get_registry

if TYPE_CHECKING:
    from grpo_core.config import RunConfig


@dataclass
class Generation:
    prompt_ids: torch.Tensor
    prompt_mask: torch.Tensor
    completion_ids: torch.Tensor
    completion_mask: torch.Tensor
    completions_text: list[str]
    truncated: torch.Tensor
    sampling_logps: torch.Tensor | None = None  # [N, K] the sampler's log-prob of each token, if it gives them
    # the sampler ran the policy itself (same model and weights, as the trainer scores it): nothing to correct
    sampler_is_policy: bool = False
    # multi-turn rollouts with tools (grpo_core.generation.multi_turn): [N, K] 1 on the model's own tokens, 0 on
    # the tools' (TRL's tool_mask; in the context, out of the loss), each row's conversation in TRL's format and
    # its facts (turns, tool_calls, tool_errors, stop)
    tool_mask: torch.Tensor | None = None
    conversations: list[list[dict[str, Any]]] | None = None
    tool_facts: list[dict[str, Any]] | None = None

    def rows(self, start: int, end: int | None = None) -> Generation:
        """The rows ``start .. end - 1`` alone."""
        def cut(value: Any) -> Any:
            return None if value is None else value[start:end]
        return Generation(self.prompt_ids[start:end], self.prompt_mask[start:end], self.completion_ids[start:end],
                          self.completion_mask[start:end], self.completions_text[start:end], self.truncated[start:end],
                          cut(self.sampling_logps), self.sampler_is_policy, cut(self.tool_mask), cut(self.conversations),
                          cut(self.tool_facts))

    @property
    def num_tokens(self) -> int:
        return int(self.completion_mask.sum())


OnGroups = Callable[[int, Generation], None]  # (index of the first group, the Generation of the finished groups)


class GenerationBackend(Protocol):
    def generate(self, prompts: list[str], num_generations: int, *, greedy: bool = False) -> Generation: ...


class TokenizerBackend:
    """What a backend that tokenizes prompts itself keeps (the transformers and vLLM backends): the model, its
    tokenizer, ``[generation]``, the prompt length cap, whether the tokenizer adds its special tokens (not after
    a chat template, which writes its own) and the EOS ids (:func:`eos_token_ids`); a tokenizer without a pad
    token is refused."""

    def __init__(self, config: RunConfig, model: Any, tokenizer: Any):
        self.model = model
        self.tokenizer = tokenizer
        self.gen = config.generation
        self.max_prompt_length = config.data.max_prompt_length
        # a chat template writes its own special tokens; a plain prompt gets the tokenizer's (e.g. BOS)
        self.add_special_tokens = not config.data.chat_template
        self.eos_ids = eos_token_ids(model, tokenizer)
        if tokenizer.pad_token_id is None:
            raise ValueError("the tokenizer has no pad token (models.load_model_and_tokenizer sets one)")


def completion_mask_from_eos(completion_ids: torch.Tensor, eos_ids: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """``(mask, truncated)``: 1 up to and including each row's first EOS; rows without EOS are truncated."""
    is_eos = torch.isin(completion_ids, torch.tensor(eos_ids, device=completion_ids.device))
    has_eos = is_eos.any(dim=1)
    first = torch.where(has_eos, is_eos.int().argmax(dim=1), torch.full_like(has_eos, completion_ids.size(1), dtype=torch.long))
    positions = torch.arange(completion_ids.size(1), device=completion_ids.device)
    mask = (positions[None, :] <= first[:, None]).long()
    return mask, ~has_eos


_SENTINEL = "GRPO-END-OF-TURN-PROBE"


def end_of_turn_ids(tokenizer: Any) -> list[int]:
    """The special token the chat template writes right after an assistant turn (``<|im_end|>``,
    ``<|eot_id|>``, ``<end_of_turn>``, ...), found by rendering a probe conversation; [] when there is no
    template or the turn is not closed by a special token."""
    if not getattr(tokenizer, "chat_template", None):
        return []
    probe = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": _SENTINEL}]
    try:
        text = tokenizer.apply_chat_template(probe, tokenize=False)
    except Exception:  # a template that refuses the probe (e.g. one requiring a system turn): nothing learnt
        return []
    if not isinstance(text, str) or _SENTINEL not in text:
        return []
    tail = text.split(_SENTINEL, 1)[1]
    ids = tokenizer(tail, add_special_tokens=False)["input_ids"] if tail else []
    special = set(tokenizer.all_special_ids) | {
        i for i, t in getattr(tokenizer, "added_tokens_decoder", {}).items() if getattr(t, "special", False)}
    return [int(ids[0])] if ids and ids[0] in special else []


def eos_token_ids(model: Any, tokenizer: Any) -> list[int]:
    """Every id that ends a completion: the generation config's EOS (int or list), the tokenizer's and the
    chat template's end-of-turn token."""
    ids: set[int] = set(end_of_turn_ids(tokenizer))
    gen_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    for value in (gen_eos, tokenizer.eos_token_id):
        if isinstance(value, int):
            ids.add(value)
        elif value:
            ids.update(int(v) for v in value)
    if not ids:
        raise ValueError("the tokenizer has no eos token: completions could never end")
    return sorted(ids)


def build_backend(config: RunConfig, model: Any, tokenizer: Any, registry: Any = None) -> GenerationBackend:
    """The backend named by ``[generation] backend``, from the plugin registry."""
    if registry is None:
        registry = get_registry()
    return registry.get("generation_backends", config.generation.backend)(config, model, tokenizer)
