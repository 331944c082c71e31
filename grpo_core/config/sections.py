"""What a run config holds: each section's dataclass (its keys and defaults), the choice lists, the ranges of
the numeric keys (:data:`LIMITS`), and :class:`RunConfig`, a validated run.

Data only: reading a file into these is :mod:`grpo_core.config.reading`, the checks across keys
:mod:`grpo_core.config.checks`. A key's default and its range sit on this page; its choices too, except the
registered ones (trainer and generation backends, engines, loss types, dataset sources: the registry's).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grpo_rewards.compose import ComposedReward

# accelerate's tracker names (accelerate.tracking.LOGGER_TYPE_TO_CLASS), the choices of logging.report_to
# (besides "none" and "all"); grpo_core.outputs.trackers runs them; a test keeps the two equal
TRACKERS = ("aim", "clearml", "comet_ml", "dvclive", "mlflow", "swanlab", "tensorboard", "trackio", "wandb")
DTYPES = ("auto", "float32", "bfloat16", "float16")
COMPUTE_DTYPES = ("float32", "bfloat16", "float16")
# the choice lists of [grpo] (their users, grpo_core.algorithm, import them from here; the loss types are
# registered, through grpo_register_loss_types)
SCALE_REWARDS = ("group", "batch", "none")
MULTI_OBJECTIVE_AGGREGATIONS = ("sum_then_normalize", "normalize_then_sum")
IMPORTANCE_SAMPLING_LEVELS = ("token", "sequence")  # [grpo] importance_sampling_level (sequence: GSPO)
QUANT_TYPES = ("nf4", "fp4")
IMPORTANCE_SAMPLING = ("none", "token_truncate", "token_mask", "sequence_truncate", "sequence_mask")
# verl's rollout-correction names for the same rules (``rollout_is`` truncates, ``rollout_rs`` rejects): accepted
# for ``generation.importance_sampling`` and stored as the rule they name
IMPORTANCE_SAMPLING_ALIASES = {"token_is": "token_truncate", "seq_is": "sequence_truncate",
                               "sequence_is": "sequence_truncate", "token_rs": "token_mask",
                               "seq_rs": "sequence_mask", "sequence_rs": "sequence_mask"}
LR_SCHEDULERS = ("linear", "cosine", "cosine_with_restarts", "polynomial", "constant", "constant_with_warmup",
                 "inverse_sqrt", "cosine_with_min_lr", "warmup_stable_decay")
OVERLONG_PROMPTS = ("drop", "error", "truncate")
# [generation] decode: how the transformers backend's group sampler runs its decode steps
# (grpo_core.generation.group_sampling); "auto" is "cuda_graph" on CUDA, "dynamic" elsewhere
DECODE_MODES = ("auto", "dynamic", "static", "cuda_graph")
TOOL_FORMATS = ("auto", "hermes")  # [tools] format: how the chat template writes tool calls (auto: read from it)
DISTRIBUTED_BACKENDS = ("auto", "gloo", "nccl")
OFFLOAD_DEVICES = ("none", "cpu")
LOCAL_DATA_SUFFIXES = (".jsonl", ".json", ".csv", ".parquet")
# datasets' packaged builders a [data] source may name to read data_files (datasets.load_dataset("json", ...))
DATASET_BUILDERS = ("json", "csv", "parquet", "arrow", "text", "pandas", "webdataset", "xml")
SOURCE_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9_\-]+):(?!//)")  # 2+ characters: "C:\\data" is a path


@dataclass
class ModelConfig:
    name_or_path: str = ""
    gguf_file: str | None = None  # a GGUF file inside the name_or_path folder (a `.gguf` name_or_path also works)
    dtype: str = "auto"
    trust_remote_code: bool = False
    attn_implementation: str | None = None
    revision: str | None = None
    gradient_checkpointing: bool = True
    offload_activations: bool = False
    mlp_chunk_tokens: int | None = None  # None: the hidden size (ALST's rule); 0: no MLP tiling
    adapter: str | None = None  # a saved LoRA adapter folder to start from (grpo_core.adapter)
    cast_lm_head_to_fp32: bool = False  # TRL's: the LM head in float32 (grpo_core.policy.fp32_head)


@dataclass
class DataConfig:
    source: str = ""
    subset: str | None = None  # the hub dataset's config name (``main`` for openai/gsm8k)
    split: str = "train"  # datasets' split syntax, slices too: "train[:1000]", "train[10%:]" (a local file: train)
    data_files: str | list[str] | dict[str, str] | None = None  # datasets.load_dataset's data_files
    revision: str | None = None  # the hub dataset's git revision: a branch, tag or commit
    streaming: bool = False  # read the source as a datasets.IterableDataset, a step's rows at a time
    shuffle_buffer: int = 1000  # streaming + shuffle: rows in datasets' shuffle buffer
    prompt_field: str = "prompt"
    answer_field: str | None = None  # the reference column; copied to `answer` (what rewards read) if named otherwise
    columns: dict[str, str] = field(default_factory=dict)  # rename map: {source column: new name}
    system_prompt: str | None = None
    chat_template: bool = True
    max_prompt_length: int | None = 512
    overlong_prompts: str = "drop"  # prompts over max_prompt_length tokens: drop (reported), error, or truncate (left)
    eval_source: str | None = None
    eval_split: str | None = None
    eval_size: int = 0
    shuffle: bool = True
    seed: int = 0
    limit: int | None = None  # use only the first N rows (after loading; before shuffling)


@dataclass
class GenerationConfig:
    backend: str = "transformers"
    num_generations: int = 8
    # held-out evaluation: None, one greedy completion per row; n, a group of n sampled completions (TRL's)
    num_generations_eval: int | None = None
    max_completion_length: int = 256
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    stop: list[str] = field(default_factory=list)  # stop strings (vllm backend; EOS always stops)
    # score each run of finished groups while the rest generates (a backend that hands them over); false: the
    # rewards get the whole batch at once, for rewards computed over the batch (grpo_rewards.streaming)
    score_during_generation: bool = True
    decode: str = "auto"  # backend = "transformers": the group sampler's decode steps (DECODE_MODES)
    decode_check_every: int = 8  # static/cuda_graph decode: steps between checks that every row has ended
    # the trainer/sampler mismatch (a backend returning its sampling log-probs): grpo_core.algorithm.sampler_correction
    importance_sampling: str = "sequence_mask"
    importance_sampling_min: float | None = None
    importance_sampling_max: float | None = 3.0
    # backend = "vllm" only (grpo_core.generation.vllm)
    vllm_mode: str = "colocate"  # "colocate": an engine in the training process; "server": a `vllm serve` server
    vllm_server_host: str = "127.0.0.1"  # vllm_mode = "server": where the server listens
    vllm_server_port: int = 8000
    vllm_server_url: str = ""  # TRL's vllm_server_base_url: "http://host:port", used instead of host and port
    vllm_server_timeout: float = 240.0  # seconds to wait for the server to answer when the run starts
    vllm_gpu_memory_utilization: float = 0.3
    vllm_sleep_level: int = 0  # 0 off; 1 weights offloaded, KV cache freed while training; 2 both freed
    vllm_max_model_len: int | None = None  # None -> max_prompt_length + max_completion_length
    vllm_lora_push: str = "merged"  # LoRA: "merged" (W + scale * B @ A sent as weights) or "adapter" (served as LoRA)


@dataclass
class GRPOConfig:
    learning_rate: float = 1e-6
    prompts_per_step: int = 4
    gradient_accumulation_steps: int = 1
    # TRL's: micro-batches per generation batch (None: gradient_accumulation_steps, one optimizer step per
    # generation batch); k times gradient_accumulation_steps: generated once, k optimizer steps on its k slices
    steps_per_generation: int | None = None
    max_steps: int = 100
    num_iterations: int = 1
    beta: float = 0.0
    epsilon: float = 0.2
    epsilon_high: float | None = None  # None -> epsilon (resolved at load)
    delta: float | None = None
    loss_type: str = "dapo"
    importance_sampling_level: str = "token"  # or "sequence" (GSPO): one importance ratio per sequence
    off_policy_mask_threshold: float | None = None  # DeepSeek-V3.2's off-policy sequence mask (None: off)
    use_bias_correction_kl: bool = True  # the KL term multiplied by the importance ratio (unbiased reverse KL)
    # TR-DPO's moving reference (grpo_core.policy.reference_sync): every ref_model_sync_steps optimizer steps,
    # reference = ref_model_mixup_alpha * policy + (1 - ref_model_mixup_alpha) * reference
    sync_ref_model: bool = False
    ref_model_mixup_alpha: float = 0.6
    ref_model_sync_steps: int = 512
    # TRL's MoE load-balancing loss weight (grpo_core.policy.router_loss); None: the model config's own
    router_aux_loss_coef: float | None = None
    # entropy (grpo_core.algorithm.entropy): train on the highest-entropy tokens only, an entropy bonus and its
    # adaptive coefficient (Skywork-OR1), under TRL's names and defaults
    top_entropy_quantile: float = 1.0  # the fraction of each micro-batch's tokens, by entropy, that train (1: all)
    entropy_coef: float = 0.0  # loss - entropy_coef * mean entropy (0: off); the start value when adaptive
    use_adaptive_entropy: bool = False  # entropy_coef moves each optimizer step towards entropy_target
    entropy_coef_min: float = 0.0  # ... its lower bound
    entropy_coef_max: float = 1.0  # ... its upper bound
    entropy_coef_delta: float = 0.005  # ... its step
    entropy_target: float = 0.2  # ... the mean per-token entropy (nats) at or below which the bonus applies
    sapo_temperature_pos: float = 1.0  # loss_type = "sapo": the gate's temperature where the advantage is > 0
    sapo_temperature_neg: float = 1.05  # ... and where it is <= 0
    vespo_k_pos: float = 2.0  # loss_type = "vespo": the gamma weight's power, advantage >= 0
    vespo_lambda_pos: float = 3.0  # ... its decay, advantage >= 0
    vespo_k_neg: float = 3.0  # ... its power, advantage < 0
    vespo_lambda_neg: float = 2.0  # ... its decay, advantage < 0
    scale_rewards: str = "group"
    multi_objective_aggregation: str = "sum_then_normalize"  # or "normalize_then_sum" (GDPO)
    mask_truncated_completions: bool = False
    max_grad_norm: float = 1.0
    lr_scheduler: str = "linear"
    warmup_ratio: float = 0.0
    weight_decay: float = 0.0
    adam_beta1: float = 0.9
    adam_beta2: float = 0.99
    seed: int = 0
    logprob_chunk_size: int = 1024
    micro_batch_tokens: int = 4096
    share_prompts: bool = True


@dataclass
class LoraConfig:
    enabled: bool = False
    r: int = 16
    alpha: int = 32
    dropout: float = 0.0
    target_modules: str | list[str] = "all-linear"


@dataclass
class QuantizationConfig:
    load_in_4bit: bool = False
    quant_type: str = "nf4"
    compute_dtype: str = "bfloat16"
    double_quant: bool = True


@dataclass
class LoggingConfig:
    output_dir: str = ""  # "" -> runs/<config file stem> (resolved at load)
    log_every: int = 1
    sample_every: int = 10
    eval_every: int = 0  # steps between held-out evaluations (and one at the end); 0 = never
    eval_on_start: bool = False  # also evaluate before the first update (logged as step 0): the curve's baseline
    num_samples: int = 4
    plot: bool = True
    # experiment trackers (grpo_core.outputs.trackers): "none", a name, a list of names, or "all" (the installed ones)
    report_to: str | list[str] = "none"
    project: str = "grpo"  # the trackers' project (wandb, trackio, comet_ml) or experiment (mlflow)
    run_name: str = ""  # "" -> the run folder's name
    wandb: bool = False  # deprecated spelling of report_to = ["wandb"]
    wandb_project: str = "grpo"  # deprecated spelling of project
    tensorboard: bool = False  # deprecated spelling of report_to = ["tensorboard"]
    progress: bool = True


@dataclass
class HubConfig:
    """Pushing the trained model to the Hugging Face Hub (grpo_core.outputs.hub), with transformers' names."""

    push_to_hub: bool = False
    hub_model_id: str = ""  # "" -> the run folder's name, in the token's namespace; or "name", "org/name"
    hub_private_repo: bool | None = None  # None: the namespace's default (public unless the org says private)
    hub_strategy: str = "every_save"  # end, every_save, checkpoint, all_checkpoints (transformers' HubStrategy)
    hub_token: str = ""  # "" -> HF_TOKEN, or the token `hf auth login` saved
    hub_revision: str = ""  # a branch to push to ("" -> the default branch)


@dataclass
class CheckpointConfig:
    every: int = 0  # steps between checkpoints; 0 = by time only (every_minutes)
    every_minutes: float = 30.0  # minutes between checkpoints (besides every); 0 = by steps only
    keep_last: int = 3
    save_merged: bool = False


@dataclass
class TrainerConfig:
    backend: str = "grpo_core"  # a name registered through grpo_register_trainer_backends ("grpo_core", "trl")
    # GiB the step may hold (grpo_core.policy.step_plan); None: 90% of the accelerator memory the process may hold
    # (less a colocated vLLM engine's share), no cap on a CPU
    memory_budget_gb: float | None = None


@dataclass
class DistributedConfig:
    """Multi-process training (``torchrun --nproc_per_node N -m grpo_core train`` or ``grpo train --nproc N``);
    a single process ignores it."""

    # ddp: DistributedDataParallel, each process holds the whole model; fsdp2: torch's fully_shard (parameters,
    # gradients and optimizer state sharded over the processes, each decoder layer gathered in its turn;
    # grpo_core.parallel.fsdp); deepspeed: DeepSpeed's ZeRO engine (optimizer state and gradients partitioned, the
    # optimizer optionally on the CPU; one process too; grpo_core.parallel.deepspeed)
    engine: str = "ddp"
    backend: str = "auto"  # the torch.distributed backend: auto = nccl on CUDA, gloo otherwise
    zero_stage: int = 2  # engine = "deepspeed": ZeRO stage 0-2 (3 shards the weights, which generation needs whole)
    offload_optimizer: str = "none"  # engine = "deepspeed": "cpu" keeps the optimizer state (and its step) on the CPU
    deepspeed_config: str = ""  # engine = "deepspeed": a user's own DeepSpeed JSON; its keys override the mapped ones


@dataclass
class ToolsConfig:
    """Tools the model may call during its rollouts (grpo_core.generation.multi_turn, ``docs/tools.md``): with
    none (and none given to ``Trainer(tools=...)``), each completion is one model turn."""

    names: list[str] = field(default_factory=list)  # registered tools: the built-ins "calculator", "python", "c", "cpp"
    max_tool_calling_iterations: int | None = None  # TRL's: tool turns per completion; None: no limit
    format: str = "auto"  # TOOL_FORMATS: how tool calls are written and read; auto: from the chat template
    timeout_s: float = 10.0  # seconds the calls of one turn may take together; a call past it answers an error
    max_output_chars: int = 2000  # a tool's answer is cut to this many characters
    max_rollout_seconds: float | None = None  # wall time after which no tool turn starts; None: no limit


SECTIONS: dict[str, type] = {
    "model": ModelConfig,
    "data": DataConfig,
    "generation": GenerationConfig,
    "grpo": GRPOConfig,
    "lora": LoraConfig,
    "quantization": QuantizationConfig,
    "logging": LoggingConfig,
    "checkpoint": CheckpointConfig,
    "trainer": TrainerConfig,
    "distributed": DistributedConfig,
    "hub": HubConfig,
    "tools": ToolsConfig,
}
REQUIRED: dict[str, tuple[str, ...]] = {"model": ("name_or_path",), "data": ("source",)}

# The range of each numeric key: (lowest, highest), both allowed, None for no bound. Checked where the key is
# set (its own line, or the --set that set it); every float must also be finite, every integer fit in 64 bits.
BIG = 10**9
LIMITS: dict[tuple[str, str], tuple[float | None, float | None]] = {
    ("model", "mlp_chunk_tokens"): (0, BIG),
    ("data", "max_prompt_length"): (1, 10**7),
    ("data", "eval_size"): (0, BIG),
    ("data", "seed"): (0, 2**64 - 1),
    ("data", "limit"): (1, None),
    ("data", "shuffle_buffer"): (1, BIG),
    ("generation", "num_generations"): (2, 65536),
    ("generation", "num_generations_eval"): (1, 65536),
    ("generation", "max_completion_length"): (1, 10**7),
    ("generation", "decode_check_every"): (1, 10**7),
    ("generation", "temperature"): (1e-6, 100),
    ("generation", "top_k"): (0, 10**7),
    ("generation", "repetition_penalty"): (1e-6, 100),
    ("distributed", "zero_stage"): (0, 2),
    ("grpo", "learning_rate"): (1e-12, 1),
    ("grpo", "prompts_per_step"): (1, 10**6),
    ("grpo", "gradient_accumulation_steps"): (1, 10**6),
    ("grpo", "steps_per_generation"): (1, 10**6),
    ("grpo", "max_steps"): (1, BIG),
    ("grpo", "num_iterations"): (1, 1000),
    ("grpo", "beta"): (0, None),
    ("grpo", "epsilon"): (0, None),
    ("grpo", "epsilon_high"): (0, None),
    ("grpo", "off_policy_mask_threshold"): (1e-12, None),
    ("grpo", "ref_model_mixup_alpha"): (0, 1),
    ("grpo", "router_aux_loss_coef"): (0, None),
    ("grpo", "ref_model_sync_steps"): (1, BIG),
    ("grpo", "top_entropy_quantile"): (0, 1),
    ("grpo", "entropy_coef_delta"): (0, None),
    ("grpo", "entropy_target"): (0, None),
    ("grpo", "sapo_temperature_pos"): (1e-6, None),
    ("grpo", "sapo_temperature_neg"): (1e-6, None),
    ("grpo", "vespo_k_pos"): (0, None),
    ("grpo", "vespo_lambda_pos"): (0, None),
    ("grpo", "vespo_k_neg"): (0, None),
    ("grpo", "vespo_lambda_neg"): (0, None),
    ("grpo", "max_grad_norm"): (1e-12, None),
    ("grpo", "weight_decay"): (0, None),
    ("grpo", "seed"): (0, 2**64 - 1),
    ("grpo", "logprob_chunk_size"): (1, BIG),
    ("grpo", "micro_batch_tokens"): (0, BIG),
    ("lora", "r"): (1, 65536),
    ("lora", "alpha"): (1, 10**6),
    ("logging", "log_every"): (1, BIG),
    ("logging", "sample_every"): (1, BIG),
    ("logging", "eval_every"): (0, BIG),
    ("logging", "num_samples"): (0, 10**6),
    ("checkpoint", "every"): (0, BIG),
    ("checkpoint", "every_minutes"): (0, None),
    ("checkpoint", "keep_last"): (1, 10**6),
    ("trainer", "memory_budget_gb"): (1e-4, 10**6),
    ("tools", "max_tool_calling_iterations"): (0, BIG),
    ("tools", "timeout_s"): (1e-3, 86400),
    ("tools", "max_output_chars"): (1, 10**8),
    ("tools", "max_rollout_seconds"): (0, None),
}


@dataclass
class RunConfig:
    """A validated run: one dataclass per section, the composed reward and where it came from."""

    model: ModelConfig
    data: DataConfig
    generation: GenerationConfig
    grpo: GRPOConfig
    lora: LoraConfig
    quantization: QuantizationConfig
    logging: LoggingConfig
    checkpoint: CheckpointConfig
    trainer: TrainerConfig
    rewards: ComposedReward
    path: str = "<dict>"
    raw: dict[str, Any] = field(default_factory=dict, repr=False)  # the merged input (file + overrides)
    distributed: DistributedConfig = field(default_factory=DistributedConfig)
    hub: HubConfig = field(default_factory=HubConfig)
    tools: ToolsConfig = field(default_factory=ToolsConfig)

    @property
    def output_dir(self) -> Path:
        return Path(self.logging.output_dir)

    def is_set(self, section: str, key: str) -> bool:
        """Whether the user gave ``section.key`` (the run file, a ``--set``, the Python API's dict) rather than
        leaving it to its default: what the step planner may choose (grpo_core.policy.step_plan)."""
        table = self.raw.get(section)
        return isinstance(table, dict) and key in table

    @property
    def sequences_per_step(self) -> int:
        return self.grpo.prompts_per_step * self.generation.num_generations

    @property
    def optimizer_steps_per_generation(self) -> int:
        """Optimizer steps on each slice of a generation batch, one pass: ``steps_per_generation /
        gradient_accumulation_steps`` (1 when unset)."""
        g = self.grpo
        return (g.steps_per_generation or g.gradient_accumulation_steps) // g.gradient_accumulation_steps

    @property
    def optimizer_steps_per_step(self) -> int:
        """Optimizer steps (and learning-rate steps) per loop step: ``num_iterations`` passes over the generation
        batch's slices."""
        return self.grpo.num_iterations * self.optimizer_steps_per_generation

    def to_dict(self) -> dict[str, Any]:
        """The sections as plain data (JSON/TOML-able) plus the raw ``rewards`` tables."""
        out: dict[str, Any] = {name: dataclasses.asdict(getattr(self, name)) for name in SECTIONS}
        out["rewards"] = self.raw.get("rewards", {})
        if out["hub"]["hub_token"]:  # a secret: never in config.json, a tracker or a model card
            out["hub"]["hub_token"] = "<hidden>"
        return out
