"""The ``reward_model`` built-in: a sequence-classification model (a path or hub id, optional PEFT adapter) as a
reward, scored by :class:`grpo_core.trl_reward_models.Scorer` (the scorer of TRL's ``reward_funcs`` models) in
the model's own process (:mod:`grpo_core.judges.model_process`).

One process is started per (model, adapter, device, dtype) in a training process, when the first alias naming
it is built, and every alias naming it sends its rows there (one request at a time): two aliases with different
normalisations of one model hold one copy of its weights. ``device`` is ``auto`` (the policy's: the local rank's
CUDA device when there is one, as the trainer places the policy, else the CPU) or a device of its own (``cpu``,
``cuda:1``...: a second device keeps the model off the policy's). An alias is called on a thread of the training
process (:class:`RewardModelClient` is not shipped to a worker process: the model process is the isolation);
its requests have a deadline (``request_timeout``) and a process that hangs or dies is this call's failure,
counted by the reward's isolation, the next call starting a fresh process.
"""

from __future__ import annotations

import os
import time
from typing import Any

from grpo_core.judges.model_process import ModelKey, ModelProcess, model_process
from grpo_core.trl_reward_models import ScoredRows, ScoreOptions
from grpo_rewards.isolation.failed import WorkerFailed
from grpo_rewards.specs import RewardSpec

DTYPES = ("float32", "bfloat16", "float16")


def resolve_device(device: str) -> str:
    """``auto``: the policy's device (the local rank's CUDA device when there is one), else ``device``."""
    if device != "auto":
        return device
    import torch  # heavy: the reward is being built

    return f"cuda:{int(os.environ.get('LOCAL_RANK', '0'))}" if torch.cuda.is_available() else "cpu"


class RewardModelClient(ScoredRows):
    """One alias of a reward model: ``fn(completions, prompts=..., **columns) -> list[float]``, scored in the
    model's process with this alias's :class:`ScoreOptions`."""

    def __init__(self, process: ModelProcess, options: ScoreOptions, request_timeout: float, load_timeout: float,
                 name: str = "reward_model"):
        self.process, self.options = process, options
        self.request_timeout, self.load_timeout = request_timeout, load_timeout
        self.max_length = options.max_length
        self.__name__ = name
        self._init_counters()

    def __reduce__(self) -> Any:
        raise TypeError("a reward model alias calls its model process from the training process")  # a thread

    def worst_case(self) -> float:
        """Seconds one call can take: starting a fresh process (loading the model), then the request."""
        return self.load_timeout + self.request_timeout

    def row_groups(self, completions: list[Any], **_: Any) -> list[list[int]]:
        """One unit: a failed call is not retried row by row (each retry could start the process again)."""
        return [list(range(len(completions)))]

    def __call__(self, completions: list[Any], prompts: list[Any] | None = None, **_: Any) -> list[float]:
        if prompts is None:
            raise ValueError("a reward model needs the prompts")
        start = time.perf_counter()
        try:
            scores, cut, _seconds = self.process.score(prompts, completions, self.options, self.request_timeout)
        except WorkerFailed as exc:  # the reward's failure: counted by its isolation, the next call starts afresh
            raise RuntimeError(f"its model process ({self.process.key.model} on {self.process.key.device}): "
                               f"{exc.message}; the next call starts a fresh one") from None
        self._count(len(scores), cut, time.perf_counter() - start)
        return scores

    def close(self) -> None:
        """Stop the model process (shared by every alias of the model; a later call starts it again)."""
        self.process.close()


def reward_model(model: str, adapter: str | None = None, device: str = "auto", dtype: str = "float32",
                 batch_size: int = 16, max_length: int | None = None, label: int = 0, normalise: str = "raw",
                 chat_template: str = "always", trust_remote_code: bool = False, request_timeout: float = 120.0,
                 load_timeout: float = 120.0) -> RewardModelClient:
    """A sequence-classification model's score of prompt + completion (through its chat template), batched,
    without gradients, in the model's process; ``normalise`` = raw (the logit of ``label``), sigmoid or softmax."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    options = ScoreOptions(batch_size, max_length, label, normalise, chat_template)
    key = ModelKey(str(model), adapter, resolve_device(device), dtype, trust_remote_code)
    return client_of(key, options, request_timeout, load_timeout)


def client_of(key: ModelKey, options: ScoreOptions, request_timeout: float = 120.0, load_timeout: float = 120.0,
              name: str = "reward_model") -> RewardModelClient:
    """An alias of ``key``'s model scoring with ``options``: the model's process started (its model loaded) when
    it is not running yet, and ``options.label`` checked against the model's labels."""
    for what, value in (("request_timeout", request_timeout), ("load_timeout", load_timeout)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
            raise ValueError(f"{what} must be a positive, finite number of seconds, got {value!r}")
    process = model_process(key, float(load_timeout))
    try:
        info = process.info(float(request_timeout))  # the process started and the model loaded, once per key
    except WorkerFailed as exc:
        raise ValueError(f"reward model {key.model!r}: {exc.message}") from None
    options.check_label(info["labels"])
    return RewardModelClient(process, options, float(request_timeout), float(load_timeout), name)


SPEC = RewardSpec(
    name="reward_model",
    factory=reward_model,
    example='''[rewards.preference]
use = "reward_model"
model = "Skywork/Skywork-Reward-V2-Qwen3-0.6B"   # a path or hub id of a sequence-classification model
weight = 0.5
normalise = "sigmoid"  # raw (the logit) | sigmoid | softmax (the probability of `label`)
batch_size = 16
max_length = 4096      # longer texts keep their last 4096 tokens (truncated_share in the metrics)
device = "auto"        # the policy's device, or "cuda:1": a second device keeps it off the policy's
request_timeout = 120  # seconds a batch may take; a model process that hangs is killed, the next call restarts it
''',
)
