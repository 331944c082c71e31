"""Reward models scored as rewards: :class:`Scorer`, the one scorer of a sequence-classification model, and
:class:`RewardModel`, a loaded model called as a reward in the training process.

An item of ``reward_funcs`` that is a ``transformers`` sequence-classification model, or a path (or hub id) to
one, scores completions as ``trl.GRPOTrainer`` does (trl 1.16, ``_calculate_rewards``): the prompt and the
completion joined (plain text) or the conversation through the reward tokenizer's chat template, tokenized in one
batch with right padding and no special tokens, one forward pass without gradients, the logit of label 0. Its
tokenizer is the matching item of ``reward_processing_classes`` or the model's own (its pad token the EOS when it
has none, and the model told which id pads, as TRL does). A loaded model runs under :class:`grpo_rewards.SafeReward`
like any reward, on a thread of the training process (a model is not shipped to a worker process); a model named
by path or id is loaded in its model process (:mod:`grpo_core.judges.model_process`), as the ``reward_model``
built-in's are.

Both score with :class:`Scorer` and its :class:`ScoreOptions`: ``batch_size`` (rows per forward pass; the scores
do not depend on it), ``max_length`` (longer texts keep their last ``max_length`` tokens, so the completion's end
is scored; the rows cut are counted in the metrics), ``label`` (which logit), ``normalise`` (``raw``: the logit;
``sigmoid``: its sigmoid; ``softmax``: the probability of ``label`` over the labels) and ``chat_template``
(``conversational``: as TRL, only chat prompts go through the template; ``always``: a text prompt becomes the
user's message and the completion the assistant's when the tokenizer has a template).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
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


@dataclass(frozen=True)
class ScoreOptions:
    """How a reward model's scores are read (see module docs); checked when built."""

    batch_size: int | None = None
    max_length: int | None = None
    label: int = 0
    normalise: str = "raw"
    chat_template: str = "conversational"
    chat_template_kwargs: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        if self.batch_size is not None and self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")
        if self.max_length is not None and self.max_length < 1:
            raise ValueError(f"max_length must be >= 1, got {self.max_length}")
        if self.normalise not in NORMALISE:
            raise ValueError(f"normalise must be one of {', '.join(NORMALISE)}, got {self.normalise!r}")
        if self.chat_template not in CHAT_TEMPLATE:
            raise ValueError(f"chat_template must be one of {', '.join(CHAT_TEMPLATE)}, got {self.chat_template!r}")

    def check_label(self, labels: int) -> None:
        if not 0 <= self.label < labels:
            raise ValueError(f"label must be within [0, {labels - 1}] (the model has {labels} label(s)), "
                             f"got {self.label}")


class Scorer:
    """A loaded sequence-classification model and its tokenizer: :meth:`score` of prompts and completions."""

    def __init__(self, model: Any, tokenizer: Any = None):
        if tokenizer is None:
            from transformers import AutoTokenizer  # heavy: only when a reward model is given without one

            tokenizer = AutoTokenizer.from_pretrained(model.config._name_or_path)
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        model.config.get_text_config().pad_token_id = tokenizer.pad_token_id  # pooled at the last non-pad token
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.labels = int(getattr(model.config, "num_labels", 1))

    def texts(self, prompts: list[Any], completions: list[Any], options: ScoreOptions) -> list[str]:
        template = getattr(self.tokenizer, "chat_template", None)
        out = []
        for p, c in zip(prompts, completions, strict=True):
            if isinstance(p, list) or (options.chat_template == "always" and template):
                messages = (p if isinstance(p, list) else [{"role": "user", "content": p}]) + \
                    (c if isinstance(c, list) else [{"role": "assistant", "content": c}])
                out.append(self.tokenizer.apply_chat_template(messages, tokenize=False,
                                                              **dict(options.chat_template_kwargs)))
            else:
                out.append(p + c)
        return out

    def _inputs(self, texts: list[str], max_length: int | None) -> tuple[Any, int]:
        """The padded batch of ``texts`` and how many of them were cut to ``max_length``."""
        if max_length is None:  # TRL's batch, as it builds it
            return self.tokenizer(text=texts, return_tensors="pt", padding=True, padding_side="right",
                                  add_special_tokens=False), 0
        ids = self.tokenizer(text=texts, add_special_tokens=False)["input_ids"]
        cut = sum(len(row) > max_length for row in ids)
        kept = {"input_ids": [row[-max_length:] for row in ids]}  # the completion's end is kept
        return self.tokenizer.pad(kept, padding=True, padding_side="right", return_tensors="pt"), cut

    def _forward(self, inputs: Any, options: ScoreOptions) -> list[float]:
        import torch  # heavy: the caller holds it already

        device = next(self.model.parameters()).device
        with torch.inference_mode():
            logits = self.model(**{k: v.to(device) for k, v in inputs.items()}).logits.float()
        if options.normalise == "softmax":
            return logits.softmax(-1)[:, options.label].tolist()
        picked = logits[:, options.label]
        return (picked.sigmoid() if options.normalise == "sigmoid" else picked).tolist()

    def score(self, prompts: list[Any], completions: list[Any], options: ScoreOptions) -> tuple[list[float], int]:
        """One score per row (``options.batch_size`` rows per forward pass, no gradients) and the number of rows
        cut to ``options.max_length``."""
        options.check_label(self.labels)
        texts = self.texts(prompts, completions, options)
        step = options.batch_size or max(len(texts), 1)
        out: list[float] = []
        cut = 0
        for lo in range(0, len(texts), step):
            inputs, part_cut = self._inputs(texts[lo:lo + step], options.max_length)
            out += self._forward(inputs, options)
            cut += part_cut
        return out, cut


class ScoredRows:
    """The counters of a reward model's calls (rows, rows cut, seconds) and its :meth:`metrics`; the first call
    with rows cut to ``max_length`` is warned about."""

    __name__: str
    max_length: int | None

    def _init_counters(self) -> None:
        self.rows = self.truncated = 0
        self.seconds = 0.0

    def _count(self, rows: int, cut: int, seconds: float) -> None:
        if cut and not self.truncated:
            log.warning("reward model %r: %d of %d texts are longer than max_length=%s tokens; their last %s "
                        "tokens are scored (truncated_share in the metrics counts them)", self.__name__, cut, rows,
                        self.max_length, self.max_length)
        self.rows += rows
        self.truncated += cut
        self.seconds += seconds

    def metrics(self) -> dict[str, float]:
        """Rows scored, the share cut to ``max_length``, and rows per second of scoring."""
        return {"rows": self.rows, "truncated_share": self.truncated / max(self.rows, 1),
                "rows_per_s": self.rows / self.seconds if self.seconds else 0.0}


class RewardModel(ScoredRows):
    """A loaded reward model called as a reward: ``fn(completions, prompts=..., **columns) -> list[float]``."""

    def __init__(self, model: Any, tokenizer: Any = None, chat_template_kwargs: dict[str, Any] | None = None, *,
                 batch_size: int | None = None, max_length: int | None = None, label: int = 0,
                 normalise: str = "raw", chat_template: str = "conversational", name: str | None = None):
        self.options = ScoreOptions(batch_size, max_length, label, normalise, chat_template,
                                    tuple(sorted((chat_template_kwargs or {}).items())))
        self.scorer = Scorer(model, tokenizer)
        self.options.check_label(self.scorer.labels)
        self.model, self.tokenizer, self.max_length = self.scorer.model, self.scorer.tokenizer, max_length
        self.lock = threading.Lock()  # one forward pass at a time
        self.__name__ = name or str(model.config._name_or_path or type(model).__name__).rstrip("/").split("/")[-1]
        self._init_counters()

    def __reduce__(self) -> Any:
        raise TypeError("a loaded reward model is scored in the training process")  # SafeReward: a thread

    def texts(self, prompts: list[Any], completions: list[Any]) -> list[str]:
        return self.scorer.texts(prompts, completions, self.options)

    def __call__(self, completions: list[Any], prompts: list[Any] | None = None, **_: Any) -> list[float]:
        if prompts is None:
            raise ValueError("a reward model needs the prompts")
        start = time.perf_counter()
        with self.lock:
            out, cut = self.scorer.score(prompts, completions, self.options)
        self._count(len(out), cut, time.perf_counter() - start)
        return out
