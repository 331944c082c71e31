"""A reward model in its own process: :class:`ModelProcess`, one per (model, adapter, device, dtype) in a
training process, called by every reward alias that scores with that model.

The process is a :class:`grpo_rewards.isolation.process.ProcessWorker` (a fresh interpreter in its own session,
one request at a time, its whole process group killed at a deadline and started again by the next call) holding a
:class:`ModelHost`: the host loads the model once when the process starts (``load_timeout``) and answers
``score`` requests with :class:`grpo_core.trl_reward_models.Scorer`, batched and without gradients. Every alias of
one model sends its rows to the same process, so the weights are in memory once, on the device named, off the
training process's own memory.

What can go wrong is the reward's failure, never the run's: a request that does not answer within its
``request_timeout`` kills the process (:class:`grpo_rewards.isolation.failed.WorkerFailed` ``timeout``), a process
that dies is a ``crash``, and the next call starts a fresh one. The process ends with the run: the trainer closes
its rewards when it ends (:meth:`ModelProcess.close`), an exiting training process stops its workers (``atexit``),
and a training process killed outright is noticed by the host itself, which exits when its parent is gone (a
closed pipe, or a new parent process id).
"""

from __future__ import annotations

import os
import pickle
import threading
import time
from dataclasses import dataclass
from typing import Any

from grpo_core.trl_reward_models import ScoreOptions
from grpo_rewards.isolation.process import ProcessWorker

PARENT_POLL_S = 0.5  # how often the host looks for its parent


@dataclass(frozen=True)
class ModelKey:
    """What one model process holds: the model (a path or hub id), its adapter, device and dtype."""

    model: str
    adapter: str | None
    device: str
    dtype: str
    trust_remote_code: bool = False


def _watch_parent(parent: int) -> None:
    """In the model process: exit as soon as the process that started it is gone (killed outright, it could not
    stop us; its pipe may stay open in a process it forked)."""
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_S)
    os._exit(0)


class ModelHost:
    """The model process's object: built from a :class:`ModelKey` in the parent, pickled, and loaded in the
    child when unpickled (so loading is the process's start, under ``load_timeout``)."""

    def __init__(self, key: ModelKey):
        self.key = key
        self.scorer: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return {"key": self.key}

    def __setstate__(self, state: dict[str, Any]) -> None:
        threading.Thread(target=_watch_parent, args=(os.getppid(),), name="parent-watch", daemon=True).start()
        self.key = state["key"]
        self.scorer = self._load()

    def _load(self) -> Any:
        import torch  # heavy: in the model process only
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        from grpo_core.trl_reward_models import Scorer

        k = self.key
        torch.set_grad_enabled(False)
        model = AutoModelForSequenceClassification.from_pretrained(k.model, dtype=getattr(torch, k.dtype),
                                                                   trust_remote_code=k.trust_remote_code)
        if k.adapter:
            from peft import PeftModel  # heavy: only with an adapter

            model = PeftModel.from_pretrained(model, k.adapter).merge_and_unload()
        own = k.adapter and os.path.isfile(os.path.join(k.adapter, "tokenizer_config.json"))
        tokenizer = AutoTokenizer.from_pretrained(k.adapter if own else k.model,
                                                  trust_remote_code=k.trust_remote_code)
        model.requires_grad_(False)
        return Scorer(model.to(k.device), tokenizer)


def serve(host: ModelHost, request: tuple[Any, ...]) -> tuple[str, Any]:
    """In the model process: ``("info",)`` -> the process id and the model's labels; ``("score", prompts,
    completions, options)`` -> ``(scores, rows cut, seconds)``. What the scorer raises comes back as
    ``("error", message)``: a bad row is the call's failure, not the process's."""
    try:
        if request[0] == "info":
            return "ok", {"pid": os.getpid(), "labels": host.scorer.labels}
        _, prompts, completions, options = request
        start = time.perf_counter()
        scores, cut = host.scorer.score(prompts, completions, options)
        return "ok", (scores, cut, time.perf_counter() - start)
    except Exception as exc:  # noqa: BLE001 - reported to the caller
        return "error", f"{type(exc).__name__}: {exc}"


class ModelProcess:
    """The process of one :class:`ModelKey` (see module docs). Thread-safe; one request at a time."""

    def __init__(self, key: ModelKey, load_timeout: float):
        self.key = key
        self.worker = ProcessWorker(pickle.dumps(ModelHost(key), protocol=pickle.HIGHEST_PROTOCOL),
                                    f"reward model {key.model}", serve, start_timeout=load_timeout)

    def _request(self, request: tuple[Any, ...], timeout: float) -> Any:
        status, value = self.worker.request(request, timeout)
        if status != "ok":
            raise RuntimeError(f"reward model {self.key.model!r}: {value}")
        return value

    def info(self, timeout: float) -> dict[str, Any]:
        """Starts the process when it is not running (loading the model): its ``pid`` and the model's ``labels``."""
        return self._request(("info",), timeout)

    def score(self, prompts: list[Any], completions: list[Any], options: ScoreOptions,
              timeout: float) -> tuple[list[float], int, float]:
        """``(scores, rows cut to max_length, seconds)``; :class:`grpo_rewards.isolation.failed.WorkerFailed`
        when the process does not answer within ``timeout`` (it is killed) or dies."""
        return self._request(("score", list(prompts), list(completions), options), timeout)

    @property
    def pid(self) -> int | None:
        """The running process's id (None when none runs)."""
        return self.worker.pid

    def close(self) -> None:
        """Stop the process (a later call starts a new one)."""
        self.worker.close()


_PROCESSES: dict[ModelKey, ModelProcess] = {}
_LOCK = threading.Lock()


def model_process(key: ModelKey, load_timeout: float) -> ModelProcess:
    """The one :class:`ModelProcess` of ``key`` in this process, started (its model loaded) on first use."""
    with _LOCK:
        process = _PROCESSES.get(key)
        if process is None:
            process = _PROCESSES[key] = ModelProcess(key, load_timeout)
    return process


__all__ = ["ModelHost", "ModelKey", "ModelProcess", "model_process", "serve"]
