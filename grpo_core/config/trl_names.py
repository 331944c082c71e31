"""TRL's ``GRPOConfig`` fields in our run config: the one table both directions read.

:data:`TRL_FIELDS` lists every ``trl.GRPOConfig`` field a TRL user sets in practice (TRL 1.16: the GRPO fields
and the ``TrainingArguments`` ones GRPO runs use), each with TRL's default and either our ``section.key`` (the
value carries over, through :data:`TO_OURS` / :data:`TO_TRL` where the spelling differs) or why we cannot
honour it. Readers:

- ``grpo_core.trl_args`` turns a ``trl.GRPOConfig`` (or a flat dict of its keys) into our sections;
- ``grpo_core.trainer_backends.trl_mapping`` turns our config into ``trl.GRPOConfig`` arguments;
- ``grpo_core.config.reading`` answers a TRL name met in a run file, a dict or ``--set``
  (:func:`trl_hint`: "TRL's X is our section.key") instead of a look-alike of another meaning.

Kinds: ``same`` (one value, one key), ``derived`` (computed from several fields: the batch arithmetic, the
step count, checkpoint and evaluation cadence; :mod:`grpo_core.trl_args` holds the formulas), ``api`` (an
argument of ``GRPOTrainer`` itself), ``inert`` (changes nothing a run computes: any value is honoured), and
``unsupported`` (a value other than TRL's default is refused, naming the field and why). Data only: no TRL
import; a test keeps the defaults equal to the installed ``trl.GRPOConfig``'s.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TrlField:
    """One ``trl.GRPOConfig`` field: TRL's default, its kind (module docs), our key, and a note (how it maps,
    or why it is refused)."""

    default: Any
    kind: str
    ours: str | None = None
    note: str = ""


def _same(default: Any, ours: str) -> TrlField:
    return TrlField(default, "same", ours)


def _derived(default: Any, ours: str, note: str) -> TrlField:
    return TrlField(default, "derived", ours, note)


def _no(default: Any, why: str) -> TrlField:
    return TrlField(default, "unsupported", None, why)


def _inert(default: Any, why: str) -> TrlField:
    return TrlField(default, "inert", None, why)


BATCH = "grpo.prompts_per_step"
STEPS = "grpo.max_steps"

TRL_FIELDS: dict[str, TrlField] = {
    # ---- TrainingArguments
    "output_dir": _same(None, "logging.output_dir"),
    "learning_rate": _same(1e-6, "grpo.learning_rate"),
    "weight_decay": _same(0.0, "grpo.weight_decay"),
    "adam_beta1": _same(0.9, "grpo.adam_beta1"),
    "adam_beta2": _same(0.999, "grpo.adam_beta2"),
    "max_grad_norm": _same(1.0, "grpo.max_grad_norm"),
    "lr_scheduler_type": _same("linear", "grpo.lr_scheduler"),
    "seed": _same(42, "grpo.seed"),
    "gradient_checkpointing": _same(True, "model.gradient_checkpointing"),
    "logging_steps": _same(10, "logging.log_every"),
    "run_name": _same(None, "logging.run_name"),
    "report_to": _same("none", "logging.report_to"),
    "disable_tqdm": _derived(None, "logging.progress", "the progress bar: progress = not disable_tqdm"),
    "save_total_limit": _same(None, "checkpoint.keep_last"),
    "push_to_hub": _same(False, "hub.push_to_hub"),
    "hub_model_id": _same(None, "hub.hub_model_id"),
    "hub_private_repo": _same(None, "hub.hub_private_repo"),
    "hub_strategy": _same("every_save", "hub.hub_strategy"),
    "hub_token": _same(None, "hub.hub_token"),
    "hub_revision": _same(None, "hub.hub_revision"),
    "eval_on_start": _same(False, "logging.eval_on_start"),
    "warmup_steps": _derived(0, "grpo.warmup_ratio", "a ratio of the run's steps (a number of steps is divided "
                                                      "by the step count)"),
    "per_device_train_batch_size": _derived(8, BATCH, "a step's generation batch is generation_batch_size "
                                                      "completions: prompts_per_step = it / num_generations"),
    "gradient_accumulation_steps": _same(1, "grpo.gradient_accumulation_steps"),
    "max_steps": _derived(-1, STEPS, "TRL counts optimizer steps; ours counts generation batches: max_steps / "
                                     "(num_iterations x steps_per_generation / gradient_accumulation_steps)"),
    "num_train_epochs": _derived(3.0, STEPS, "the steps of that many passes over the rows, "
                                             "len(train_dataset) // prompts_per_step each, as TRL counts"),
    "save_strategy": _derived("steps", "checkpoint.every", "\"steps\": every save_steps; \"no\": never"),
    "save_steps": _derived(500, "checkpoint.every", "in our steps (save_steps / num_iterations)"),
    "eval_strategy": _derived("no", "logging.eval_every", "\"steps\": every eval_steps; \"no\": never"),
    "eval_steps": _derived(None, "logging.eval_every", "in our steps (eval_steps / num_iterations)"),
    "logging_strategy": _derived("steps", "logging.log_every", "\"steps\": every logging_steps"),
    "use_cpu": _inert(False, "the device is the one the model is on (CUDA when there is one)"),
    "bf16": _inert(None, "no mixed-precision autocast: the model runs in the dtype it is loaded in (load it in "
                         "bfloat16 with model_init_kwargs={\"dtype\": \"bfloat16\"}, or [model] dtype)"),
    "fp16": _no(False, "the model runs in the dtype it is loaded in: load it in float16 "
                       "(model_init_kwargs={\"dtype\": \"float16\"}, or [model] dtype)"),
    "per_device_eval_batch_size": _inert(8, "held-out rows are generated prompts_per_step * num_generations at a "
                                            "time"),
    "dataloader_num_workers": _inert(0, "rows are read in the training process"),
    "dataloader_pin_memory": _inert(True, "rows are read in the training process"),
    "dataloader_drop_last": _inert(False, "steps take whole groups of prompts"),
    "accelerator_config": _inert(None, "the processes are the project's own (grpo train --nproc), not Accelerate's: "
                                       "each reads its share of the rows (dispatch_batches=True is refused with "
                                       "an iterable train_dataset, as TRL refuses it)"),
    "logging_first_step": _inert(False, "every logged step is in metrics.jsonl"),
    "do_train": _inert(False, "train() trains"),
    "do_eval": _inert(False, "evaluate() evaluates"),
    "remove_unused_columns": _inert(False, "every dataset column reaches the rewards, as with TRL's default"),
    "use_liger_kernel": _no(False, "the log-probs come from the project's own chunked head "
                                   "(grpo_core.policy.logprobs), not Liger's kernels"),
    "torch_compile": _no(False, "the model is not compiled"),
    "resume_from_checkpoint": _no(None, "pass resume=True to GRPOTrainer (it resumes the run folder's last "
                                        "checkpoint)"),
    "optim": _no("adamw_torch_fused", "the optimizer is AdamW (grpo.adam_beta1/2, weight_decay)"),
    "lr_scheduler_kwargs": _no(None, "the scheduler takes grpo.lr_scheduler and grpo.warmup_ratio only"),
    # ---- GRPOConfig: model and data
    "model_init_kwargs": _derived(None, "model.dtype", "its dtype, attn_implementation, revision and "
                                                       "trust_remote_code are [model]'s keys; others are refused"),
    "trust_remote_code": _same(False, "model.trust_remote_code"),
    "disable_dropout": _no(False, "dropout is left as the model has it"),
    "cast_lm_head_to_fp32": _same(False, "model.cast_lm_head_to_fp32"),
    "shuffle_dataset": _same(True, "data.shuffle"),
    "pad_to_multiple_of": _inert("auto", "padding changes no number a step computes"),
    "router_aux_loss_coef": _same(None, "grpo.router_aux_loss_coef"),
    # ---- GRPOConfig: generation
    "num_generations": _same(8, "generation.num_generations"),
    "num_generations_eval": _same(None, "generation.num_generations_eval"),
    "max_completion_length": _same(512, "generation.max_completion_length"),
    "ds3_gather_for_generation": _inert(True, "ZeRO-3 is not offered ([distributed] zero_stage <= 2)"),
    "generation_batch_size": _derived(None, BATCH, "prompts_per_step = generation_batch_size / num_generations "
                                                   "(grpo.steps_per_generation splits it over optimizer steps)"),
    "steps_per_generation": _same(None, "grpo.steps_per_generation"),
    "temperature": _same(1.0, "generation.temperature"),
    "top_p": _same(1.0, "generation.top_p"),
    "top_k": _same(0, "generation.top_k"),
    "min_p": _same(None, "generation.min_p"),
    "repetition_penalty": _same(1.0, "generation.repetition_penalty"),
    "generation_kwargs": TrlField(None, "api", "generation_kwargs", "passed to generate()"),
    "chat_template_kwargs": TrlField(None, "api", "chat_template_kwargs",
                                     "passed to apply_chat_template()"),
    "cache_implementation": _inert(None, "generation uses the model's own cache"),
    "use_transformers_continuous_batching": _no(False, "the transformers backend samples a step's groups in one "
                                                       "batch with their prompts shared"),
    "transformers_continuous_batching_config": _no(None, "see use_transformers_continuous_batching"),
    "use_transformers_paged": _no(False, "see use_transformers_continuous_batching"),
    # ---- GRPOConfig: vLLM
    "use_vllm": _derived(False, "generation.backend", "True: backend = \"vllm\""),
    "vllm_mode": _same("colocate", "generation.vllm_mode"),
    "vllm_model_impl": _no("vllm", "vLLM loads its own implementation of the model"),
    "vllm_enable_sleep_mode": _derived(False, "generation.vllm_sleep_level", "True: sleep level 2, as TRL's"),
    "vllm_structured_outputs_regex": _no(None, "structured outputs are not passed to vLLM"),
    "vllm_server_base_url": _same(None, "generation.vllm_server_url"),
    "vllm_server_host": _same("0.0.0.0", "generation.vllm_server_host"),
    "vllm_server_port": _same(8000, "generation.vllm_server_port"),
    "vllm_server_timeout": _same(240.0, "generation.vllm_server_timeout"),
    "vllm_group_port": _no(51216, "weights reach the server through its own endpoint, not an NCCL group"),
    "vllm_gpu_memory_utilization": _same(0.3, "generation.vllm_gpu_memory_utilization"),
    "vllm_max_model_length": _same(None, "generation.vllm_max_model_len"),
    "vllm_tensor_parallel_size": _no(1, "the colocated engine runs on one GPU per process"),
    "vllm_importance_sampling_correction": _derived(True, "generation.importance_sampling",
                                                    "False: importance_sampling = \"none\""),
    "vllm_importance_sampling_mode": _same("sequence_mask", "generation.importance_sampling"),
    "vllm_importance_sampling_clip_max": _same(3.0, "generation.importance_sampling_max"),
    "vllm_importance_sampling_clip_min": _same(None, "generation.importance_sampling_min"),
    "vllm_importance_sampling_cap": _same(None, "generation.importance_sampling_max"),
    # ---- GRPOConfig: the objective
    "beta": _same(0.0, "grpo.beta"),
    "num_iterations": _same(1, "grpo.num_iterations"),
    "epsilon": _same(0.2, "grpo.epsilon"),
    "delta": _same(None, "grpo.delta"),
    "epsilon_high": _same(None, "grpo.epsilon_high"),
    "loss_type": _same("dapo", "grpo.loss_type"),
    "scale_rewards": _same("group", "grpo.scale_rewards"),
    "multi_objective_aggregation": _same("sum_then_normalize", "grpo.multi_objective_aggregation"),
    "mask_truncated_completions": _same(False, "grpo.mask_truncated_completions"),
    "reward_weights": TrlField(None, "api", "reward_weights", "the weights of reward_funcs"),
    "importance_sampling_level": _same("token", "grpo.importance_sampling_level"),
    "sapo_temperature_neg": _same(1.05, "grpo.sapo_temperature_neg"),
    "sapo_temperature_pos": _same(1.0, "grpo.sapo_temperature_pos"),
    "vespo_k_pos": _same(2.0, "grpo.vespo_k_pos"),
    "vespo_lambda_pos": _same(3.0, "grpo.vespo_lambda_pos"),
    "vespo_k_neg": _same(3.0, "grpo.vespo_k_neg"),
    "vespo_lambda_neg": _same(2.0, "grpo.vespo_lambda_neg"),
    "sync_ref_model": _same(False, "grpo.sync_ref_model"),
    "ref_model_mixup_alpha": _same(0.6, "grpo.ref_model_mixup_alpha"),
    "ref_model_sync_steps": _same(512, "grpo.ref_model_sync_steps"),
    "top_entropy_quantile": _same(1.0, "grpo.top_entropy_quantile"),
    "entropy_coef": _same(0.0, "grpo.entropy_coef"),
    "use_adaptive_entropy": _same(False, "grpo.use_adaptive_entropy"),
    "entropy_coef_min": _same(0.0, "grpo.entropy_coef_min"),
    "entropy_coef_max": _same(1.0, "grpo.entropy_coef_max"),
    "entropy_coef_delta": _same(0.005, "grpo.entropy_coef_delta"),
    "entropy_target": _same(0.2, "grpo.entropy_target"),
    "max_tool_calling_iterations": _same(None, "tools.max_tool_calling_iterations"),
    "off_policy_mask_threshold": _same(None, "grpo.off_policy_mask_threshold"),
    "use_bias_correction_kl": _same(True, "grpo.use_bias_correction_kl"),
    # ---- GRPOConfig: logging
    "log_completions": _inert(False, "completions are logged to the run folder's samples.jsonl "
                                     "(logging.sample_every)"),
    "log_multimodal": _inert(True, "text models only"),
    "num_completions_to_print": _inert(None, "completions are logged to samples.jsonl (logging.num_samples)"),
    "log_unique_prompts": _inert(False, "completions are logged to samples.jsonl"),
    "log_completions_hub_repo": _no(None, "completions are logged to the run folder's samples.jsonl"),
}

# the values whose spelling differs: TRL's value -> ours, and back (the rest carry over as they are)
TO_OURS: dict[str, Callable[[Any], Any]] = {
    "min_p": lambda v: 0.0 if v is None else float(v),
    "output_dir": lambda v: "" if v is None else str(v),
    "run_name": lambda v: v or "",
    "report_to": lambda v: "none" if not v else (list(v) if isinstance(v, (list, tuple)) else v),
    "save_total_limit": lambda v: 10**6 if v is None else int(v),
    "hub_model_id": lambda v: v or "",
    "hub_token": lambda v: v or "",
    "hub_revision": lambda v: v or "",
    "vllm_server_base_url": lambda v: v or "",
}
TO_TRL: dict[str, Callable[[Any], Any]] = {
    "min_p": lambda v: v or None,  # 0 = off on both sides
    "report_to": lambda v: "none",  # our trainer's trackers log the TRL backend's metrics (trl_mapping)
}


def enum_value(value: Any) -> Any:
    """A transformers enum (``SchedulerType.LINEAR``, ``IntervalStrategy.STEPS``) as its plain value."""
    return getattr(value, "value", value)


def to_ours(name: str, value: Any) -> Any:
    """TRL's value of ``name`` in our spelling."""
    value = enum_value(value)
    return TO_OURS[name](value) if name in TO_OURS else value


def same_fields() -> dict[str, str]:
    """``{TRL field: our section.key}`` of the fields whose value carries over as it is (kind ``same``),
    each of our keys once (the first TRL field naming it)."""
    out: dict[str, str] = {}
    for name, f in TRL_FIELDS.items():
        if f.kind == "same" and f.ours and f.ours not in out.values() and name != "vllm_importance_sampling_cap":
            out[name] = f.ours
    return out


def trl_hint(name: str) -> str | None:
    """What to tell a user who wrote TRL's field ``name`` where we expected our own key: "TRL's X is our
    section.key" or "TRL's X is not supported: why"; None for a name TRL's ``GRPOConfig`` does not have."""
    f = TRL_FIELDS.get(name)
    if f is None:
        return None
    if f.kind == "unsupported":
        return f"TRL's {name} is not supported: {f.note}"
    if f.kind == "inert":
        return f"TRL's {name} has no key here: {f.note}"
    if f.kind == "api":
        return f"TRL's {name} has no key in a run file: pass args=GRPOConfig({name}=...) to GRPOTrainer ({f.note})"
    how = f" ({f.note})" if f.note else ""
    return f"TRL's {name} is our {f.ours}{how}"


# TRL's logged metric names -> ours (names both sides share, ``loss``, ``kl``, ``clip_ratio/...``, pass as is);
# ``rewards/<alias>/mean`` is our ``rewards/<alias>``
METRIC_RENAMES = {
    "reward": "reward/mean",
    "reward_std": "reward/std",
    "completions/mean_length": "completion_length/mean",
    "completions/min_length": "completion_length/min",
    "completions/max_length": "completion_length/max",
    "completions/clipped_ratio": "truncated_ratio",
}
_TRL_NAMES = {ours: trl for trl, ours in METRIC_RENAMES.items()}
_REWARD_MEAN = re.compile(r"^rewards/(.+)/mean$")
_OUR_REWARD = re.compile(r"^rewards/([^/]+)$")


def our_metric_name(name: str) -> str:
    """TRL's name of a logged metric in ours."""
    if name in METRIC_RENAMES:
        return METRIC_RENAMES[name]
    match = _REWARD_MEAN.match(name)
    return f"rewards/{match.group(1)}" if match else name


def trl_metric_name(name: str) -> str:
    """Our name of a logged metric in TRL's (``eval/<x>`` -> ``eval_<TRL's x>``)."""
    if name.startswith("eval/"):
        return "eval_" + trl_metric_name(name.removeprefix("eval/"))
    if name in _TRL_NAMES:
        return _TRL_NAMES[name]
    match = _OUR_REWARD.match(name)
    return f"rewards/{match.group(1)}/mean" if match else name
