"""Reward models in ``reward_funcs``, as TRL takes them: :class:`RewardModel`.

An item of ``reward_funcs`` that is a ``transformers`` sequence-classification model, or a path (or hub id) to
one, scores completions as ``trl.GRPOTrainer`` does (trl 1.16, ``_calculate_rewards``): the prompt and the
completion joined (plain text) or the conversation through the reward tokenizer's chat template, tokenized in one
batch with right padding and no special tokens, one forward pass without gradients, the logit of label 0. Its
tokenizer is the matching item of ``reward_processing_classes`` or the model's own (its pad token the EOS when it
has none, and the model told which id pads, as TRL does). It runs under :class:`grpo_rewards.SafeReward` like any
reward, on a thread of the training process (a model is not shipped to a worker process).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def is_reward_model(obj: Any) -> bool:
    """A loaded sequence-classification model (a ``torch.nn.Module`` with a config)."""
    return hasattr(obj, "config") and hasattr(obj, "parameters") and callable(obj) and \
        type(obj).__name__.endswith("ForSequenceClassification")


def looks_like_reward_model(name: str) -> bool:
    """A folder holding a model config (a reward model given by path)."""
    return (Path(name).expanduser() / "config.json").is_file()


def looks_like_hub_id(name: str) -> bool:
    """``org/name``, as a Hub repo id is spelled (tried as a reward model when no reward has that name)."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id  # only for a name no reward has

    try:
        validate_repo_id(name)
    except HFValidationError:
        return False
    return name.count("/") == 1 and not Path(name).exists()


def load_reward_model(name: str, trust_remote_code: bool = False) -> Any:
    from transformers import AutoModelForSequenceClassification  # heavy: only when a reward model is named

    return AutoModelForSequenceClassification.from_pretrained(name, trust_remote_code=trust_remote_code)


class RewardModel:
    """A reward model called as a reward: ``fn(completions, prompts=..., **columns) -> list[float]``."""

    def __init__(self, model: Any, tokenizer: Any = None, chat_template_kwargs: dict[str, Any] | None = None):
        if tokenizer is None:
            from transformers import AutoTokenizer  # heavy: only when a reward model is given without one

            tokenizer = AutoTokenizer.from_pretrained(model.config._name_or_path)
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        model.config.get_text_config().pad_token_id = tokenizer.pad_token_id  # pooled at the last non-pad token
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.__name__ = str(model.config._name_or_path or type(model).__name__).rstrip("/").split("/")[-1]

    def __reduce__(self) -> Any:
        raise TypeError("a reward model is scored in the training process")  # SafeReward: a thread, not a process

    def texts(self, prompts: list[Any], completions: list[Any]) -> list[str]:
        if isinstance(prompts[0], list):  # conversational: the whole conversation through the chat template
            return [self.tokenizer.apply_chat_template(p + c, tokenize=False, **self.chat_template_kwargs)
                    for p, c in zip(prompts, completions, strict=True)]
        return [p + c for p, c in zip(prompts, completions, strict=True)]

    def __call__(self, completions: list[Any], prompts: list[Any] | None = None, **_: Any) -> list[float]:
        import torch  # heavy: the caller holds it already

        if prompts is None:
            raise ValueError("a reward model needs the prompts")
        inputs = self.tokenizer(text=self.texts(prompts, completions), return_tensors="pt", padding=True,
                                padding_side="right", add_special_tokens=False)
        device = next(self.model.parameters()).device
        with torch.inference_mode():
            logits = self.model(**{k: v.to(device) for k, v in inputs.items()}).logits
        return logits[:, 0].float().tolist()
