"""The Python API in TRL's shape: ``GRPOTrainer(model=..., reward_funcs=..., train_dataset=..., args=...)``.

    from grpo_core import GRPOTrainer
    trainer = GRPOTrainer(model=peft_model, processing_class=tokenizer, reward_funcs=[my_reward, "xml_count"],
                          reward_weights=[1.0, 0.5], train_dataset=dataset, args={"grpo": {"max_steps": 10}})
    trainer.train()

What goes in, and what it becomes (everything ends in the same :class:`grpo_core.trainer.Trainer` as
``grpo train run.toml``; a ``GRPOTrainer`` is one):

``model``             a ``transformers`` model, a ``peft.PeftModel`` (its adapter trains), or a name/path
                      (``[model] name_or_path``); ``None`` keeps the config's
``processing_class``  the tokenizer (needed with a model object whose name cannot be loaded)
``peft_config``       a ``peft.LoraConfig`` the model is wrapped with (``[lora]`` records its numbers)
``train_dataset``     a ``datasets.Dataset`` / ``IterableDataset``, a ``pandas.DataFrame``, a list of dicts,
``eval_dataset``      or a source name (``[data] source`` / ``eval_source``) (grpo_core.dataset_objects)
``reward_funcs``      one or a list of: a callable (TRL's ``fn(completions, **kw)`` or
                      ``fn(prompts, completions, **kw)``: it gets ``prompts``, ``completions``,
                      ``completion_ids``, ``trainer_state`` and every dataset column by keyword), a
                      ``compose()`` result, or a registry name (``"xml_count"``, ``grpo rewards list``);
                      each runs under :class:`grpo_rewards.SafeReward` as a TOML reward does (raises and bad
                      values scored None, a deadline; a module-level function runs in its own process)
``reward_weights``    one weight per item of ``reward_funcs`` (TRL's ``GRPOConfig.reward_weights``)
``args``              a ``RunConfig``, a dict of sections, or a TOML path; the objects replace its keys

Bad objects raise the TOML path's errors (``ConfigError`` / ``DataError``, one line each, naming the
argument): a dataset without the prompt column, a reward that is not callable, a weight that is not a number.
"""

from __future__ import annotations

import copy
import inspect
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from grpo_core.adapter import attach_adapter
from grpo_core.config import RunConfig, config_from_dict
from grpo_core.data import train_eval_rows
from grpo_core.dataset_objects import rows_from_object
from grpo_core.policy.models import (
    _REFERENCES,
    disable_dropout,
    is_peft,
    load_base_model,
    load_tokenizer,
    prepare_policy,
    ready_tokenizer,
)
from grpo_core.trainer import Trainer
from grpo_rewards.compose import ComposedReward, RewardEntry, check_weight
from grpo_rewards.contract import SafeReward
from grpo_rewards.plugins import get_registry
from grpo_rewards.reward_config import rewards_from_doc
from grpo_rewards.tomlfile import ConfigError, Problem, TomlDoc, load_toml

HERE = "GRPOTrainer"
REWARD_DEFAULT_KEYS = ("on_error", "timeout", "max_consecutive_failures")


def _problem(key: str, message: str) -> ConfigError:
    return ConfigError([Problem(HERE, None, key, message)])


class TrlReward:
    """A TRL-style reward callable called the way TRL calls it: every argument by keyword (so
    ``fn(prompts, completions, **kw)`` works), or the completions first when it has no ``completions``
    parameter; keyword arguments it cannot take are left out. Pickles when the function does (then it runs
    in a worker process under :class:`SafeReward`)."""

    def __init__(self, fn: Callable[..., Any]):
        self.fn = fn
        self.__name__ = getattr(fn, "__name__", type(fn).__name__)
        try:
            params = inspect.signature(fn).parameters
        except (TypeError, ValueError):  # a builtin without a signature: pass everything
            params = {}
        self._by_keyword = "completions" in params
        self._accepts = None if not params or any(p.kind is p.VAR_KEYWORD for p in params.values()) else set(params)

    def __call__(self, completions: list[Any], **columns: Any) -> Any:
        if self._accepts is not None:
            columns = {k: v for k, v in columns.items() if k in self._accepts}
        if self._by_keyword:
            return self.fn(completions=completions, **columns)
        return self.fn(completions, **columns)

    def metrics(self) -> dict[str, Any]:
        report = getattr(self.fn, "metrics", None)
        return dict(report()) if callable(report) else {}


def _entries_of(item: Any, index: int, registry: Any, defaults: dict[str, Any]) -> list[RewardEntry]:
    """The reward entries of one item of ``reward_funcs``."""
    key = f"reward_funcs[{index}]"
    if isinstance(item, ComposedReward):
        return [copy.copy(e) for e in item.entries]
    if isinstance(item, SafeReward):
        return [RewardEntry(item.__name__, item)]
    if isinstance(item, str):
        alias = item.split(":")[-1].replace("/", "_").replace(".", "_") or "reward"
        doc = TomlDoc(HERE, {"rewards": {**defaults, alias: {"use": item}}})
        composed = rewards_from_doc(doc, registry)
        if doc.problems or composed is None:
            raise _problem(key, "; ".join(p.message for p in doc.problems) or f"cannot build reward {item!r}")
        for e in composed.entries:
            e.use = item
        return composed.entries
    if callable(item):
        wrapped = TrlReward(item)
        try:
            safe = SafeReward(wrapped, wrapped.__name__, **defaults)
        except ValueError as exc:
            raise _problem("rewards", str(exc)) from None
        return [RewardEntry(wrapped.__name__, safe)]
    raise _problem(key, f"expected a callable, a compose() result or a registry name, got {type(item).__name__} "
                        f"{item!r}"[:200])


def compose_reward_funcs(reward_funcs: Any, reward_weights: Any = None, registry: Any = None,
                         defaults: dict[str, Any] | None = None) -> ComposedReward:
    """``reward_funcs`` (one item or a list, mixed kinds) and ``reward_weights`` -> one composed reward; an
    alias used twice gets ``_2``, ``_3``, ...; a ``compose()`` result's own weights are multiplied by its item's.
    ``defaults`` (``on_error``, ``timeout``, ``max_consecutive_failures``: a ``[rewards]`` table's top-level
    keys) apply to the callables and registry names, as they do to a TOML file's rewards."""
    registry = registry or get_registry()
    items = list(reward_funcs) if isinstance(reward_funcs, (list, tuple)) else [reward_funcs]
    if not items:
        raise _problem("reward_funcs", "is empty: give at least one reward")
    if reward_weights is not None:
        if not isinstance(reward_weights, (list, tuple)) or len(reward_weights) != len(items):
            n = len(reward_weights) if isinstance(reward_weights, (list, tuple)) else "not a list"
            raise _problem("reward_weights", f"must be a list of {len(items)} numbers (one per reward_funcs item), "
                                             f"got {n}")
        for i, w in enumerate(reward_weights):
            if (why := check_weight(w)) is not None:
                raise _problem(f"reward_weights[{i}]", why)
    entries: list[RewardEntry] = []
    seen: set[str] = set()
    for i, item in enumerate(items):
        for entry in _entries_of(item, i, registry, dict(defaults or {})):
            alias, n = entry.alias, 2
            while alias in seen or alias == "total":
                alias, n = f"{entry.alias}_{n}", n + 1
            seen.add(alias)
            if alias != entry.alias:
                entry.fn.__name__ = alias
            weight = entry.weight * (float(reward_weights[i]) if reward_weights is not None else 1.0)
            entries.append(RewardEntry(alias, entry.fn, weight, entry.use))
    return ComposedReward(entries)


def _sections(args: Any) -> tuple[dict[str, Any], str]:
    """``args`` as a dict of sections (a copy) and the path its relative names resolve from."""
    if args is None:
        return {}, "<dict>"
    if isinstance(args, RunConfig):
        out = copy.deepcopy(args.raw)  # what was given (defaults stay defaults), validated again with the objects
        out.setdefault("rewards", args.rewards)
        return out, args.path
    if isinstance(args, dict):
        return {k: (v if isinstance(v, ComposedReward) else copy.deepcopy(v)) for k, v in args.items()}, "<dict>"
    if isinstance(args, (str, os.PathLike)):
        return load_toml(args).data, str(args)
    raise _problem("args", f"expected a RunConfig, a dict of sections or a TOML path, got {type(args).__name__}")


def _is_model_object(model: Any) -> bool:
    return hasattr(model, "parameters") and hasattr(model, "config")


def _lora_section(peft_cfg: Any) -> dict[str, Any]:
    """What ``[lora]`` records of a peft ``LoraConfig`` (the object itself is what wraps the model)."""
    targets = peft_cfg.target_modules
    targets = sorted(targets) if isinstance(targets, (set, list, tuple)) else (targets or "all-linear")
    return {"enabled": True, "r": int(peft_cfg.r), "alpha": int(peft_cfg.lora_alpha),
            "dropout": float(peft_cfg.lora_dropout), "target_modules": targets}


def _model_name(model: Any) -> str:
    """The name a model object was loaded from, when it can be loaded again from it, else a placeholder."""
    base = model.get_base_model() if is_peft(model) else model
    name = str(getattr(base.config, "_name_or_path", "") or "")
    if name and (not name.startswith(("/", "./", "../", "~")) or Path(name).expanduser().is_dir()):
        return name
    return f"<{type(base).__name__} object>"


class GRPOTrainer(Trainer):
    """TRL's ``GRPOTrainer`` signature over this project's trainer (see the module docs)."""

    def __init__(self, model: Any = None, reward_funcs: Any = None, args: Any = None, train_dataset: Any = None,
                 eval_dataset: Any = None, processing_class: Any = None, peft_config: Any = None, *,
                 reward_weights: list[float] | None = None, resume: bool = False, registry: Any = None):
        sections, path = _sections(args)
        for name in ("model", "data", "lora"):
            sections.setdefault(name, {})
            if not isinstance(sections[name], dict):
                raise _problem("args", f"[{name}] must be a table of keys, got {type(sections[name]).__name__}")
        self._model_object = self._tokenizer_object = self._peft_config = None
        self._train_object = self._eval_object = None
        if isinstance(model, (str, os.PathLike)):
            sections["model"]["name_or_path"] = os.fspath(model)
        elif model is not None:
            if not _is_model_object(model):
                raise _problem("model", f"expected a transformers or peft model or a name, got {type(model).__name__}")
            if sections["model"].get("adapter"):
                raise _problem("model", "a model object and model.adapter: wrap the model in the adapter yourself "
                                        "(PeftModel.from_pretrained(model, path, is_trainable=True)), or pass its name")
            self._model_object = model
            sections["model"]["name_or_path"] = _model_name(model)
            if is_peft(model):
                if peft_config is not None:
                    raise _problem("peft_config", "the model is already a PeftModel: pass one or the other")
                active = model.peft_config[model.active_adapter]
                if not hasattr(active, "lora_alpha"):
                    kind = getattr(active, "peft_type", None)
                    raise _problem("model", f"a PeftModel of type {getattr(kind, 'value', kind)}; only LoRA adapters "
                                            "train here (a peft.LoraConfig)")
                sections["lora"] = _lora_section(active)
        if peft_config is not None:
            if not hasattr(peft_config, "lora_alpha"):
                raise _problem("peft_config", f"expected a peft.LoraConfig, got {type(peft_config).__name__}")
            self._peft_config = peft_config
            sections["lora"] = _lora_section(peft_config)
        if processing_class is not None:
            if not callable(getattr(processing_class, "decode", None)):
                raise _problem("processing_class", f"expected a tokenizer, got {type(processing_class).__name__}")
            self._tokenizer_object = processing_class
        for arg, key, value in (("train_dataset", "source", train_dataset), ("eval_dataset", "eval_source",
                                                                             eval_dataset)):
            if isinstance(value, (str, os.PathLike)):
                sections["data"][key] = os.fspath(value)
            elif value is not None:
                sections["data"][key] = f"<{arg}>"  # rows come from the object (see _load_rows)
                setattr(self, f"_{arg.split('_')[0]}_object", value)
                if not hasattr(value, "__len__") and "max_steps" not in (sections.get("grpo") or {}):
                    raise _problem(arg, "an iterable dataset has no length (it may never end): set grpo.max_steps, "
                                        "and the rows the steps need are read")
        if reward_funcs is not None:
            table = sections.get("rewards")
            defaults = {k: v for k, v in table.items() if k in REWARD_DEFAULT_KEYS} if isinstance(table, dict) else {}
            sections["rewards"] = compose_reward_funcs(reward_funcs, reward_weights, registry, defaults)
        elif reward_weights is not None:
            raise _problem("reward_weights", "needs reward_funcs (the config's rewards carry their own weights)")
        cfg = config_from_dict(sections, path=path, registry=registry)
        if self._train_object is not None or self._eval_object is not None:  # bad rows: before the model loads
            self._rows = self._object_rows(cfg)
        super().__init__(cfg, resume=resume, registry=registry)

    def _object_rows(self, cfg: RunConfig) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        d = cfg.data
        if self._train_object is not None and not hasattr(self._train_object, "__len__"):  # only what the steps use
            needed = cfg.grpo.max_steps * cfg.grpo.prompts_per_step
            d = copy.copy(d)
            d.limit = min(d.limit or needed, needed)
        train = rows_from_object(self._train_object, d, "train_dataset") if self._train_object is not None else None
        held = rows_from_object(self._eval_object, d, "eval_dataset") if self._eval_object is not None else None
        return train_eval_rows(d, train=train, held=held)

    def _load_rows(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        rows = getattr(self, "_rows", None)
        return rows if rows is not None else super()._load_rows()

    def _load_policy(self) -> tuple[Any, Any]:
        model, cfg = self._model_object, self.cfg
        if model is None and self._tokenizer_object is None and self._peft_config is None:
            return super()._load_policy()
        if model is None:
            model = load_base_model(cfg)
            if cfg.model.adapter:
                model = attach_adapter(model, cfg.model.adapter)
        if self._tokenizer_object is not None:
            tokenizer = ready_tokenizer(self._tokenizer_object, cfg.model.name_or_path)
        elif cfg.model.name_or_path.startswith("<"):
            raise _problem("processing_class", "the model object's name cannot be loaded from: pass its tokenizer "
                                               "as processing_class=")
        else:
            tokenizer = load_tokenizer(cfg)
        frozen_reference = None
        if not is_peft(model) and self._peft_config is None and not cfg.lora.enabled and cfg.grpo.beta:
            frozen_reference = copy.deepcopy(model).requires_grad_(False).eval()  # the KL reference: the start
        embeddings = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
        rows = getattr(getattr(embeddings, "weight", None), "shape", (None,))[0]
        if rows is not None and len(tokenizer) > rows:
            raise _problem("processing_class", f"the tokenizer has {len(tokenizer)} tokens and the model's embeddings "
                                               f"{rows} rows: resize them (model.resize_token_embeddings) or pass the "
                                               "model's own tokenizer")
        try:
            policy = prepare_policy(model, tokenizer, cfg, self._peft_config)
        except ValueError as exc:
            text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            if self._peft_config is not None and "target" in text.lower():
                raise _problem("peft_config", f"target_modules {cfg.lora.target_modules!r} match no module of the "
                                              f"model: {text[:300]}") from None
            raise
        if frozen_reference is not None:
            disable_dropout(frozen_reference)
            _REFERENCES[policy] = frozen_reference.to(next(policy.parameters()).dtype)
        return policy, tokenizer
