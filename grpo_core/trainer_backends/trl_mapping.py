"""Our run config in TRL's terms: the ``trl.GRPOConfig`` arguments of a :class:`RunConfig`
(:func:`grpo_config_kwargs`), the keys TRL has no equivalent for (:data:`NO_TRL_EQUIVALENT`, one line
each; :func:`no_trl_equivalent` for one config), and TRL's logged metric names in ours
(:func:`our_metrics`).

Field names are those of TRL 1.x's ``GRPOConfig`` (a ``transformers.TrainingArguments``); the backend
checks them against the installed class. No torch or TRL import here.

One step of ours is one generation batch of ``prompts_per_step * num_generations`` sequences, split into
``steps_per_generation`` micro-batches (``gradient_accumulation_steps`` when unset), an optimizer step every
``gradient_accumulation_steps`` of them, ``num_iterations`` passes over it. In TRL the same batch is
``per_device_train_batch_size = sequences / steps_per_generation`` rows per micro-batch with the same
``steps_per_generation``, and TRL counts optimizer steps: ``max_steps`` becomes ``max_steps *
optimizer_steps_per_step``, and so do the save and evaluation cadences.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from grpo_core.config.trl_names import TO_TRL, same_fields
from grpo_core.config.trl_names import our_metric_name as _our_name
from grpo_rewards.tomlfile import ConfigError, Problem

if TYPE_CHECKING:
    from grpo_core.config import RunConfig

# our key -> why TRL's GRPOTrainer cannot honour it (a warning when the backend starts, for a key the user set)
NO_TRL_EQUIVALENT: dict[str, str] = {
    "model.offload_activations": "TRL does not offload checkpointed activations to host memory",
    "model.mlp_chunk_tokens": "TRL does not tile the MLP under gradient checkpointing",
    "data.seed": "TRL shuffles the rows with the training seed (grpo.seed)",
    "generation.score_during_generation": "TRL scores the rewards of a batch after its generation",
    "generation.decode": "TRL samples with model.generate (its own cache_implementation is left unset)",
    "generation.decode_check_every": "TRL samples with model.generate (its own cache_implementation is left unset)",
    "grpo.logprob_chunk_size": "TRL 1.x's fused LM head tiles the log-probs its own way (no size to set)",
    "grpo.share_prompts": "TRL runs every completion with its own copy of the prompt",
    "grpo.micro_batch_tokens": "TRL runs per_device_train_batch_size rows per forward/backward, with no token budget",
    "trainer.memory_budget_gb": "TRL plans no step from a memory budget (its own batch size and checkpointing keys)",
    "logging.sample_every": "samples.jsonl is not written (TRL's own completion logging is log_completions)",
    "logging.num_samples": "samples.jsonl is not written (TRL's own completion logging is log_completions)",
}

GENERATION_BACKENDS = ("transformers", "vllm")
# the TRL fields whose value is one of our keys as it is (the one table, grpo_core.config.trl_names), less the
# ones set below by rule: the vLLM block, the hub (pushed by our side) and the trackers (ours)
SHARED = {trl: ours for trl, ours in same_fields().items()
          if not ours.startswith(("hub.", "generation.vllm_", "generation.importance_"))
          and trl not in ("run_name", "report_to", "eval_on_start")}


def _to_trl(trl: str, cfg: RunConfig, ours: str) -> Any:
    section, _, key = ours.partition(".")
    value = getattr(getattr(cfg, section), key)
    return TO_TRL[trl](value) if trl in TO_TRL else value
# TRL 1.16's GRPOConfig.loss_type values: a registered loss type of one of these names runs as TRL's own; any
# other (a plugin's) has no TRL equivalent and is refused
TRL_LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo", "cispo", "sapo", "luspo", "vespo")


def user_set(cfg: RunConfig, key: str) -> bool:
    """Whether the config file or a ``--set`` gave ``section.name`` (not left at its default)."""
    section, _, name = key.partition(".")
    return cfg.is_set(section, name)


def no_trl_equivalent(cfg: RunConfig) -> dict[str, str]:
    """The keys the user set (:func:`user_set`) that the trl backend cannot honour, with why:
    :data:`NO_TRL_EQUIVALENT`, and ``data.overlong_prompts = "truncate"`` (over-long prompts are dropped or
    refused before TRL sees them, as the built-in trainer does, but TRL 1.x cannot cut a prompt). A key left
    at its default says nothing: the user asked for nothing TRL leaves out."""
    out = {key: why for key, why in NO_TRL_EQUIVALENT.items() if user_set(cfg, key)}
    if cfg.data.overlong_prompts == "truncate" and cfg.data.max_prompt_length:
        out["data.overlong_prompts"] = ("\"truncate\": TRL 1.x has no prompt length limit; over-long prompts "
                                        "are kept whole")
    if cfg.generation.vllm_lora_push == "adapter":
        out["generation.vllm_lora_push"] = ("\"adapter\": TRL merges the adapter into the weights it sends to "
                                            "vLLM (\"merged\")")
    return out


def grpo_config_kwargs(cfg: RunConfig) -> dict[str, Any]:
    """Keyword arguments for ``trl.GRPOConfig`` that run ``cfg`` as our trainer would (see module docs).

    Raises ``ConfigError`` (``file: key: what is wrong``) for a value TRL cannot run."""
    g, o, lg, ck = cfg.generation, cfg.grpo, cfg.logging, cfg.checkpoint
    if g.backend not in GENERATION_BACKENDS:
        raise ConfigError([Problem(cfg.path, None, "generation.backend", f"the trl trainer backend generates with "
                                   f"{' or '.join(GENERATION_BACKENDS)}, not {g.backend!r}")])
    if o.loss_type not in TRL_LOSS_TYPES:
        raise ConfigError([Problem(cfg.path, None, "grpo.loss_type", f"the trl trainer backend runs TRL's loss types "
                                   f"({', '.join(TRL_LOSS_TYPES)}), not {o.loss_type!r}")])
    if cfg.data.streaming:
        raise ConfigError([Problem(cfg.path, None, "data.streaming", "the trl trainer backend trains on a "
                                   "datasets.Dataset of every row; set streaming = false")])
    mu = cfg.optimizer_steps_per_step  # TRL's steps per step of ours
    vllm = g.backend == "vllm"
    kwargs: dict[str, Any] = {trl: _to_trl(trl, cfg, ours) for trl, ours in SHARED.items()}
    kwargs.update({
        # [model]: the model is loaded by grpo_core.policy.models in its dtype; no autocast, as in our trainer
        "gradient_checkpointing_kwargs": {"use_reentrant": False},
        "bf16": False,
        "fp16": False,
        "remove_unused_columns": False,  # rewards read the other columns
        "use_vllm": vllm,
        # one generation batch of ours is one TRL optimizer step (module docs)
        "per_device_train_batch_size": cfg.sequences_per_step // (o.steps_per_generation
                                                                  or o.gradient_accumulation_steps),
        "max_steps": o.max_steps * mu,
        "warmup_steps": o.warmup_ratio,  # a float in [0, 1) is a ratio of the total steps
        "reward_weights": cfg.rewards.weights,
        # [logging]: metrics.jsonl, the progress bar, wandb and tensorboard are ours (grpo_core.run_folder.metrics)
        "report_to": "none",
        "disable_tqdm": True,
        # [checkpoint]
        "save_strategy": "steps" if ck.every else "no",
        "save_steps": ck.every * mu if ck.every else 500,
    })
    if vllm:
        kwargs.update(
            vllm_mode=g.vllm_mode,
            vllm_gpu_memory_utilization=g.vllm_gpu_memory_utilization,
            vllm_enable_sleep_mode=g.vllm_sleep_level > 0,  # TRL's engine always sleeps at level 2
            vllm_max_model_length=g.vllm_max_model_len,
            # the trainer/sampler log-prob mismatch: the same four rules, named alike
            vllm_importance_sampling_correction=g.importance_sampling != "none",
            vllm_importance_sampling_clip_min=g.importance_sampling_min,
            vllm_importance_sampling_clip_max=g.importance_sampling_max,
        )
        if g.vllm_mode == "server":  # TRL's server is `trl vllm-serve` (weights pushed over its NCCL group)
            kwargs.update(vllm_server_host=g.vllm_server_host, vllm_server_port=g.vllm_server_port,
                          vllm_server_timeout=g.vllm_server_timeout)
            if g.vllm_server_url:
                kwargs["vllm_server_base_url"] = g.vllm_server_url
        if g.importance_sampling != "none":
            kwargs["vllm_importance_sampling_mode"] = g.importance_sampling
        if g.stop:
            kwargs["generation_kwargs"] = {"stop": list(g.stop)}  # vLLM's SamplingParams(stop=...)
    if lg.eval_every:
        kwargs.update(eval_strategy="steps", eval_steps=lg.eval_every * mu,
                      per_device_eval_batch_size=g.num_generations_eval or g.num_generations)
    if lg.eval_on_start:
        kwargs["eval_on_start"] = True
    return kwargs




def our_metrics(logs: dict[str, Any]) -> dict[str, Any]:
    """One TRL log record under our metric names (``reward`` -> ``reward/mean``, ``rewards/<alias>/mean``
    -> ``rewards/<alias>``, ``completions/mean_length`` -> ``completion_length/mean``, ``eval_<name>`` ->
    ``eval/<our name>``, ...); names both sides share (``loss``, ``kl``, ``clip_ratio/...``) pass as is."""
    out: dict[str, Any] = {}
    for name, value in logs.items():
        if name.startswith("eval_"):
            out[f"eval/{_our_name(name.removeprefix('eval_'))}"] = value
        else:
            out[_our_name(name)] = value
    return out
