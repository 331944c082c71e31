"""The run config: one TOML file (``grpo train run.toml``) or one dict (the Python API) -> :class:`RunConfig`.

Sections: ``[model] [data] [generation] [grpo] [lora] [quantization] [logging] [checkpoint] [trainer]
[distributed] [hub]`` and the reward side's ``[rewards.*]`` tables (validated by ``grpo_rewards.rewards_from_doc`` so
trainer and reward problems are reported together). Every problem is collected before one
:class:`grpo_rewards.ConfigError` is raised, each as ``file:line: section.key: what is wrong``,
with a did-you-mean for unknown sections and keys. ``--set section.key=value`` overrides are
parsed with TOML value syntax (``3``, ``1e-5``, ``true``, ``"x"``, ``[1, 2]``), falling back to
a bare string; a problem in an overridden value names the override instead of the file.

Three modules, each one step of the way, and this one names them all (import from ``grpo_core.config``):

``sections``  what a run config holds: the sections' dataclasses and defaults, the choice lists, the ranges
              of the numeric keys (``LIMITS``), :class:`RunConfig`
``reading``   from a file, a dict and ``--set`` overrides to the sections, each value checked alone (type,
              range); :func:`load_config`, :func:`config_from_dict`, :func:`as_run_config`
``checks``    the checks across keys and against the world: files on disk, a local model's positions, the
              registry's names, each registered backend's and loss type's own checks

No torch/transformers import here: validating a config is cheap and needs no network.
"""

from __future__ import annotations

from grpo_core.config.checks import (
    HUB_STRATEGIES,
    POSITION_KEYS,
    looks_local,
    loss_type_warnings,
    model_positions,
    repo_id_problem,
    resolve_local_path,
)
from grpo_core.config.reading import (
    apply_overrides,
    as_run_config,
    config_from_dict,
    config_from_doc,
    load_config,
    parse_override,
)
from grpo_core.config.sections import (
    BIG,
    COMPUTE_DTYPES,
    DATASET_BUILDERS,
    DECODE_MODES,
    DISTRIBUTED_BACKENDS,
    DTYPES,
    IMPORTANCE_SAMPLING,
    IMPORTANCE_SAMPLING_ALIASES,
    IMPORTANCE_SAMPLING_LEVELS,
    LIMITS,
    LOCAL_DATA_SUFFIXES,
    LR_SCHEDULERS,
    MULTI_OBJECTIVE_AGGREGATIONS,
    OFFLOAD_DEVICES,
    OVERLONG_PROMPTS,
    QUANT_TYPES,
    REQUIRED,
    SCALE_REWARDS,
    SECTIONS,
    SOURCE_SCHEME,
    TOOL_FORMATS,
    TRACKERS,
    CheckpointConfig,
    DataConfig,
    DistributedConfig,
    GenerationConfig,
    GRPOConfig,
    HubConfig,
    LoggingConfig,
    LoraConfig,
    ModelConfig,
    QuantizationConfig,
    RunConfig,
    ToolsConfig,
    TrainerConfig,
)
from grpo_rewards.tomlfile import ConfigError

__all__ = [
    "BIG", "COMPUTE_DTYPES", "DATASET_BUILDERS", "DISTRIBUTED_BACKENDS", "DTYPES", "HUB_STRATEGIES", "IMPORTANCE_SAMPLING",
    "IMPORTANCE_SAMPLING_ALIASES", "IMPORTANCE_SAMPLING_LEVELS", "LIMITS", "LOCAL_DATA_SUFFIXES", "LR_SCHEDULERS",
    "MULTI_OBJECTIVE_AGGREGATIONS", "DECODE_MODES", "OFFLOAD_DEVICES", "OVERLONG_PROMPTS", "POSITION_KEYS", "QUANT_TYPES",
    "REQUIRED", "SCALE_REWARDS", "SECTIONS",
    "SOURCE_SCHEME", "TOOL_FORMATS", "TRACKERS", "ToolsConfig", "CheckpointConfig", "ConfigError", "DataConfig", "DistributedConfig",
    "GRPOConfig", "GenerationConfig", "HubConfig", "LoggingConfig", "LoraConfig", "ModelConfig",
    "QuantizationConfig", "RunConfig", "TrainerConfig", "apply_overrides", "as_run_config", "config_from_dict",
    "config_from_doc", "load_config", "looks_local", "loss_type_warnings", "model_positions", "parse_override", "repo_id_problem",
    "resolve_local_path",
]
