"""A ``trl.GRPOConfig`` (or a flat dict of its keys) as our run config's sections: :func:`sections_from_trl`.

Every field with an equivalent carries over with TRL's value, TRL's defaults included (the table is
:data:`grpo_core.config.trl_names.TRL_FIELDS`, which ``trainer_backends.trl_mapping`` reads the other way);
a field set to a value we cannot honour is one :class:`ConfigError` naming it. The batch arithmetic is TRL's
(``GRPOConfig.__post_init__``, trl 1.16):

- a generation batch is ``generation_batch_size = per_device_train_batch_size * world * steps_per_generation``
  completions, ``generation_batch_size / num_generations`` prompts: our ``prompts_per_step``;
- TRL splits it into ``steps_per_generation`` micro-batches and steps the optimizer every
  ``gradient_accumulation_steps`` of them, ``num_iterations`` times over; so do we (``grpo.steps_per_generation``),
  for a ``steps_per_generation`` that is a multiple of ``gradient_accumulation_steps`` (whole optimizer steps);
- TRL counts optimizer steps: ``max_steps`` is ours times ``num_iterations * steps_per_generation /
  gradient_accumulation_steps`` (:func:`optimizer_steps`); with ``max_steps = -1`` it runs
  ``num_train_epochs`` passes of ``len(train_dataset) // prompts_per_step`` generation batches each
  (the sampler drops the last partial one), rounded up as transformers' Trainer rounds
  (:func:`steps_of_epochs`, applied once the rows are known);
- TRL has no prompt length limit (``data.max_prompt_length = None``) and uses a plain-text prompt as it is
  (the chat template only for conversational rows; ``GRPOTrainer`` sets ``data.chat_template`` from the rows).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from dataclasses import dataclass, field
from typing import Any

from grpo_core.config.sections import SECTIONS
from grpo_core.config.trl_names import TRL_FIELDS, enum_value, same_fields, to_ours
from grpo_rewards.suggest import did_you_mean
from grpo_rewards.tomlfile import ConfigError, Problem

HERE = "GRPOConfig"
MODEL_INIT_KEYS = {"dtype": "dtype", "torch_dtype": "dtype", "attn_implementation": "attn_implementation",
                   "revision": "revision", "trust_remote_code": "trust_remote_code"}


@dataclass
class TrlArgs:
    """What a ``GRPOConfig`` gives: our sections, and what ``GRPOTrainer`` applies itself (the epochs and
    warmup steps that need the row count, the reward weights, generation and chat template keywords)."""

    sections: dict[str, dict[str, Any]]
    epochs: float | None = None  # max_steps = -1: the run's length in passes over the training rows
    warmup_steps: int = 0  # a number of steps (>= 1): a ratio once the step count is known
    reward_weights: list[float] | None = None
    generation_kwargs: dict[str, Any] = field(default_factory=dict)
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    original: Any = None  # the GRPOConfig object (trainer.args)


def is_trl_config(args: Any) -> bool:
    """Whether ``args`` is a ``trl.GRPOConfig`` (or a subclass), without importing TRL."""
    return any(c.__name__ == "GRPOConfig" and c.__module__.startswith("trl") for c in type(args).__mro__)


def is_flat_trl_dict(args: Any, sections: tuple[str, ...]) -> bool:
    """A dict whose keys are TRL's field names rather than our sections (one TRL field is enough)."""
    return isinstance(args, dict) and any(k in TRL_FIELDS for k in args) and not any(
        isinstance(v, dict) and k in sections for k, v in args.items())


def _error(key: str, message: str) -> ConfigError:
    return ConfigError([Problem(HERE, None, key, message)])


def config_from_flat_dict(data: dict[str, Any]) -> Any:
    """``trl.GRPOConfig(**data)`` (TRL's own checks and batch arithmetic); a key TRL does not have is a
    ConfigError naming it, with TRL's field names to choose from."""
    try:
        from trl import GRPOConfig  # heavy and optional: only a flat dict of TRL keys needs it
    except ImportError:
        raise _error("args", "a flat dict of TRL keys needs trl installed (pip install trl); or give our "
                             "sections ({\"grpo\": {...}})") from None
    names = {f.name for f in dataclasses.fields(GRPOConfig)}
    unknown = [k for k in data if k not in names]
    if unknown:
        raise ConfigError([Problem(HERE, None, k, f"not a field of trl.GRPOConfig{did_you_mean(k, names)}")
                           for k in unknown])
    kwargs = dict(data)
    if not kwargs.get("fp16") and "bf16" not in kwargs and "use_cpu" not in kwargs:
        kwargs["use_cpu"] = not _cuda()  # TRL's bf16 default refuses a CPU without use_cpu
    try:
        with warnings.catch_warnings():  # transformers' deprecation notice of gradient_checkpointing
            warnings.simplefilter("ignore", FutureWarning)
            return GRPOConfig(**kwargs)
    except (ValueError, TypeError) as exc:
        raise _error("args", f"trl.GRPOConfig refused it: {exc}") from None


def trl_installed() -> bool:
    """Whether ``trl`` can be imported (``GRPOTrainer(args=None)`` then takes TRL's defaults, as TRL does)."""
    import importlib.util

    return importlib.util.find_spec("trl") is not None


def _cuda() -> bool:
    try:
        import torch  # heavy: only to know whether TRL's bf16 default applies
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def _reference(args: Any) -> Any:
    """A ``GRPOConfig`` of the same class at its defaults, resolved as ``args`` was (device, precision)."""
    try:
        with warnings.catch_warnings():  # transformers' deprecation notices: the user's own object gave them
            warnings.simplefilter("ignore")
            return type(args)(output_dir=args.output_dir, use_cpu=args.use_cpu, bf16=args.bf16, fp16=args.fp16)
    except (ValueError, TypeError):
        return None


def _differs(a: Any, b: Any) -> bool:
    a, b = enum_value(a), enum_value(b)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return list(a) != list(b)
    return bool(a != b) if not (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)) \
        else False


def _set_fields(args: Any) -> set[str]:
    """The fields of ``args`` that differ from TRL's defaults."""
    ref = _reference(args)
    out = set()
    for f in dataclasses.fields(args):
        value = getattr(args, f.name)
        default = getattr(ref, f.name) if ref is not None else TRL_FIELDS.get(f.name, f).default
        if _differs(value, default):
            out.add(f.name)
    return out


_OURS = {name: cls() for name, cls in SECTIONS.items()}


def _put(sections: dict[str, dict[str, Any]], dotted: str, value: Any) -> None:
    """Set ``section.key``; a value equal to our default is left out (the run file says only what differs, and
    the checks of keys meaningful only with another, e.g. [hub] without push_to_hub, stay quiet)."""
    section, _, key = dotted.partition(".")
    default = getattr(_OURS[section], key)
    if default == value and type(default) is type(value):
        sections.get(section, {}).pop(key, None)
        return
    sections.setdefault(section, {})[key] = value


def _model_init(sections: dict[str, dict[str, Any]], kwargs: dict[str, Any]) -> None:
    for key, value in kwargs.items():
        if key not in MODEL_INIT_KEYS:
            raise _error(f"model_init_kwargs.{key}", "not supported: the model loads with [model]'s dtype, "
                                                     "attn_implementation, revision and trust_remote_code only")
        if key in ("dtype", "torch_dtype") and not isinstance(value, str):
            value = str(value).removeprefix("torch.")
        _put(sections, f"model.{MODEL_INIT_KEYS[key]}", value)


def _refusals(args: Any, given: set[str]) -> list[Problem]:
    problems = []
    known = set(TRL_FIELDS)
    for name in sorted(given):
        f = TRL_FIELDS.get(name)
        if f is not None and f.kind == "unsupported":
            problems.append(Problem(HERE, None, name, f"= {enum_value(getattr(args, name))!r} is not supported: "
                                                      f"{f.note}"))
        elif name not in known:
            problems.append(Problem(HERE, None, name, f"= {enum_value(getattr(args, name))!r} is not supported "
                                                      f"(a TrainingArguments field the GRPO trainer does not read)"))
    return problems


def sections_from_trl(args: Any) -> TrlArgs:
    """Our sections from a ``trl.GRPOConfig`` (or a flat dict of its keys): see the module docs."""
    if isinstance(args, dict):
        args = config_from_flat_dict(args)
    given = _set_fields(args)
    problems = _refusals(args, given)
    if problems:
        raise ConfigError(problems)
    v = {f.name: getattr(args, f.name) for f in dataclasses.fields(args)}
    sections: dict[str, dict[str, Any]] = {}
    for name, ours in same_fields().items():
        _put(sections, ours, to_ours(name, v[name]))
    _put(sections, "data.max_prompt_length", None)  # TRL 1.x has no prompt length limit
    _put(sections, "data.seed", int(v["seed"]))  # TRL shuffles with the training seed
    _put(sections, "logging.progress", not v["disable_tqdm"])
    if v["model_init_kwargs"]:
        _model_init(sections, dict(v["model_init_kwargs"]))
    _put(sections, "generation.backend", "vllm" if v["use_vllm"] else "transformers")
    _put(sections, "generation.vllm_sleep_level", 2 if v["vllm_enable_sleep_mode"] else 0)
    if not v["vllm_importance_sampling_correction"]:
        _put(sections, "generation.importance_sampling", "none")
    out = TrlArgs(sections, reward_weights=list(v["reward_weights"]) if v["reward_weights"] else None,
                  generation_kwargs=dict(v["generation_kwargs"] or {}),
                  chat_template_kwargs=dict(v["chat_template_kwargs"] or {}), original=args)
    _batch(out, v, given)
    _cadence(out, v)
    return out


def _batch(out: TrlArgs, v: dict[str, Any], given: set[str]) -> None:
    ga, spg, gbs, k = (v["gradient_accumulation_steps"], v["steps_per_generation"], v["generation_batch_size"],
                       v["num_generations"])
    if spg % ga:
        name = "steps_per_generation" if "steps_per_generation" in given or "generation_batch_size" not in given \
            else "generation_batch_size"
        raise _error(name, f"gives {spg} micro-batches per generation batch, not a multiple of "
                           f"gradient_accumulation_steps ({ga}): not supported, a generation batch trains whole "
                           f"optimizer steps here")
    mu = optimizer_steps(v)
    if gbs % k:
        raise _error("generation_batch_size", f"{gbs} is not a multiple of num_generations ({k})")
    _put(out.sections, "grpo.prompts_per_step", gbs // k)
    steps = v["max_steps"]
    if steps > 0:
        if steps % mu:
            raise _error("max_steps", f"{steps} is not a multiple of the optimizer steps per generation batch "
                                      f"({mu}: num_iterations x steps_per_generation / gradient_accumulation_steps): "
                                      f"TRL would stop inside a generation batch; give a multiple")
        _put(out.sections, "grpo.max_steps", steps // mu)
    else:
        out.epochs = float(v["num_train_epochs"])
    warmup = v["warmup_steps"]
    if isinstance(warmup, float) and 0 < warmup < 1:
        _put(out.sections, "grpo.warmup_ratio", warmup)
    elif warmup:
        out.warmup_steps = int(warmup)


def _every(v: dict[str, Any], name: str, count: Any) -> int:
    if isinstance(count, float) and count < 1:
        raise _error(name, f"= {count} (a ratio of the run) is not supported: give a number of steps")
    return max(1, math.ceil(int(count) / optimizer_steps(v)))


def optimizer_steps(v: dict[str, Any]) -> int:
    """TRL's optimizer steps per generation batch of ours (``v``: a ``GRPOConfig``'s fields, after its
    ``__post_init__``): ``num_iterations * steps_per_generation / gradient_accumulation_steps``."""
    return v["num_iterations"] * max(1, v["steps_per_generation"] // v["gradient_accumulation_steps"])


def _cadence(out: TrlArgs, v: dict[str, Any]) -> None:
    """Checkpoints, evaluations and logging in our steps."""
    save = enum_value(v["save_strategy"])
    if save == "no":
        _put(out.sections, "checkpoint.every", 0)
    elif save == "steps":
        _put(out.sections, "checkpoint.every", _every(v, "save_steps", v["save_steps"]))
    else:
        raise _error("save_strategy", f"= {save!r} is not supported: \"steps\" (every save_steps) or \"no\"")
    _put(out.sections, "checkpoint.every_minutes", 0.0)  # TRL saves by steps only
    ev = enum_value(v["eval_strategy"])
    if ev == "steps":
        _put(out.sections, "logging.eval_every", _every(v, "eval_steps", v["eval_steps"] or v["logging_steps"]))
    elif ev != "no":
        raise _error("eval_strategy", f"= {ev!r} is not supported: \"steps\" (every eval_steps) or \"no\"")
    log = enum_value(v["logging_strategy"])
    if log == "steps":
        _put(out.sections, "logging.log_every", _every(v, "logging_steps", v["logging_steps"]))
    elif log == "no":  # metrics.jsonl keeps every step; nothing printed
        _put(out.sections, "logging.log_every", 1)
        _put(out.sections, "logging.progress", False)
    else:
        raise _error("logging_strategy", f"= {log!r} is not supported: \"steps\" or \"no\"")


def steps_of_epochs(epochs: float, rows: int, prompts_per_step: int, num_iterations: int) -> int:
    """Our step count for ``num_train_epochs`` over ``rows`` training rows, as TRL counts it: its sampler
    yields ``rows // prompts_per_step`` generation batches per epoch, each ``num_iterations`` optimizer
    steps; transformers' Trainer runs ``ceil(epochs * that)`` optimizer steps, ours ``ceil(that /
    num_iterations)``."""
    per_epoch = rows // prompts_per_step
    if per_epoch == 0:
        raise _error("num_train_epochs", f"{rows} training rows make no generation batch of {prompts_per_step} "
                                         f"prompts: give more rows or a smaller per_device_train_batch_size")
    return max(1, math.ceil(math.ceil(epochs * per_epoch * num_iterations) / num_iterations))
