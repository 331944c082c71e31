"""Reward models scored as rewards: :class:`RewardModel`, the one scorer of a sequence-classification model.

An item of ``reward_funcs`` that is a ``transformers`` sequence-classification model, or a path (or hub id) to
one, scores completions as ``trl.GRPOTrainer`` does (trl 1.16, ``_calculate_rewards``): the prompt and the
completion joined (plain text) or the conversation through the reward tokenizer's chat template, tokenized in one
batch with right padding and no special tokens, one forward pass without gradients, the logit of label 0. Its
tokenizer is the matching item of ``reward_processing_classes`` or the model's own (its pad token the EOS when it
has none, and the model told which id pads, as TRL does). It runs under :class:`grpo_rewards.SafeReward` like any
reward, on a thread of the training process (a model is not shipped to a worker process).

The ``reward_model`` built-in (:mod:`grpo_core.judges.reward_model`) scores with the same class and its options:
``batch_size`` (rows per forward pass; the scores do not depend on it), ``max_length`` (longer texts keep their
last ``max_length`` tokens, so the completion's end is scored; the rows cut are counted in :meth:`metrics`),
``label`` (which logit), ``normalise`` (``raw``: the logit; ``sigmoid``: its sigmoid; ``softmax``: the
probability of ``label`` over the labels) and ``chat_template`` (``conversational``: as TRL, only chat prompts go
through the template; ``always``: a text prompt becomes the user's message and the completion the assistant's
when the tokenizer has a template). Aliases sharing one loaded model pass the same ``lock``: one forward pass at a
time.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

log = logging.getLogger("grpo.rewards")

NORMALISE = ("raw", "sigmoid", "softmax")
CHAT_TEMPLATE = ("conversational", "always")


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

    def __init__(self, model: Any, tokenizer: Any = None, chat_template_kwargs: dict[str, Any] | None = None, *,
                 batch_size: int | None = None, max_length: int | None = None, label: int = 0,
                 normalise: str = "raw", chat_template: str = "conversational", lock: Any = None,
                 name: str | None = None):
        if tokenizer is None:
            from transformers import AutoTokenizer  # heavy: only when a reward model is given without one

            tokenizer = AutoTokenizer.from_pretrained(model.config._name_or_path)
        if normalise not in NORMALISE:
            raise ValueError(f"normalise must be one of {', '.join(NORMALISE)}, got {normalise!r}")
        if chat_template not in CHAT_TEMPLATE:
            raise ValueError(f"chat_template must be one of {', '.join(CHAT_TEMPLATE)}, got {chat_template!r}")
        labels = int(getattr(model.config, "num_labels", 1))
        if not 0 <= label < labels:
            raise ValueError(f"label must be within [0, {labels - 1}] (the model has {labels} label(s)), got {label}")
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        model.config.get_text_config().pad_token_id = tokenizer.pad_token_id  # pooled at the last non-pad token
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.batch_size, self.max_length, self.label = batch_size, max_length, label
        self.normalise, self.chat_template = normalise, chat_template
        self.lock = lock if lock is not None else threading.Lock()
        self.__name__ = name or str(model.config._name_or_path or type(model).__name__).rstrip("/").split("/")[-1]
        self.rows = self.truncated = 0
        self.seconds = 0.0

    def __reduce__(self) -> Any:
        raise TypeError("a reward model is scored in the training process")  # SafeReward: a thread, not a process

    def metrics(self) -> dict[str, float]:
        """Rows scored, the share cut to ``max_length``, and rows per second of forward passes."""
        return {"rows": self.rows, "truncated_share": self.truncated / max(self.rows, 1),
                "rows_per_s": self.rows / self.seconds if self.seconds else 0.0}

    def texts(self, prompts: list[Any], completions: list[Any]) -> list[str]:
        template = getattr(self.tokenizer, "chat_template", None)
        out = []
        for p, c in zip(prompts, completions, strict=True):
            if isinstance(p, list) or (self.chat_template == "always" and template):
                messages = (p if isinstance(p, list) else [{"role": "user", "content": p}]) + \
                    (c if isinstance(c, list) else [{"role": "assistant", "content": c}])
                out.append(self.tokenizer.apply_chat_template(messages, tokenize=False, **self.chat_template_kwargs))
            else:
                out.append(p + c)
        return out

    def _inputs(self, texts: list[str]) -> Any:
        if self.max_length is None:  # TRL's batch, as it builds it
            return self.tokenizer(text=texts, return_tensors="pt", padding=True, padding_side="right",
                                  add_special_tokens=False)
        ids = self.tokenizer(text=texts, add_special_tokens=False)["input_ids"]
        cut = sum(len(row) > self.max_length for row in ids)
        if cut:
            if not self.truncated:
                log.warning("reward model %r: %d of %d texts are longer than max_length=%d tokens; their last %d "
                            "tokens are scored (truncated_share in the metrics counts them)", self.__name__, cut,
                            len(ids), self.max_length, self.max_length)
            self.truncated += cut
        kept = {"input_ids": [row[-self.max_length:] for row in ids]}  # the completion's end is kept
        return self.tokenizer.pad(kept, padding=True, padding_side="right", return_tensors="pt")

    def _forward(self, texts: list[str]) -> list[float]:
        import torch  # heavy: the caller holds it already

        inputs = self._inputs(texts)
        device = next(self.model.parameters()).device
        with self.lock, torch.inference_mode():
            logits = self.model(**{k: v.to(device) for k, v in inputs.items()}).logits.float()
        if self.normalise == "softmax":
            return logits.softmax(-1)[:, self.label].tolist()
        picked = logits[:, self.label]
        return (picked.sigmoid() if self.normalise == "sigmoid" else picked).tolist()

    def __call__(self, completions: list[Any], prompts: list[Any] | None = None, **_: Any) -> list[float]:
        if prompts is None:
            raise ValueError("a reward model needs the prompts")
        texts = self.texts(prompts, completions)
        step = self.batch_size or max(len(texts), 1)
        start = time.perf_counter()
        out: list[float] = []
        for lo in range(0, len(texts), step):
            out += self._forward(texts[lo:lo + step])
        self.seconds += time.perf_counter() - start
        self.rows += len(texts)
        return out
