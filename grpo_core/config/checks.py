"""The checks of a run config across keys, and against what lies outside it: files and folders on disk (data,
a model, an adapter), a local model's positions, the registry's names (trainer and generation backends, engines,
loss types, dataset sources) and the registered backends' and loss types' own checks.

Run by :func:`grpo_core.config.reading.config_from_doc` once every section is read; each problem is added to the
document (``doc.problem(key, message)``), never raised, so that all of them are reported at once. No
torch/transformers import here: validating a config is cheap and needs no network. A backend's own checks are
not here (each registers them with its factory, see :mod:`grpo_core.plugin`).
"""

from __future__ import annotations

import glob
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from grpo_core.adapter import adapter_folder_hint, adapter_problems
from grpo_core.config.sections import (
    COMPUTE_DTYPES,
    DATASET_BUILDERS,
    DECODE_MODES,
    DISTRIBUTED_BACKENDS,
    DTYPES,
    IMPORTANCE_SAMPLING,
    IMPORTANCE_SAMPLING_ALIASES,
    IMPORTANCE_SAMPLING_LEVELS,
    LOCAL_DATA_SUFFIXES,
    LR_SCHEDULERS,
    MULTI_OBJECTIVE_AGGREGATIONS,
    OFFLOAD_DEVICES,
    OVERLONG_PROMPTS,
    QUANT_TYPES,
    SCALE_REWARDS,
    SECTIONS,
    SOURCE_SCHEME,
    TOOL_FORMATS,
    TRACKERS,
    GRPOConfig,
    HubConfig,
    LoggingConfig,
)
from grpo_rewards.plugins import Registry, get_registry
from grpo_rewards.suggest import did_you_mean
from grpo_rewards.tomlfile import TomlDoc


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


def _resolve_data_files(files: str | list[str] | dict[str, str], config_path: str) -> Any:
    """Relative ``data_files`` patterns resolve as a data path does: as given (cwd), else next to the config
    file when only there do they match a file."""

    def one(pattern: str) -> str:
        if "://" in pattern or Path(pattern).expanduser().is_absolute() or glob.glob(pattern) \
                or config_path in ("<dict>", "<string>"):
            return pattern
        beside = str(Path(config_path).parent / pattern)
        return str(Path(beside).resolve()) if glob.glob(beside) else pattern

    if isinstance(files, str):
        return one(files)
    return {k: one(v) for k, v in files.items()} if isinstance(files, dict) else [one(f) for f in files]


TOOL_BACKENDS = ("transformers", "vllm")  # the generation backends whose rollouts run tools


def _tool_checks(doc: TomlDoc, tools: Any, g: Any, d: Any, registry: Registry) -> None:
    """``[tools]``: registered names, a known format, and what a multi-turn rollout needs (a backend that runs
    tools and samples as it can, a chat template that writes the calls)."""
    _choice(doc, ("tools", "format"), tools.format, TOOL_FORMATS)
    known = tuple(getattr(registry, "tools", {}))  # registered through grpo_register_tools
    for name in tools.names:
        _choice(doc, ("tools", "names"), name, known)
    if len(set(tools.names)) < len(tools.names):
        doc.problem(("tools", "names"), "names a tool twice")
    if tools.names and g.backend not in TOOL_BACKENDS:
        doc.problem(("tools", "names"), f"tools run with generation.backend = {' or '.join(map(repr, TOOL_BACKENDS))}"
                                        f", got {g.backend!r}")
    # the transformers backend's log-probs are taken as the policy's (no correction); vLLM's are corrected
    if tools.names and g.backend == "transformers" and (g.top_p < 1 or g.top_k > 0 or g.repetition_penalty != 1):
        doc.problem(("tools", "names"), "tool rollouts sample at generation.temperature alone: leave top_p, top_k and "
                                        "repetition_penalty at their defaults")
    if tools.names and g.stop:
        doc.problem(("generation", "stop"), "tool rollouts end each model turn at its end-of-turn token: leave "
                                            "generation.stop empty")
    if tools.names and not d.chat_template:
        doc.problem(("tools", "names"), "tools need the chat template (data.chat_template = true): it renders the "
                                        "tools for the model and their answers")


def cross_checks(doc: TomlDoc, cfg: dict[str, Any], registry: Registry) -> None:
    """Every check across keys of the read sections ``cfg`` (see the module docs); fills in what
    follows from other keys (a resolved local path, ``epsilon_high``, an importance-sampling alias)."""
    m, d, g, o, lo, q, lg, ck, tr, ds, hub, tools = (cfg[n] for n in SECTIONS)
    _tool_checks(doc, tools, g, d, registry)
    if tools.names and tr.backend != "grpo_core":
        doc.problem(("tools", "names"), f"tools run in the grpo_core trainer's rollouts, not the {tr.backend!r} backend")
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
    if d.streaming and tr.backend != "grpo_core":  # TRL trains on a datasets.Dataset of every row
        doc.problem(("data", "streaming"), f"streams rows into the grpo_core trainer, not the {tr.backend!r} backend "
                                           "(it trains on a datasets.Dataset of every row); set streaming = false")
    if d.source:
        d.source = _check_source(doc, ("data", "source"), d.source, registry)
    if d.eval_source:
        d.eval_source = _check_source(doc, ("data", "eval_source"), d.eval_source, registry)
    local = bool(d.source) and not SOURCE_SCHEME.match(d.source) and Path(d.source).is_file()
    if local and {part.split("[", 1)[0].strip() for part in d.split.split("+")} != {"train"}:
        doc.problem(("data", "split"), f"a local file has no splits: {d.split!r} would be ignored; name the file in "
                                       "source (a slice of it is fine: 'train[:100]', 'train[10%:]')")
    if d.data_files and d.source in DATASET_BUILDERS:
        d.data_files = _resolve_data_files(d.data_files, doc.path)
    if local and d.data_files:
        doc.problem(("data", "data_files"), "needs a hub dataset, a folder or a builder name (json, csv, parquet) "
                                            "as source, not a file")
    if local and d.revision:
        doc.problem(("data", "revision"), "a local file has no revisions")
    if d.streaming and "[" in d.split:
        doc.problem(("data", "split"), f"{d.split!r}: a streamed split cannot be sliced; use limit")
    if local and d.eval_split and not d.eval_source and "[" not in d.eval_split:
        doc.problem(("data", "eval_split"), "a local file has no splits: the held-out rows would be the training "
                                            "rows; use a slice (split = \"train[:-100]\", eval_split = "
                                            "\"train[-100:]\"), eval_source (another file) or eval_size")
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
    _choice(doc, ("generation", "decode"), g.decode, DECODE_MODES)
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
    loss_types = getattr(registry, "loss_types", {})  # registered through grpo_register_loss_types
    _choice(doc, ("grpo", "loss_type"), o.loss_type, tuple(loss_types) or (GRPOConfig.loss_type,))
    for key, message in getattr(loss_types.get(o.loss_type), "config_problems", lambda sections: [])(cfg):
        doc.problem(key, message)
    _choice(doc, ("grpo", "importance_sampling_level"), o.importance_sampling_level, IMPORTANCE_SAMPLING_LEVELS)
    if o.entropy_coef_min > o.entropy_coef_max:
        doc.problem(("grpo", "entropy_coef_min"), f"must be <= entropy_coef_max ({o.entropy_coef_max:g}), "
                                                  f"got {o.entropy_coef_min:g}")
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
    if o.sync_ref_model and o.beta == 0:  # TRL raises on both
        doc.problem(("grpo", "sync_ref_model"), "needs beta > 0: with beta = 0 there is no reference model to move")
    elif o.sync_ref_model and (lo.enabled or m.adapter):
        doc.problem(("grpo", "sync_ref_model"), "is not supported with LoRA: the reference is the base model with the "
                                                "adapter disabled, not a separate model to move; train fully or "
                                                "leave it off")
    spg = o.steps_per_generation
    if spg is not None and spg > 0 and o.gradient_accumulation_steps > 0:
        if spg % o.gradient_accumulation_steps:
            doc.problem(("grpo", "steps_per_generation"),
                        f"must be a multiple of gradient_accumulation_steps ({o.gradient_accumulation_steps}): a "
                        f"generation batch trains whole optimizer steps, got {spg}")
        elif o.prompts_per_step > 0 and g.num_generations > 0 and (o.prompts_per_step * g.num_generations) % spg:
            doc.problem(("grpo", "steps_per_generation"),
                        f"must divide prompts_per_step * num_generations = {o.prompts_per_step * g.num_generations} "
                        f"(the generation batch is split into that many micro-batches), got {spg}")

    heads = [lo.target_modules] if isinstance(lo.target_modules, str) else lo.target_modules
    if m.cast_lm_head_to_fp32 and lo.enabled and "lm_head" in heads:
        doc.problem(("model", "cast_lm_head_to_fp32"), "is not supported with a LoRA adapter on the head "
                                                       "(lora.target_modules names lm_head), as in TRL: leave lm_head "
                                                       "out of target_modules, or this key off")
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


def loss_type_warnings(cfg: Any, registry: Registry | None = None) -> list[str]:
    """What the run's loss type advises against in ``cfg`` (its factory's ``config_warnings``), one line each."""
    factory = getattr(registry or get_registry(), "loss_types", {}).get(cfg.grpo.loss_type)
    sections = {name: getattr(cfg, name) for name in SECTIONS}  # as its config_problems gets them
    return [f"{cfg.path}: {line}" for line in getattr(factory, "config_warnings", lambda sections: [])(sections)]
