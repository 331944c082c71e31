"""Generation backends: prompts in, a group of completions per prompt out, as padded tensors and text.

The loop only sees the :class:`GenerationBackend` protocol. Backends are registered by name
through the ``grpo_register_generation_backends`` hook (``register(name, factory)`` with
``factory(config, model, tokenizer)``) and picked with ``[generation] backend = "..."``;
the built-in ``transformers`` backend (this module) is registered in :mod:`grpo_core.plugin`,
a vLLM backend plugs in the same way without touching the loop.

A :class:`Generation` holds, for ``N = len(prompts) * num_generations`` rows (each prompt's
group consecutive): left-padded ``prompt_ids``/``prompt_mask`` ``[N, P]``, right-padded
``completion_ids``/``completion_mask`` ``[N, K]`` (the mask covers tokens up to and including
the first EOS), the decoded ``completions_text`` and ``truncated`` (no EOS within the limit).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import torch

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

    @property
    def num_tokens(self) -> int:
        return int(self.completion_mask.sum())


class GenerationBackend(Protocol):
    def generate(self, prompts: list[str], num_generations: int, *, greedy: bool = False) -> Generation: ...


def completion_mask_from_eos(completion_ids: torch.Tensor, eos_ids: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """``(mask, truncated)``: 1 up to and including each row's first EOS; rows without EOS are truncated."""
    is_eos = torch.isin(completion_ids, torch.tensor(eos_ids, device=completion_ids.device))
    has_eos = is_eos.any(dim=1)
    first = torch.where(has_eos, is_eos.int().argmax(dim=1), torch.full_like(has_eos, completion_ids.size(1), dtype=torch.long))
    positions = torch.arange(completion_ids.size(1), device=completion_ids.device)
    mask = (positions[None, :] <= first[:, None]).long()
    return mask, ~has_eos


def eos_token_ids(model: Any, tokenizer: Any) -> list[int]:
    """Every id that ends a completion: the generation config's EOS (int or list) and the tokenizer's."""
    ids: set[int] = set()
    gen_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    for value in (gen_eos, tokenizer.eos_token_id):
        if isinstance(value, int):
            ids.add(value)
        elif value:
            ids.update(int(v) for v in value)
    if not ids:
        raise ValueError("the tokenizer has no eos token: completions could never end")
    return sorted(ids)


class TransformersBackend:
    """Sampling with ``model.generate`` (the policy itself, in eval mode, no gradients)."""

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

    def _tokenize(self, prompts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        self.tokenizer.padding_side = "left"
        enc = self.tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=self.add_special_tokens)
        ids, mask = enc["input_ids"], enc["attention_mask"]
        if self.max_prompt_length and ids.size(1) > self.max_prompt_length:  # keep the end of long prompts
            ids, mask = ids[:, -self.max_prompt_length:], mask[:, -self.max_prompt_length:]
        device = next(self.model.parameters()).device
        return ids.to(device), mask.to(device)

    @torch.no_grad()
    def generate(self, prompts: list[str], num_generations: int, *, greedy: bool = False) -> Generation:
        prompt_ids, prompt_mask = self._tokenize(prompts)
        prompt_ids = prompt_ids.repeat_interleave(num_generations, dim=0)
        prompt_mask = prompt_mask.repeat_interleave(num_generations, dim=0)
        sampling: dict[str, Any] = {"do_sample": False}
        if not greedy:
            sampling = {"do_sample": True, "temperature": self.gen.temperature, "top_p": self.gen.top_p,
                        "top_k": self.gen.top_k}
        was_training = self.model.training
        self.model.eval()
        try:
            out = self.model.generate(
                input_ids=prompt_ids, attention_mask=prompt_mask, max_new_tokens=self.gen.max_completion_length,
                repetition_penalty=self.gen.repetition_penalty, pad_token_id=self.tokenizer.pad_token_id,
                eos_token_id=self.eos_ids, use_cache=True, **sampling,
            )
        finally:
            self.model.train(was_training)
        completion_ids = out[:, prompt_ids.size(1):]
        completion_mask, truncated = completion_mask_from_eos(completion_ids, self.eos_ids)
        completion_ids = completion_ids.masked_fill(completion_mask == 0, self.tokenizer.pad_token_id)
        texts = self.tokenizer.batch_decode(completion_ids, skip_special_tokens=True)
        return Generation(prompt_ids, prompt_mask, completion_ids, completion_mask, texts, truncated)


def make_transformers_backend(config: RunConfig, model: Any, tokenizer: Any) -> TransformersBackend:
    """Factory registered as the ``transformers`` generation backend."""
    return TransformersBackend(config, model, tokenizer)


def build_backend(config: RunConfig, model: Any, tokenizer: Any, registry: Any = None) -> GenerationBackend:
    """The backend named by ``[generation] backend``, from the plugin registry."""
    if registry is None:
        from grpo_rewards.plugins import get_registry

        registry = get_registry()
    return registry.get("generation_backends", config.generation.backend)(config, model, tokenizer)
