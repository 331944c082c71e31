"""The run config: one TOML file (``grpo train run.toml``) or one dict (the Python API) -> :class:`RunConfig`.

Sections: ``[model] [data] [generation] [grpo] [lora] [quantization] [logging] [checkpoint] [trainer]
[distributed] [hub]`` and the reward side's ``[rewards.*]`` tables (validated by ``grpo_rewards.rewards_from_doc`` so
trainer and reward problems are reported together). Every problem is collected before one
:class:`grpo_rewards.ConfigError` is raised, each as ``file:line: section.key: what is wrong``,
with a did-you-mean for unknown sections and keys. ``--set section.key=value`` overrides are
parsed with TOML value syntax (``3``, ``1e-5``, ``true``, ``"x"``, ``[1, 2]``), falling back to
a bare string; a problem in an overridden value names the override instead of the file.

No torch/transformers import here: validating a config is cheap and needs no network.

Why this module is over 600 lines: every section's dataclass, defaults, ranges and cross-checks are read
together, so that a key's default and the checks on it sit on one page; a backend's own checks are not here
(each registers them with its factory, see :mod:`grpo_core.plugin`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import tomllib
import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grpo_core.adapter import adapter_folder_hint, adapter_problems
from grpo_rewards.compose import ComposedReward
from grpo_rewards.plugins import Registry, get_registry
from grpo_rewards.reward_config import rewards_from_doc
from grpo_rewards.suggest import did_you_mean
from grpo_rewards.tomlfile import ConfigError, Problem, TomlDoc, load_toml

# accelerate's tracker names (accelerate.tracking.LOGGER_TYPE_TO_CLASS), the choices of logging.report_to
# (besides "none" and "all"); grpo_core.outputs.trackers runs them; a test keeps the two equal
TRACKERS = ("aim", "clearml", "comet_ml", "dvclive", "mlflow", "swanlab", "tensorboard", "trackio", "wandb")
DTYPES = ("auto", "float32", "bfloat16", "float16")
COMPUTE_DTYPES = ("float32", "bfloat16", "float16")
# the choice lists of [grpo] (their users, grpo_core.algorithm, import them from here)
LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo")
SCALE_REWARDS = ("group", "batch", "none")
MULTI_OBJECTIVE_AGGREGATIONS = ("sum_then_normalize", "normalize_then_sum")
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
DISTRIBUTED_BACKENDS = ("auto", "gloo", "nccl")
OFFLOAD_DEVICES = ("none", "cpu")
LOCAL_DATA_SUFFIXES = (".jsonl", ".json", ".csv", ".parquet")
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


@dataclass
class DataConfig:
    source: str = ""
    subset: str | None = None  # the hub dataset's config name (``main`` for openai/gsm8k)
    split: str = "train"
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
    max_completion_length: int = 256
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    stop: list[str] = field(default_factory=list)  # stop strings (vllm backend; EOS always stops)
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
    max_steps: int = 100
    num_iterations: int = 1
    beta: float = 0.0
    epsilon: float = 0.2
    epsilon_high: float | None = None  # None -> epsilon (resolved at load)
    delta: float | None = None
    loss_type: str = "dapo"
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
    ("generation", "num_generations"): (2, 65536),
    ("generation", "max_completion_length"): (1, 10**7),
    ("generation", "temperature"): (1e-6, 100),
    ("generation", "top_k"): (0, 10**7),
    ("generation", "repetition_penalty"): (1e-6, 100),
    ("distributed", "zero_stage"): (0, 2),
    ("grpo", "learning_rate"): (1e-12, 1),
    ("grpo", "prompts_per_step"): (1, 10**6),
    ("grpo", "gradient_accumulation_steps"): (1, 10**6),
    ("grpo", "max_steps"): (1, BIG),
    ("grpo", "num_iterations"): (1, 1000),
    ("grpo", "beta"): (0, None),
    ("grpo", "epsilon"): (0, None),
    ("grpo", "epsilon_high"): (0, None),
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
}


def _num(x: float | None) -> str:
    return str(int(x)) if x is not None and float(x).is_integer() else f"{x:g}"


def _limit_problem(key: tuple[str, str], value: Any) -> str | None:
    """Why a number is out of its range (see LIMITS), or None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return f"must be a finite number, got {value!r}"
    if isinstance(value, int) and not -(2**63) <= value < 2**64:
        return f"is too large ({value:.3g})"
    low, high = LIMITS.get(key, (None, None))
    if (low is not None and value < low) or (high is not None and value > high):
        shown = "> 0" if low is not None and 0 < low < 1e-3 else f">= {_num(low)}"
        got = f"{value:.6g}" if abs(value) >= 1e7 else repr(value)
        if high is None:
            return f"must be {shown}, got {got}"
        if low is None:
            return f"must be <= {_num(high)}, got {got}"
        return f"must be {shown} and <= {_num(high)}, got {got}"
    return None


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

    @property
    def output_dir(self) -> Path:
        return Path(self.logging.output_dir)

    @property
    def sequences_per_step(self) -> int:
        return self.grpo.prompts_per_step * self.generation.num_generations

    def to_dict(self) -> dict[str, Any]:
        """The sections as plain data (JSON/TOML-able) plus the raw ``rewards`` tables."""
        out: dict[str, Any] = {name: dataclasses.asdict(getattr(self, name)) for name in SECTIONS}
        out["rewards"] = self.raw.get("rewards", {})
        if out["hub"]["hub_token"]:  # a secret: never in config.json, a tracker or a model card
            out["hub"]["hub_token"] = "<hidden>"
        return out


# ------------------------------------------------------------------ types ----

def _type_problem(annotation: Any, value: Any) -> str | None:
    """Why ``value`` does not fit ``annotation`` (a resolved dataclass field type), or None."""
    options = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else (annotation,)
    for opt in options:
        if opt is type(None) and value is None:
            return None
        origin = typing.get_origin(opt) or opt
        if origin is bool and isinstance(value, bool):
            return None
        if isinstance(value, bool):
            continue
        if origin is int and isinstance(value, int):
            return None
        if origin is float and isinstance(value, (int, float)):
            return None
        if origin is str and isinstance(value, str):
            return None
        if origin is list and isinstance(value, list) and all(isinstance(v, str) for v in value):
            return None
        if origin is dict and isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
            return None
    names = {type(None): "nothing", list: "a list of strings", dict: "a table of strings"}
    wanted = " or ".join(names.get(typing.get_origin(o) or o, getattr(o, "__name__", str(o))) for o in options)
    got = "a boolean" if isinstance(value, bool) else f"{type(value).__name__} {value!r}"
    return f"expected {wanted}, got {got}"


def _coerce(annotation: Any, value: Any) -> Any:
    """An integer given for a float field becomes a float (``learning_rate = 1`` -> ``1.0``)."""
    options = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else (annotation,)
    if float in options and int not in options and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


_HINTS: dict[type, dict[str, Any]] = {cls: typing.get_type_hints(cls) for cls in SECTIONS.values()}


# -------------------------------------------------------------- overrides ----

def parse_override(text: str) -> tuple[tuple[str, ...], Any]:
    """``"grpo.learning_rate=1e-5"`` -> ``(("grpo", "learning_rate"), 1e-05)``; a non-TOML value stays a string."""
    key, sep, value = text.partition("=")
    path = tuple(p.strip() for p in key.strip().split("."))
    if not sep or len(path) < 2 or not all(path):
        raise ValueError("expected section.key=value")
    value = value.strip()
    try:
        parsed = tomllib.loads(f"v = {value}")["v"]
    except tomllib.TOMLDecodeError:
        parsed = value
    return path, parsed


def apply_overrides(doc: TomlDoc, overrides: Sequence[str]) -> dict[str, str]:
    """Apply ``--set`` overrides to ``doc.data``; returns ``{dotted key: "--set ..."}`` for error attribution."""
    origins: dict[str, str] = {}
    for text in overrides:
        label = f"--set {text}"
        try:
            path, value = parse_override(text)
        except ValueError as exc:
            doc.problems.append(Problem(label, None, "", str(exc)))
            continue
        table = doc.data
        for i, part in enumerate(path[:-1]):
            if table is doc.data and part not in table and part not in SECTIONS and part != "rewards":
                origins.setdefault(part, label)  # an unknown section the override made up: blame the override
            nxt = table.setdefault(part, {})
            if not isinstance(nxt, dict):
                doc.problems.append(Problem(label, None, ".".join(path[: i + 1]), "is not a table"))
                break
            table = nxt
        else:
            table[path[-1]] = value
            origins[".".join(path)] = label
    return origins


def _attribute(problems: list[Problem], origins: dict[str, str]) -> list[Problem]:
    """Point problems about overridden keys at the override rather than the file."""
    out = []
    for p in problems:
        label = next((lab for key, lab in origins.items() if p.key == key or p.key.startswith(key + ".")), None)
        out.append(Problem(label, None, p.key, p.message) if label else p)
    return out


# ------------------------------------------------------------- validation ----

def _build_section(doc: TomlDoc, name: str) -> Any:
    cls = SECTIONS[name]
    table = doc.data.get(name, {})
    if not isinstance(table, dict):
        doc.problem((name,), f"must be a table [{name}]")
        return cls()
    hints = _HINTS[cls]
    kwargs = {}
    for key, value in table.items():
        if isinstance(value, os.PathLike):  # the Python API: Path objects for paths
            value = os.fspath(value)
        if key not in hints:
            doc.problem((name, key), f"unknown key{did_you_mean(key, hints)}")
        elif (why := _type_problem(hints[key], value)
              or _limit_problem((name, key), _coerce(hints[key], value))) is not None:
            doc.problem((name, key), why)
        else:
            kwargs[key] = _coerce(hints[key], value)
    for key in REQUIRED.get(name, ()):
        if not table.get(key):
            doc.problem((name,), f"missing required key {key!r}")
    return cls(**kwargs)


def _choice(doc: TomlDoc, key: tuple[str, ...], value: Any, allowed: Sequence[str]) -> None:
    if value not in allowed:
        doc.problem(key, f"must be one of {', '.join(allowed)}, got {value!r}{did_you_mean(str(value), allowed)}")


def _positive(doc: TomlDoc, key: tuple[str, ...], value: float, *, zero_ok: bool = False) -> None:
    if value < 0 or (value == 0 and not zero_ok):
        doc.problem(key, f"must be {'>= 0' if zero_ok else '> 0'}, got {value!r}")


POSITION_KEYS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length", "n_ctx")


def model_positions(name_or_path: str) -> int | None:
    """The positions a local model folder's ``config.json`` gives (None for a hub name or no such key)."""
    path = Path(name_or_path).expanduser() / "config.json"
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    config = config.get("text_config", config) if isinstance(config, dict) else {}
    found = [config[k] for k in POSITION_KEYS if isinstance(config.get(k), int) and config[k] > 0]
    return found[0] if found else None


def _check_positions(doc: TomlDoc, m: Any, d: Any, g: Any) -> None:
    """Prompt + completion must fit the model's positions (known before loading for a local folder)."""
    positions = model_positions(m.name_or_path) if m.name_or_path else None
    data_table = doc.data.get("data")
    prompt_set = isinstance(data_table, dict) and data_table.get("max_prompt_length") is not None
    if not positions:
        return
    if prompt_set and (d.max_prompt_length or 0) + g.max_completion_length > positions:
        doc.problem(("generation", "max_completion_length"),
                    f"max_prompt_length + max_completion_length = {d.max_prompt_length + g.max_completion_length} "
                    f"is more than the model's {positions} positions ({m.name_or_path}/config.json)")
    elif g.max_completion_length >= positions:
        doc.problem(("generation", "max_completion_length"),
                    f"{g.max_completion_length} leaves no room for a prompt in the model's {positions} positions "
                    f"({m.name_or_path}/config.json)")


def looks_local(name: str) -> bool:
    """A model name that can only be a path (a hub id is ``name`` or ``org/name``): absolute, relative to
    ``.``/``..``/``~``, more than one ``/``, a trailing ``/`` or a backslash."""
    return (name.startswith(("/", "./", "../", "~", ".\\", "..\\")) or name in (".", "..") or name.count("/") > 1
            or name.endswith("/") or "\\" in name)


def resolve_local_path(source: str, config_path: str) -> Path | None:
    """A local data file named by ``source``: as given (cwd), else next to the config file; None if neither."""
    candidates = [Path(source).expanduser()]
    if config_path not in ("<dict>", "<string>"):
        candidates.append(Path(config_path).parent / source)
    return next((p.resolve() for p in candidates if p.exists()), None)


def _check_source(doc: TomlDoc, key: tuple[str, ...], source: str, registry: Registry) -> str:
    """Validate a data source; returns it with a local path made absolute."""
    scheme = SOURCE_SCHEME.match(source)
    if scheme:
        sources = getattr(registry, "dataset_sources", {})  # none when the trainer's plugin is not loaded
        if scheme.group(1) not in sources:
            doc.problem(key, f"unknown dataset source {scheme.group(1)!r}"
                             f"{did_you_mean(scheme.group(1), sources)} (registered: "
                             f"{', '.join(sorted(sources)) or 'none'})")
        return source
    local = resolve_local_path(source, doc.path)
    if local is not None:
        if local.is_file() and local.suffix.lower() not in LOCAL_DATA_SUFFIXES:
            doc.problem(key, f"unsupported file type {local.suffix!r} (use {', '.join(LOCAL_DATA_SUFFIXES)})")
        return str(local)
    if source.lower().endswith(LOCAL_DATA_SUFFIXES) or source.startswith((".", "/", "~")):
        doc.problem(key, f"file not found: {source}")
    return source  # a hub dataset name, fetched when the run starts


def _cross_checks(doc: TomlDoc, cfg: dict[str, Any], registry: Registry) -> None:
    m, d, g, o, lo, q, lg, ck, tr, ds, hub = (cfg[n] for n in SECTIONS)
    _choice(doc, ("model", "dtype"), m.dtype, DTYPES)
    # a model path resolves as a data path does: as given (the working folder), else next to the config file
    given = m.name_or_path
    local_model = resolve_local_path(given, doc.path) if given else None
    if local_model is not None:
        m.name_or_path = str(local_model)
    model_path = local_model or Path(given).expanduser()
    first = Path(given).parts[0] if given and "/" in given else ""
    meant_local = bool(first) and resolve_local_path(first, doc.path) is not None  # "models/x" beside a "models/"
    if local_model is None and meant_local and not given.startswith(("/", "./", "../", "~")):
        doc.problem(("model", "name_or_path"), f"folder not found: {given} ({first}/ is a local folder, so this is "
                                               "a path, not a hub id)")
    elif given.startswith(("/", "./", "../", "~")) and not model_path.exists():
        # (a relative "runs/x/warm" may be written before the run: the trainer's commands check it, not this)
        doc.problem(("model", "name_or_path"), f"folder not found: {m.name_or_path}")
    elif local_model is not None and local_model.is_file() and local_model.suffix.lower() != ".gguf":
        doc.problem(("model", "name_or_path"), f"{given} is a file: a model is a folder (with config.json) "
                                               "or a .gguf file")
    elif (m.name_or_path and model_path.is_dir() and not (model_path / "config.json").is_file()
          and not any(model_path.glob("*.gguf"))):
        doc.problem(("model", "name_or_path"), adapter_folder_hint(m.name_or_path)
                    or f"{given} is a folder without config.json: not a model")
    if m.adapter:
        for key, message in adapter_problems(m.adapter, lo, doc.data.get("lora")):
            doc.problem(key, message)
        if tr.backend != "grpo_core":
            doc.problem(("model", "adapter"), f"starts the grpo_core trainer from an adapter, not the {tr.backend!r} "
                                              "backend")
    if d.source:
        d.source = _check_source(doc, ("data", "source"), d.source, registry)
    if d.eval_source:
        d.eval_source = _check_source(doc, ("data", "eval_source"), d.eval_source, registry)
    local = bool(d.source) and not SOURCE_SCHEME.match(d.source) and Path(d.source).is_file()
    if local and d.split != "train":
        doc.problem(("data", "split"), f"a local file has no splits: {d.split!r} would be ignored; name the file in source")
    if local and d.eval_split and not d.eval_source:
        doc.problem(("data", "eval_split"), "a local file has no splits: the held-out rows would be the training "
                                            "rows; use eval_source (another file) or eval_size")
    _choice(doc, ("data", "overlong_prompts"), d.overlong_prompts, OVERLONG_PROMPTS)

    trainers = set(getattr(registry, "trainer_backends", {})) | {"grpo_core"}
    if tr.backend not in trainers:
        doc.problem(("trainer", "backend"), f"unknown trainer backend {tr.backend!r}{did_you_mean(tr.backend, trainers)} "
                                            f"(registered: {', '.join(sorted(trainers))})")
    backends = set(getattr(registry, "generation_backends", {})) | {"transformers"}
    if g.backend not in backends:
        doc.problem(("generation", "backend"), f"unknown generation backend {g.backend!r}"
                                               f"{did_you_mean(g.backend, backends)}")
    _check_positions(doc, m, d, g)
    if not 0 < g.top_p <= 1:
        doc.problem(("generation", "top_p"), f"must be in (0, 1], got {g.top_p}")
    if not 0 <= g.min_p <= 1:
        doc.problem(("generation", "min_p"), f"must be in [0, 1], got {g.min_p}")
    if isinstance(g.importance_sampling, str):
        g.importance_sampling = IMPORTANCE_SAMPLING_ALIASES.get(g.importance_sampling, g.importance_sampling)
    _choice(doc, ("generation", "importance_sampling"), g.importance_sampling, IMPORTANCE_SAMPLING)
    lo_is, hi_is = g.importance_sampling_min, g.importance_sampling_max
    if g.importance_sampling.endswith("truncate") and lo_is is None and hi_is is None:
        doc.problem(("generation", "importance_sampling"), "a *_truncate rule needs importance_sampling_min or _max")
    if lo_is is not None and not (lo_is >= 0 and (hi_is is None or lo_is < hi_is)):
        doc.problem(("generation", "importance_sampling_min"), f"must be >= 0 and below importance_sampling_max "
                                                               f"({hi_is}), got {lo_is}")
    if hi_is is not None and not hi_is > 0:
        doc.problem(("generation", "importance_sampling_max"), f"must be > 0, got {hi_is}")
    # each backend's own checks: its registered factory's config_problems(sections) -> [(key, message)]
    factory = getattr(registry, "generation_backends", {}).get(g.backend)
    for key, message in getattr(factory, "config_problems", lambda sections: [])(cfg):
        doc.problem(key, message)

    if o.epsilon_high is None:
        o.epsilon_high = o.epsilon
    elif o.epsilon_high < o.epsilon:
        doc.problem(("grpo", "epsilon_high"), f"must be >= epsilon ({o.epsilon:g}): the upper clipping bound "
                                              f"1 + epsilon_high is the wider one (DAPO), got {o.epsilon_high:g}")
    if o.delta is not None and o.delta <= 1:
        doc.problem(("grpo", "delta"), f"must be > 1 (two-sided clipping bound), got {o.delta}")
    _choice(doc, ("grpo", "loss_type"), o.loss_type, LOSS_TYPES)
    _choice(doc, ("grpo", "scale_rewards"), o.scale_rewards, SCALE_REWARDS)
    _choice(doc, ("grpo", "multi_objective_aggregation"), o.multi_objective_aggregation, MULTI_OBJECTIVE_AGGREGATIONS)
    _choice(doc, ("grpo", "lr_scheduler"), o.lr_scheduler, LR_SCHEDULERS)
    if not 0 <= o.warmup_ratio < 1:
        doc.problem(("grpo", "warmup_ratio"), f"must be in [0, 1), got {o.warmup_ratio}")
    for key in ("adam_beta1", "adam_beta2"):
        if not 0 <= getattr(o, key) < 1:
            doc.problem(("grpo", key), f"must be in [0, 1), got {getattr(o, key)}")
    if o.prompts_per_step > 0 and o.gradient_accumulation_steps > 0 and g.num_generations > 0:
        seqs = o.prompts_per_step * g.num_generations
        if seqs % o.gradient_accumulation_steps:
            doc.problem(("grpo", "gradient_accumulation_steps"),
                        f"must divide prompts_per_step * num_generations = {seqs} (each step's sequences are "
                        f"split into that many micro-batches), got {o.gradient_accumulation_steps}")

    if not lo.target_modules or (isinstance(lo.target_modules, list) and not all(lo.target_modules)):
        doc.problem(("lora", "target_modules"), 'names no module: give "all-linear" or a list such as '
                                                '["q_proj", "v_proj"]')
    if not 0 <= lo.dropout < 1:
        doc.problem(("lora", "dropout"), f"must be in [0, 1), got {lo.dropout}")
    _choice(doc, ("quantization", "quant_type"), q.quant_type, QUANT_TYPES)
    _choice(doc, ("quantization", "compute_dtype"), q.compute_dtype, COMPUTE_DTYPES)
    if q.load_in_4bit and not lo.enabled:
        doc.problem(("quantization", "load_in_4bit"),
                    "4-bit weights cannot be trained directly: set [lora] enabled = true (QLoRA)")

    if lg.eval_every > 0 and not d.eval_source and not d.eval_size:
        doc.problem(("logging", "eval_every"), "needs held-out rows: set [data] eval_size or eval_source")
    if lg.eval_on_start and not d.eval_source and not d.eval_size:
        doc.problem(("logging", "eval_on_start"), "needs held-out rows: set [data] eval_size or eval_source")
    _check_report_to(doc, lg)
    _check_hub(doc, hub)
    if ck.save_merged and not lo.enabled:
        doc.problem(("checkpoint", "save_merged"), "only meaningful with [lora] enabled = true")
    engines = tuple(getattr(registry, "engines", {})) or ("ddp",)  # registered through grpo_register_engines
    _choice(doc, ("distributed", "engine"), ds.engine, engines)
    if ds.engine == "deepspeed" and tr.backend != "grpo_core":
        doc.problem(("distributed", "engine"), f'"deepspeed" runs the grpo_core trainer\'s update, not the '
                                               f"{tr.backend!r} backend's; leave it out with that backend")
    _choice(doc, ("distributed", "backend"), ds.backend, DISTRIBUTED_BACKENDS)
    _choice(doc, ("distributed", "offload_optimizer"), ds.offload_optimizer, OFFLOAD_DEVICES)
    if ds.engine != "deepspeed":
        for key, default in (("zero_stage", 2), ("offload_optimizer", "none"), ("deepspeed_config", "")):
            if getattr(ds, key) != default:
                doc.problem(("distributed", key), f'only meaningful with engine = "deepspeed", not {ds.engine!r}')


def _check_report_to(doc: TomlDoc, lg: LoggingConfig) -> None:
    """``logging.report_to``: known tracker names, or "none" / "all" alone; the older spellings folded in."""
    names = [lg.report_to] if isinstance(lg.report_to, str) else list(lg.report_to)
    for name in names:
        if name in ("none", "all"):
            if len(names) > 1:
                doc.problem(("logging", "report_to"), f'"{name}" stands alone, not in a list with other names')
        elif name not in TRACKERS:
            doc.problem(("logging", "report_to"), f"unknown tracker {name!r}{did_you_mean(name, [*TRACKERS, 'none', 'all'])}"
                                                  f" (one of {', '.join(TRACKERS)}, or \"none\" or \"all\")")
    if lg.wandb_project != "grpo":
        if lg.project not in ("grpo", lg.wandb_project):
            doc.problem(("logging", "wandb_project"), f"is the older spelling of project, which says {lg.project!r}: "
                                                      "keep project only")
        lg.project = lg.wandb_project


HUB_STRATEGIES = ("end", "every_save", "checkpoint", "all_checkpoints")


def _check_hub(doc: TomlDoc, hub: HubConfig) -> None:
    """``[hub]``: a valid repo id and strategy; the other keys only with ``push_to_hub = true``."""
    _choice(doc, ("hub", "hub_strategy"), hub.hub_strategy, HUB_STRATEGIES)
    if hub.hub_model_id and (why := repo_id_problem(hub.hub_model_id)):
        doc.problem(("hub", "hub_model_id"), why)
    if hub.hub_revision and (hub.hub_revision != hub.hub_revision.strip() or "\n" in hub.hub_revision):
        doc.problem(("hub", "hub_revision"), f"not a branch name: {hub.hub_revision!r}")
    if not hub.push_to_hub:
        table = doc.data.get("hub")
        for key in ("hub_model_id", "hub_private_repo", "hub_strategy", "hub_token", "hub_revision"):
            if isinstance(table, dict) and key in table:
                doc.problem(("hub", key), "only meaningful with push_to_hub = true")


def repo_id_problem(repo_id: str) -> str | None:
    """Why ``repo_id`` cannot name a Hub repo (``name`` or ``namespace/name``), in huggingface_hub's own words
    (``validate_repo_id``); None when it can, or when huggingface_hub is not installed (pushing then refuses)."""
    try:
        from huggingface_hub.utils import HFValidationError, validate_repo_id
    except ImportError:
        return None
    try:
        validate_repo_id(repo_id)
    except HFValidationError as exc:
        return str(exc).strip().splitlines()[0]
    return None


def config_from_doc(doc: TomlDoc, overrides: Sequence[str] = (), registry: Registry | None = None) -> RunConfig:
    """Validate a parsed run file (plus ``--set`` overrides); raises :class:`ConfigError` with every problem."""
    registry = registry or get_registry()
    origins = apply_overrides(doc, overrides)
    for name in doc.data:
        if name not in SECTIONS and name != "rewards":
            doc.problem((name,), f"unknown section{did_you_mean(name, [*SECTIONS, 'rewards'])}")
    sections = {name: _build_section(doc, name) for name in SECTIONS}
    _cross_checks(doc, sections, registry)
    rewards = doc.data.get("rewards")
    composed = rewards if isinstance(rewards, ComposedReward) else rewards_from_doc(doc, registry)
    if doc.problems:
        problems = _attribute(doc.problems, origins)  # file order first, then the overrides
        raise ConfigError(sorted(problems, key=lambda p: (p.file != doc.path, p.line or 0)))
    assert composed is not None
    if not sections["logging"].output_dir:
        stem = Path(doc.path).stem if doc.path not in ("<dict>", "<string>") else "run"
        sections["logging"].output_dir = str(Path("runs") / stem)
    raw = {k: v for k, v in doc.data.items() if k != "rewards" or not isinstance(v, ComposedReward)}
    return RunConfig(**sections, rewards=composed, path=doc.path, raw=raw)


def as_run_config(config: RunConfig | str | Path | dict[str, Any], overrides: Sequence[str] = ()) -> RunConfig:
    """What ``Trainer(config)`` accepts: a RunConfig as is, a TOML path, or a dict (the Python API)."""
    if isinstance(config, RunConfig):
        if overrides:
            raise ValueError("overrides apply to a path or a dict, not to a loaded RunConfig")
        return config
    if isinstance(config, dict):
        return config_from_dict(config, overrides=overrides)
    return load_config(config, overrides)


def load_config(path: str | Path, overrides: Sequence[str] = (), registry: Registry | None = None) -> RunConfig:
    """Load, override and validate a run file; raises :class:`ConfigError` listing every problem."""
    return config_from_doc(load_toml(path), overrides, registry)


def config_from_dict(data: dict[str, Any], path: str = "<dict>", overrides: Sequence[str] = (),
                     registry: Registry | None = None) -> RunConfig:
    """The Python API: the same sections as a dict. ``data["rewards"]`` may also be a ready ComposedReward."""
    import copy

    plain = {k: (v if isinstance(v, ComposedReward) else copy.deepcopy(v)) for k, v in data.items()}
    return config_from_doc(TomlDoc(path, plain), overrides, registry)
