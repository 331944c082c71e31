"""The ``trl`` trainer backend: a run config run by ``trl.GRPOTrainer``.

``TRLBackend(config, resume=False).train() -> dict`` (what ``grpo train`` calls for ``[trainer] backend =
"trl"``). What is shared with the built-in trainer, not copied:

* the model and tokenizer: ``grpo_core.policy.models`` (dtype, revision, attention, 4-bit, GGUF; fp32 master
  weights and 16-bit autocast on a GPU for a full fine-tune, dropout off), LoRA handed to TRL as
  ``peft_config`` (``models.lora_config``);
* the rows and prompts: ``grpo_core.data`` (source, columns, limit, held-out rows, chat template) and the
  built-in trainer's over-long prompt rule (``trainer.fit_prompts``); the dataset's ``prompt`` column is
  the formatted prompt text, every other column goes to the rewards;
* the rewards: ``ComposedReward.trl_reward_funcs()``, one TRL reward function per ``[rewards.<alias>]``,
  named by its alias (TRL logs ``rewards/<alias>/mean``), with the weights as ``reward_weights``; each
  reward's weight is logged too, as ``rewards/<alias>/weight``;
* the run folder: ``metrics.jsonl`` under our metric names (``grpo_core.run_folder.metrics``, from each TRL log
  record), ``config.json``, ``curves.png``, and the final ``model/`` (and ``merged/``) as our trainer
  writes them; TRL's checkpoints are its own ``checkpoint-<step>`` folders, which ``--resume`` continues.

How each key maps onto ``GRPOConfig`` is :mod:`grpo_core.trainer_backends.trl_mapping`; the keys TRL has no
equivalent for are printed as warnings, one line each, when the backend starts.

Ctrl-C (SIGINT) finishes the current step, writes a TRL checkpoint and the final model, and returns
``interrupted: True`` (``grpo train`` exits 130), as the built-in trainer does; a second Ctrl-C stops at once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from grpo_core.config import RunConfig, as_run_config
from grpo_core.context import TrainingContext
from grpo_core.data import format_prompt, train_eval_rows
from grpo_core.outputs import check_outputs
from grpo_core.outputs.hub import HubPusher
from grpo_core.policy import models
from grpo_core.policy.models import save_model
from grpo_core.run_folder.checkpoints import RunFolderError
from grpo_core.run_folder.layout import MERGED_DIR, MODEL_DIR, RECORDS
from grpo_core.run_folder.lock import INHERITED, hold
from grpo_core.run_folder.metrics import MetricsLogger
from grpo_core.trainer import fit_prompts
from grpo_core.trainer_backends.trl_mapping import grpo_config_kwargs, no_trl_equivalent, our_metrics
from grpo_rewards.plugins import get_registry


def _orphan_checkpoints(run_dir: Path) -> list[Path]:
    """TRL checkpoints an earlier run left without its records (what ``--overwrite`` leaves: it clears this
    toolkit's files only); a fresh run removes them when it starts, so that they can neither be rotated in
    as "newest" nor resumed later. Checkpoints next to an earlier run's records are refused instead."""

    found = sorted((p for p in run_dir.glob("checkpoint-*") if (p / "trainer_state.json").is_file()),
                   key=lambda p: p.name)
    if found and any((run_dir / name).is_file() and (run_dir / name).stat().st_size > 0 for name in RECORDS):
        raise RunFolderError(f"{run_dir} holds an earlier TRL run ({', '.join(p.name for p in found)}): continue it "
                             "with --resume, or replace it with --overwrite")
    return found


def _grpo_trainer_class() -> Any:
    """``trl.GRPOTrainer`` logging each reward's weight with its training metrics."""
    from trl import GRPOTrainer

    class GRPOTrainerWithWeights(GRPOTrainer):
        reward_weight_logs: dict[str, float] = {}

        def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
            if self.model.training and "train_runtime" not in logs:  # a training record, not the run summary
                logs.update(self.reward_weight_logs)
            super().log(logs, start_time)

    return GRPOTrainerWithWeights


def _run_log_callback(backend: TRLBackend) -> Any:
    """A ``TrainerCallback`` writing TRL's log records to our run folder and calling our lifecycle hooks."""
    from transformers import TrainerCallback


    cfg, hook = backend.cfg, backend.registry.hook

    class RunLog(TrainerCallback):
        """A step's training record is held until the step ends, so that the evaluation TRL runs right
        after it lands on the same ``metrics.jsonl`` line, as in the built-in trainer."""

        logger: MetricsLogger | None = None
        pending: tuple[int, dict[str, Any]] | None = None

        def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.logger = MetricsLogger(backend.run_dir, cfg.logging, total_steps=args.max_steps,
                                        start_step=state.global_step, config=cfg.to_dict())
            hook.grpo_on_train_start(context=backend.context(state.global_step), trainer=backend)

        def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None,
                   **kwargs: Any) -> None:
            if not logs or "train_runtime" in logs or self.logger is None:
                return
            metrics = our_metrics(logs)
            if any(k.startswith("eval/") for k in metrics):
                if self.pending is None or self.pending[0] != state.global_step:
                    self.flush()
                    self.pending = (state.global_step, {})
                self.pending[1].update(metrics)
                self.flush()
                return
            self.flush()
            for entry in cfg.rewards.entries:
                metrics[f"rewards/{entry.alias}/failures"] = entry.fn.stats.failures
            self.pending = (state.global_step, metrics)

        def flush(self) -> None:
            if self.pending is None or self.logger is None:
                return
            step, metrics = self.pending
            self.pending = None
            self.logger.log(step, metrics)
            backend.last_metrics = metrics
            hook.grpo_on_step_end(context=backend.context(step), step=step, metrics=metrics, trainer=backend)

        def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.flush()

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            # Ctrl-C: stop after a whole step of ours (its optimizer steps: num_iterations x slices), with a checkpoint
            if backend.stop.is_set() and state.global_step % cfg.optimizer_steps_per_step == 0:
                control.should_save = True
                control.should_training_stop = True
            if backend.eval_dataset is not None and state.global_step == args.max_steps:
                control.should_evaluate = True  # and at the end, as the built-in trainer does

        def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.flush()
            path = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            hook.grpo_on_checkpoint(context=backend.context(state.global_step), step=state.global_step, path=str(path),
                                    trainer=backend)
            if backend.hub is not None and state.global_step < args.max_steps and state.is_world_process_zero:
                backend.hub.on_save(backend.run_dir, state.global_step, path,
                                    lambda out: save_model(backend.trainer.model, backend.tokenizer, out),
                                    backend.last_metrics)

        def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            self.flush()

    return RunLog()


class TRLBackend:
    """See the module docs. Loads the data and the model when built (``DataError`` / ``OSError`` with one
    line); ``ImportError`` when TRL is missing or too old, ``ConfigError`` for a value TRL cannot run."""

    def __init__(self, config: RunConfig | str | Path | dict[str, Any], *, resume: bool = False,
                 registry: Any = None):

        self.cfg = cfg = as_run_config(config)
        self.registry = registry or get_registry()
        self.run_dir = Path(cfg.logging.output_dir)
        self.last_metrics: dict[str, Any] = {}
        self.stop = threading.Event()

        self.hub = HubPusher.of(cfg)  # [hub] push_to_hub (grpo_core.outputs.hub)
        try:
            import trl
        except ImportError:
            raise ImportError("trainer.backend = \"trl\" needs TRL: pip install trl") from None
        kwargs = grpo_config_kwargs(cfg)  # ConfigError for a value TRL cannot run
        fields = {f.name for f in dataclasses.fields(trl.GRPOConfig)}
        missing = [name for name in kwargs if name not in fields]
        if missing:
            raise ImportError(f"trainer.backend: TRL {trl.__version__}'s GRPOConfig has no {', '.join(missing)}; "
                             f"this backend needs TRL 1.x")
        self.resume_from: str | None = None
        self.orphans: list[Path] = []
        if resume:
            from transformers.trainer_utils import get_last_checkpoint

            last = get_last_checkpoint(str(self.run_dir)) if self.run_dir.is_dir() else None
            if last is None:
                raise FileNotFoundError(f"--resume: no TRL checkpoint (checkpoint-<step>) in {self.run_dir}")
            self.resume_from = last
        else:
            self.orphans = _orphan_checkpoints(self.run_dir)  # removed when training starts
        for key, why in no_trl_equivalent(cfg).items():
            print(f"warning: trainer.backend = \"trl\": {key} has no TRL equivalent: {why}; ignored", file=sys.stderr)

        import torch


        self.tokenizer = models.load_tokenizer(cfg)
        self.train_dataset, self.eval_dataset = self._datasets()
        if cfg.logging.eval_every and self.eval_dataset is None:
            print("warning: logging.eval_every: no held-out rows; the trl backend does not evaluate", file=sys.stderr)
            kwargs.update(eval_strategy="no")
        model = models.load_base_model(cfg)
        models.prepare_base_model(model, cfg, self.tokenizer)  # fp32 master weights, dropout off: as our trainer
        if torch.cuda.is_available() and not cfg.quantization.load_in_4bit:
            model.to("cuda")
        # mixed precision as our trainer: autocast in a 16-bit checkpoint's dtype on a GPU, fp16 loss scaling
        on_gpu = next(model.parameters()).device.type == "cuda"
        kwargs.update(bf16=models.compute_dtype(model) == torch.bfloat16, fp16=on_gpu and models.uses_fp16(model))
        self.args = trl.GRPOConfig(**kwargs)

        reward_funcs, weights = cfg.rewards.trl_reward_funcs()
        trainer_class = _grpo_trainer_class()
        self.trainer = trainer_class(
            model=model,
            reward_funcs=reward_funcs,
            args=self.args,
            train_dataset=self.train_dataset,
            eval_dataset=self.eval_dataset,
            processing_class=self.tokenizer,
            peft_config=models.lora_config(cfg) if cfg.lora.enabled else None,
            callbacks=[_run_log_callback(self)],
        )
        self.trainer.reward_weight_logs = {f"rewards/{alias}/weight": weight
                                           for alias, weight in zip(cfg.rewards.aliases, weights, strict=True)}
        from transformers.trainer_callback import PrinterCallback

        self.trainer.remove_callback(PrinterCallback)  # our metrics logger reports progress

    def _datasets(self) -> tuple[Any, Any]:
        """The training and held-out rows as TRL datasets: ``prompt`` is the formatted prompt text; over-long
        prompts dropped or refused as the built-in trainer does (``data.overlong_prompts``)."""
        from datasets import Dataset


        d = self.cfg.data
        rows, eval_rows = train_eval_rows(d, self.registry)
        out = []
        for part, where in ((rows, "training"), (eval_rows if self.cfg.logging.eval_every else [], "held-out")):
            prompts, part = fit_prompts([format_prompt(r, d, self.tokenizer) for r in part], part, self.tokenizer,
                                        d.max_prompt_length, d.overlong_prompts, not d.chat_template, where)
            out.append(Dataset.from_list([{**r, "prompt": p} for r, p in zip(part, prompts, strict=True)])
                       if part else None)
        return out[0], out[1]

    def context(self, step: int) -> TrainingContext:
        """What the training-event hooks are told about the run at TRL's global step ``step``."""
        return TrainingContext("trl", step, self.args.max_steps, self.run_dir, self.cfg, self.last_metrics)

    def train(self) -> dict[str, Any]:
        """Run TRL's training loop; write the final model like our trainer; returns the last metrics. The run
        folder is held for the run (:mod:`grpo_core.run_folder.lock`), as the built-in trainer holds it."""
        owner = self.trainer.is_world_process_zero() and not os.environ.get(INHERITED)
        with hold(self.run_dir, error=RunFolderError, file=self.cfg.path) if owner else contextlib.nullcontext():
            return self._train()

    def _train(self) -> dict[str, Any]:
        check_outputs(self.cfg)  # a named tracker that is not installed, a push without a token: before the first step
        callback = next(c for c in self.trainer.callback_handler.callbacks if hasattr(c, "logger"))
        plot = None
        for path in self.orphans:
            shutil.rmtree(path, ignore_errors=True)
        previous_handler = self._install_sigint()
        try:
            self.trainer.train(resume_from_checkpoint=self.resume_from)
            model = self.trainer.model
            save_model(model, self.tokenizer, self.run_dir / MODEL_DIR)
            if self.cfg.checkpoint.save_merged:
                save_model(model, self.tokenizer, self.run_dir / MERGED_DIR, merged=True)
        finally:
            if previous_handler is not None:
                signal.signal(signal.SIGINT, previous_handler)
            callback.flush()
            if callback.logger is not None:
                plot = callback.logger.close()
            self.cfg.rewards.close()  # the rewards' worker and model processes end with the run
        step = self.trainer.state.global_step
        interrupted = self.stop.is_set() and step < self.args.max_steps
        summary = {**self.last_metrics, "step": step, "interrupted": interrupted, "run_dir": str(self.run_dir),
                   "plot": str(plot) if plot else None, "log_history": list(self.trainer.state.log_history)}
        self.registry.hook.grpo_on_train_end(context=self.context(step), metrics=summary, trainer=self)
        if self.hub is not None and not interrupted and self.trainer.is_world_process_zero():
            summary["hub_url"] = self.hub.on_end(self.run_dir, self.last_metrics)  # a failure: the run folder stays
        return summary

    def _install_sigint(self) -> Any:
        if threading.current_thread() is not threading.main_thread():
            return None

        def handler(signum: int, frame: Any) -> None:
            if self.stop.is_set():  # a second Ctrl-C: stop now
                raise KeyboardInterrupt
            self.stop.set()
            # a raw write: the handler may interrupt buffered io in the middle of a print
            os.write(2, b"SIGINT: finishing this step, then checkpoint and exit (Ctrl-C again to stop now)\n")

        return signal.signal(signal.SIGINT, handler)
