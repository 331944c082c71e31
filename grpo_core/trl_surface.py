"""What TRL users and transformers' callbacks touch on a ``GRPOTrainer`` besides its arguments: the
``transformers.TrainerState`` (``state``, its ``log_history`` in TRL's metric names), the callback events
(:class:`CallbackRelay`), and ``train()``'s ``TrainOutput`` (:func:`train_output`).

The loop is :class:`grpo_core.trainer.Trainer`'s, untouched: the relay hears its training-event hooks (the
``grpo_on_*`` calls, through :class:`RelayRegistry`, which passes everything else to the real registry) and
turns them into transformers' events: ``on_train_begin``, ``on_step_begin``/``on_step_end``, ``on_log`` every
``logging_steps`` with the metrics of the steps since the last one averaged (TRL's ``log``; the closing record
carries those of the last, unlogged steps), ``on_evaluate`` when the step evaluated, ``on_save``, ``on_train_end``. ``control.should_training_stop`` set
by a callback stops the run after that step, as in transformers. Steps are TRL's: optimizer steps, ``optimizer_steps_per_step``
per step of ours.
"""

from __future__ import annotations

import math
import time
from typing import Any

from transformers import TrainerCallback, TrainerControl, TrainerState
from transformers.trainer_utils import TrainOutput

from grpo_core.config.trl_names import trl_metric_name
from grpo_rewards.tomlfile import ConfigError, Problem

EVENTS = {"grpo_on_train_start", "grpo_on_step_end", "grpo_on_checkpoint", "grpo_on_train_end"}


class GRPOTrainOutput(TrainOutput):
    """``transformers.trainer_utils.TrainOutput`` (``global_step``, ``training_loss``, ``metrics``); indexing by a
    name gives the run's summary as ``Trainer.train()`` returns it (``result["step"]``, ``result["run_dir"]``)."""

    summary: dict[str, Any]

    def __getitem__(self, key: Any) -> Any:
        return self.summary[key] if isinstance(key, str) else super().__getitem__(key)


def trl_logs(metrics: dict[str, Any]) -> dict[str, Any]:
    """One step's metrics under TRL's names, numbers only."""
    return {trl_metric_name(k): v for k, v in metrics.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool)}


class CallbackRelay:
    """transformers' callbacks fed from the trainer's hooks (module docs)."""

    def __init__(self, trainer: Any, callbacks: list[Any] | None):
        self.trainer = trainer
        self.callbacks: list[TrainerCallback] = []
        self.state = TrainerState()
        self.control = TrainerControl()
        self.losses: list[float] = []
        self.pending: dict[str, list[float]] = {}  # the metrics of the steps since the last logging step
        self.stopped_at: int | None = None  # the step a callback's control.should_training_stop ended the run
        self.started = time.monotonic()
        for cb in callbacks or []:
            self.add(cb)

    def add(self, callback: Any) -> None:
        """A ``TrainerCallback`` instance, or its class (instantiated, as transformers does)."""
        cb = callback() if isinstance(callback, type) else callback
        if not isinstance(cb, TrainerCallback):
            raise ConfigError([Problem("GRPOTrainer", None, "callbacks", f"expected a transformers.TrainerCallback, "
                                                                         f"got {type(cb).__name__}")])
        self.callbacks.append(cb)

    def fire(self, event: str, **kwargs: Any) -> None:
        t = self.trainer
        kwargs = {"model": t.model, "processing_class": t.tokenizer, "optimizer": getattr(t, "optimizer", None),
                  "lr_scheduler": getattr(t, "scheduler", None), **kwargs}
        for cb in self.callbacks:
            result = getattr(cb, event)(t.args, self.state, self.control, **kwargs)
            if isinstance(result, TrainerControl):
                self.control = result

    def _mu(self) -> int:
        return self.trainer.cfg.optimizer_steps_per_step

    # the trainer's hooks -------------------------------------------------------------------------------------
    def grpo_on_train_start(self, **_: Any) -> None:
        s = self.state
        s.max_steps = self.trainer.cfg.grpo.max_steps * self._mu()
        s.global_step = self.trainer.step * self._mu()
        s.logging_steps = self.trainer.cfg.logging.log_every
        s.is_world_process_zero = s.is_local_process_zero = True
        self.started = time.monotonic()
        self.fire("on_train_begin")
        self.fire("on_step_begin")

    def grpo_on_step_end(self, step: int, metrics: dict[str, Any], **_: Any) -> None:
        s, t = self.state, self.trainer
        before = s.global_step
        s.global_step, s.epoch = step * self._mu(), float(t.epoch)
        if "loss" in metrics:
            self.losses.append(float(metrics["loss"]))
        self.fire("on_step_end")
        logs = trl_logs(metrics)
        for key, value in logs.items():
            if not key.startswith("eval_"):
                self.pending.setdefault(key, []).append(value)
        every = max(s.logging_steps, 1)
        if s.global_step // every > before // every:  # a logging step (transformers: global_step % logging_steps)
            train = self._window()
            s.log_history.append({**train, "step": s.global_step})
            self.fire("on_log", logs=train)
        evals = {k: v for k, v in logs.items() if k.startswith("eval_")}
        if evals:
            s.log_history.append({**evals, "step": s.global_step})
            self.fire("on_evaluate", metrics=evals)
        if self.control.should_training_stop:
            self.stopped_at = step
            t._stop.set()
        elif step < t.cfg.grpo.max_steps:
            self.fire("on_step_begin")

    def _window(self) -> dict[str, float | None]:
        """The metrics of the steps since the last logged one, each averaged over its non-NaN values (None when
        none is left), as TRL's ``log`` does; the window then starts again."""
        out: dict[str, float | None] = {}
        for key, values in self.pending.items():
            valid = [v for v in values if not math.isnan(v)]
            out[key] = sum(valid) / len(valid) if valid else None
        self.pending = {}
        return out

    def grpo_on_checkpoint(self, **_: Any) -> None:
        self.fire("on_save")

    def grpo_on_train_end(self, **_: Any) -> None:
        self.fire("on_train_end")

    def summary(self) -> dict[str, Any]:
        """TRL's closing record: runtime, throughput and the mean training loss, with the metrics of the steps
        since the last logging step (TRL's ``log`` adds its pending metrics to every record it writes)."""
        runtime = time.monotonic() - self.started
        steps = max(self.state.global_step, 1)
        cfg = self.trainer.cfg
        out = {"train_runtime": runtime, "train_samples_per_second": cfg.sequences_per_step * steps / self._mu()
               / max(runtime, 1e-9), "train_steps_per_second": steps / max(runtime, 1e-9), "total_flos": 0.0,
               "train_loss": sum(self.losses) / len(self.losses) if self.losses else 0.0,
               "epoch": float(self.trainer.epoch)}
        self.state.log_history.append({**self._window(), **out, "step": self.state.global_step})
        return out


def train_output(relay: CallbackRelay, summary: dict[str, Any]) -> GRPOTrainOutput:
    metrics = relay.summary()
    out = GRPOTrainOutput(relay.state.global_step, metrics["train_loss"], metrics)
    out.summary = summary
    return out


class _HookRelay:
    def __init__(self, hook: Any, relay: CallbackRelay):
        self._hook, self._relay = hook, relay

    def __getattr__(self, name: str) -> Any:
        real = getattr(self._hook, name)
        if name not in EVENTS:
            return real

        def both(**kwargs: Any) -> Any:
            out = real(**kwargs)
            getattr(self._relay, name)(**kwargs)
            return out

        return both


class RelayRegistry:
    """The plugin registry as the trainer sees it: the real one, whose training-event hooks also reach the
    relay."""

    def __init__(self, registry: Any, relay: CallbackRelay):
        self._registry, self._relay = registry, relay

    def __getattr__(self, name: str) -> Any:
        return getattr(self._registry, name)

    @property
    def hook(self) -> Any:
        return _HookRelay(self._registry.hook, self._relay)
