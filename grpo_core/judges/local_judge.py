"""The ``transformers`` judge backend of ``llm_judge``: a local causal language model as the judge.

``complete(messages, sampling)`` renders the messages through the model's chat template (with the generation
prompt), generates at most ``max_tokens`` new tokens (greedy at ``temperature`` 0, else sampled) without gradients,
and returns the new tokens' text. One model is loaded per (model, device) in a process and shared by every alias
naming it, one generation at a time. It does not pickle, so the reward runs on a thread of the training process.
Structured outputs are not enforced here: the verdict is read from the text as from any judge.
"""

from __future__ import annotations

import threading
from typing import Any

_LOADED: dict[tuple[str, str], tuple[Any, Any, threading.Lock]] = {}
_LOADING = threading.Lock()


def _shared(model: str, device: str) -> tuple[Any, Any, threading.Lock]:
    with _LOADING:
        if (model, device) not in _LOADED:
            from transformers import AutoModelForCausalLM, AutoTokenizer  # heavy: the judge is being built

            loaded = AutoModelForCausalLM.from_pretrained(model).to(device).eval()
            loaded.requires_grad_(False)
            _LOADED[(model, device)] = (loaded, AutoTokenizer.from_pretrained(model), threading.Lock())
        return _LOADED[(model, device)]


class TransformersJudge:
    """A local model answering the judge's messages (module docs)."""

    def __init__(self, model: str, device: str = "auto") -> None:
        from grpo_core.judges.reward_model import resolve_device

        self.name = model
        self.model, self.tokenizer, self.lock = _shared(model, resolve_device(device))

    def __reduce__(self) -> Any:
        raise TypeError("a local judge model runs in the training process")  # SafeReward: a thread

    @property
    def identity(self) -> str:
        return f"transformers:{self.name}"

    def complete(self, messages: list[dict[str, str]], sampling: dict[str, Any],
                 json_schema: dict[str, Any] | None = None) -> str:
        import torch  # heavy: the caller holds it already

        del json_schema  # not enforced locally: the verdict is read from the text
        ids = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt",
                                                 return_dict=True)
        temperature = float(sampling.get("temperature", 0.0))
        options: dict[str, Any] = {"max_new_tokens": int(sampling.get("max_tokens", 512)),
                                   "pad_token_id": self.tokenizer.pad_token_id or self.tokenizer.eos_token_id}
        options.update({"do_sample": True, "temperature": temperature} if temperature > 0 else {"do_sample": False})
        device = next(self.model.parameters()).device
        with self.lock, torch.inference_mode():
            out = self.model.generate(**{k: v.to(device) for k, v in ids.items()}, **options)
        return self.tokenizer.decode(out[0, ids["input_ids"].shape[1]:], skip_special_tokens=True)


def transformers_backend(model: str, device: str = "auto", **_: Any) -> TransformersJudge:
    """The ``transformers`` judge backend: the HTTP options (``base_url``, ``timeout``...) do not apply."""
    return TransformersJudge(model, device)
