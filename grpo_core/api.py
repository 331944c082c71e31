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
``args``              a ``trl.GRPOConfig`` or a flat dict of its keys (grpo_core.trl_args; ``None``: TRL's
                      defaults when trl is installed), a ``RunConfig``, a dict of sections, or a TOML path; the
                      objects replace its keys
``reward_processing_classes``  the tokenizers of reward models in ``reward_funcs`` (grpo_core.trl_reward_models)
``callbacks``         transformers ``TrainerCallback``s (grpo_core.trl_surface: ``state``, ``evaluate``, ...)
``resume``/``overwrite``  an earlier run in the output folder: continue it, or replace it (else refused)

Bad objects raise the TOML path's errors (``ConfigError`` / ``DataError``, one line each, naming the
argument): a dataset without the prompt column, a reward that is not callable, a weight that is not a number.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import logging
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from grpo_core.adapter import attach_adapter
from grpo_core.algorithm.loss import off_policy_mask
from grpo_core.cli.checks import ending, summary
from grpo_core.config import RunConfig, config_from_dict
from grpo_core.config.sections import SECTIONS
from grpo_core.data import format_prompt, train_eval_rows
from grpo_core.dataset_objects import rows_from_object
from grpo_core.generation.tools.environments import EnvironmentPool
from grpo_core.judges.model_process import ModelKey
from grpo_core.judges.reward_model import client_of, resolve_device
from grpo_core.outputs.hub import push_to_hub as push_run_to_hub
from grpo_core.parallel.distributed import world_from_env
from grpo_core.policy.models import (
    _REFERENCES,
    disable_dropout,
    is_peft,
    load_base_model,
    load_tokenizer,
    prepare_policy,
    ready_tokenizer,
    save_model,
)
from grpo_core.prompt_fit import fit_prompts
from grpo_core.quiet import quiet_libraries
from grpo_core.run_folder.checkpoints import clear_run_dir, earlier_run
from grpo_core.run_folder.layout import MODEL_DIR
from grpo_core.trainer import Trainer
from grpo_core.trl_args import (
    TrlArgs,
    is_flat_trl_dict,
    is_trl_config,
    sections_from_trl,
    steps_of_epochs,
    trl_installed,
)
from grpo_core.trl_reward_models import (
    RewardModel,
    ScoreOptions,
    is_reward_model,
    load_reward_model,
    looks_like_hub_id,
    looks_like_reward_model,
)
from grpo_core.trl_rewards import TrlReward
from grpo_core.trl_surface import CallbackRelay, GRPOTrainOutput, RelayRegistry, train_output, trl_logs
from grpo_rewards.compose import ComposedReward, RewardEntry, check_weight
from grpo_rewards.contract import SafeReward
from grpo_rewards.plugins import get_registry
from grpo_rewards.reward_config import rewards_from_doc
from grpo_rewards.tomlfile import ConfigError, Problem, TomlDoc, load_toml

HERE = "GRPOTrainer"
TOKEN_SUMMED = ("bnpo", "dr_grpo", "dapo", "cispo")  # loss types that sum token terms across a batch (TRL's list)
REWARD_DEFAULT_KEYS = ("on_error", "timeout", "max_consecutive_failures")


class TrainerArgumentError(ConfigError, ValueError):
    """A bad argument to ``GRPOTrainer``: one line naming it (a ``ConfigError``) and, as TRL raises for a bad
    argument, a ``ValueError``."""


def _problem(key: str, message: str) -> ConfigError:
    return TrainerArgumentError([Problem(HERE, None, key, message)])


def _entries_of(item: Any, index: int, registry: Any, defaults: dict[str, Any], tokenizer: Any = None,
                chat_template_kwargs: dict[str, Any] | None = None) -> list[RewardEntry]:
    """The reward entries of one item of ``reward_funcs`` (``tokenizer``: its reward model's, if it is one)."""
    key = f"reward_funcs[{index}]"
    if isinstance(item, ComposedReward):
        return [copy.copy(e) for e in item.entries]
    if isinstance(item, SafeReward):
        return [RewardEntry(item.__name__, item)]
    if isinstance(item, (str, os.PathLike)) and looks_like_reward_model(str(item)) and tokenizer is None:
        path = os.fspath(item)  # its model process, shared with every reward_model alias of the same model
        client = client_of(ModelKey(path, None, resolve_device("auto"), "float32"),
                           ScoreOptions(chat_template_kwargs=tuple(sorted((chat_template_kwargs or {}).items()))),
                           name=path.rstrip("/").split("/")[-1])
        return [RewardEntry(client.__name__, SafeReward(client, client.__name__, **defaults))]
    if is_reward_model(item) or (isinstance(item, (str, os.PathLike)) and looks_like_reward_model(str(item))):
        model = item if is_reward_model(item) else load_reward_model(os.fspath(item))
        scorer = RewardModel(model, tokenizer, chat_template_kwargs)
        return [RewardEntry(scorer.__name__, SafeReward(scorer, scorer.__name__, **defaults))]
    if isinstance(item, str):
        alias = item.split(":")[-1].replace("/", "_").replace(".", "_") or "reward"
        doc = TomlDoc(HERE, {"rewards": {**defaults, alias: {"use": item}}})
        composed = rewards_from_doc(doc, registry)
        if composed is None and looks_like_hub_id(item):  # TRL: a string in reward_funcs is a reward model's id
            return _entries_of(load_reward_model(item), index, registry, defaults, tokenizer, chat_template_kwargs)
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
                         defaults: dict[str, Any] | None = None, reward_processing_classes: Any = None,
                         chat_template_kwargs: dict[str, Any] | None = None) -> ComposedReward:
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
    tokenizers = list(reward_processing_classes) if isinstance(reward_processing_classes, (list, tuple)) else \
        [reward_processing_classes] if reward_processing_classes is not None else [None] * len(items)
    if len(tokenizers) != len(items):  # TRL's rule: one tokenizer alone serves one reward alone
        raise _problem("reward_processing_classes", f"must be a list of {len(items)} (one per reward_funcs item, "
                                                    f"None for a function), got {len(tokenizers)}: the numbers "
                                                    "must match")
    entries: list[RewardEntry] = []
    seen: set[str] = set()
    for i, item in enumerate(items):
        for entry in _entries_of(item, i, registry, dict(defaults or {}), tokenizers[i], chat_template_kwargs):
            alias, n = entry.alias, 2
            while alias in seen or alias == "total":
                alias, n = f"{entry.alias}_{n}", n + 1
            seen.add(alias)
            if alias != entry.alias:
                entry.fn.__name__ = alias
            weight = entry.weight * (float(reward_weights[i]) if reward_weights is not None else 1.0)
            entries.append(RewardEntry(alias, entry.fn, weight, entry.use))
    return ComposedReward(entries)


def _default_name(model: Any) -> str:
    if isinstance(model, (str, os.PathLike)):
        name = os.fspath(model)
    else:
        config = getattr(model, "config", None)
        name = str(getattr(config, "_name_or_path", "") or "model")
    return name.rstrip("/").split("/")[-1] or "model"


def _sections(args: Any, model: Any = None) -> tuple[dict[str, Any], str, TrlArgs | None]:
    """``args`` as a dict of sections (a copy), the path its relative names resolve from, and what a TRL
    ``GRPOConfig`` (or a flat dict of its keys) gives besides (grpo_core.trl_args)."""
    if args is None and trl_installed():  # TRL's default: GRPOConfig("<model name>-GRPO")
        args = {"output_dir": f"{_default_name(model)}-GRPO"}
    if args is None:
        return {}, "<dict>", None
    if is_trl_config(args) or is_flat_trl_dict(args, tuple(SECTIONS)):
        trl = sections_from_trl(args)
        return copy.deepcopy(trl.sections), "<GRPOConfig>", trl
    return (*_our_sections(args), None)


def _our_sections(args: Any) -> tuple[dict[str, Any], str]:
    if isinstance(args, RunConfig):
        out = copy.deepcopy(args.raw)  # what was given (defaults stay defaults), validated again with the objects
        out.setdefault("rewards", args.rewards)
        return out, args.path
    if isinstance(args, dict):
        return {k: (v if isinstance(v, ComposedReward) else copy.deepcopy(v)) for k, v in args.items()}, "<dict>"
    if isinstance(args, (str, os.PathLike)):
        return load_toml(args).data, str(args)
    raise _problem("args", f"expected a trl.GRPOConfig, a RunConfig, a dict of sections or a TOML path, got "
                           f"{type(args).__name__}")


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


def _check_run_folder(cfg: RunConfig, resume: bool, overwrite: bool) -> None:
    """An earlier run in the output folder, refused before the model loads, in Python's words."""
    if resume and overwrite:
        raise _problem("resume", "resume=True continues the earlier run and overwrite=True replaces it: give one")
    if not resume and not overwrite and (what := earlier_run(cfg.logging.output_dir)):
        raise _problem("output_dir", f"{cfg.logging.output_dir} holds an earlier run ({what}): continue it with "
                                     f"GRPOTrainer(..., resume=True), replace it with overwrite=True, or pass "
                                     f"another output_dir")


def _first_prompt(dataset: Any, field: str) -> Any:
    """The first row's prompt of a dataset object (a ``datasets.Dataset`` or a list of dicts), else None."""
    try:
        row = dataset[0]
    except (KeyError, IndexError, TypeError):
        return None
    return row.get(field) if isinstance(row, dict) else None


def _apply_trl_rows(trl: TrlArgs, sections: dict[str, Any], train: Any) -> None:
    """What a TRL config needs the training rows for: the step count of ``num_train_epochs``, warmup steps
    as a ratio, and the chat template for conversational rows only (TRL uses a plain-text prompt as is)."""
    g, ours = sections["grpo"], SECTIONS["grpo"]()
    accumulation = g.get("gradient_accumulation_steps", ours.gradient_accumulation_steps)
    per_generation = (g.get("steps_per_generation") or accumulation) // accumulation
    mu = g.get("num_iterations", ours.num_iterations) * per_generation  # TRL's optimizer steps per step of ours
    if trl.epochs is not None:
        if train is None or not hasattr(train, "__len__"):
            raise _problem("args.max_steps", "num_train_epochs needs a train_dataset with a length: set max_steps "
                                             "(TRL's rule for an IterableDataset too)")
        g["max_steps"] = steps_of_epochs(trl.epochs, len(train), g.get("prompts_per_step", ours.prompts_per_step), mu)
    if trl.warmup_steps:
        g["warmup_ratio"] = min(trl.warmup_steps / (g.get("max_steps", ours.max_steps) * mu), 0.999)
    prompt = _first_prompt(train, sections["data"].get("prompt_field", "prompt")) if train is not None else None
    if prompt is not None and "chat_template" not in sections["data"]:
        sections["data"]["chat_template"] = isinstance(prompt, list)


class GRPOTrainer(Trainer):
    """TRL's ``GRPOTrainer`` signature over this project's trainer (see the module docs)."""

    def __init__(self, model: Any = None, reward_funcs: Any = None, args: Any = None, train_dataset: Any = None,
                 eval_dataset: Any = None, processing_class: Any = None, peft_config: Any = None, *,
                 reward_processing_classes: Any = None, reward_weights: list[float] | None = None,
                 callbacks: list[Any] | None = None, tools: list[Any] | None = None,
                 environment_factory: Any = None,
                 resume: bool = False, overwrite: bool = False, registry: Any = None):
        # TRL's environment_factory: probed once here (its methods are tools; a get_reward is one more reward)
        pool = EnvironmentPool(environment_factory) if environment_factory is not None else None
        sections, path, trl = _sections(args, model)
        self.reward_funcs = list(reward_funcs) if isinstance(reward_funcs, (list, tuple)) else \
            ([reward_funcs] if reward_funcs is not None else [])
        self.args = trl.original if trl is not None else args
        self._trl = trl
        if trl is not None and reward_weights is None:
            reward_weights = trl.reward_weights
        if pool is not None and pool.owns_reward:  # as TRL: weight 1, named after the environment's class
            self.reward_funcs.append(pool.reward())
            reward_funcs = self.reward_funcs
            reward_weights = None if reward_weights is None else [*reward_weights, 1.0]
        for name in ("model", "data", "lora", "grpo"):
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
        self.train_dataset, self.eval_dataset = train_dataset, eval_dataset  # as given, as TRL keeps them
        self._eval_sets: dict[str, Any] | None = None
        if isinstance(eval_dataset, Mapping):  # a dict (or DatasetDict) of eval sets: evaluate() scores each
            self._eval_sets, eval_dataset = dict(eval_dataset), None
            if sections.get("logging", {}).get("eval_every") or sections.get("logging", {}).get("eval_on_start"):
                raise _problem("eval_dataset", "a dict of eval sets is scored by evaluate(); evaluation during "
                                               "training takes one eval_dataset")
        if trl is not None and train_dataset is not None and not hasattr(train_dataset, "__len__"):
            accelerator = getattr(trl.original, "accelerator_config", None)
            if getattr(accelerator, "dispatch_batches", None) is True:
                raise _problem("args.accelerator_config", "Iterable datasets require `dispatch_batches=False`: each "
                                                          "process reads its own share of the stream")
            if accelerator is not None:
                accelerator.dispatch_batches = False  # what TRL records for an iterable dataset
            if hasattr(trl.original, "dataloader_num_workers"):
                trl.original.dataloader_num_workers = 0  # as TRL records it: the stream is read in one process
        if trl is not None and train_dataset is None and not sections["data"].get("source"):
            raise _problem("train_dataset", "`train_dataset` is required: pass the training rows (a datasets.Dataset, "
                                            "a list of dicts or a file path)")
        if trl is not None and reward_funcs is None and not sections.get("rewards"):
            raise _problem("reward_funcs", "No reward source provided: pass reward_funcs (reward functions, reward "
                                           "models or the names of registered rewards)")
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
            sections["rewards"] = compose_reward_funcs(
                reward_funcs, reward_weights, registry, defaults, reward_processing_classes,
                trl.chat_template_kwargs if trl is not None else None)
        elif reward_weights is not None:
            raise _problem("reward_weights", "needs reward_funcs (the config's rewards carry their own weights)")
        if trl is not None:
            _apply_trl_rows(trl, sections, self._train_object)
        cfg = config_from_dict(sections, path=path, registry=registry)
        if cfg.grpo.importance_sampling_level == "sequence" and cfg.grpo.loss_type in TOKEN_SUMMED:
            logging.getLogger(__name__).warning(
                "importance_sampling_level='sequence' with loss_type=%r: the loss sums per-token contributions, "
                "which weights each sequence by its completion length instead of following the GSPO objective "
                "(loss_type='grpo' averages each sequence first)", cfg.grpo.loss_type)
        if self._train_object is not None or self._eval_object is not None:  # bad rows: before the model loads
            self._rows = self._object_rows(cfg)
        _check_run_folder(cfg, resume, overwrite)  # before the model loads
        quiet_libraries(cfg)  # library chatter that does not concern this run, as `grpo train` silences it
        if world_from_env().is_main:
            print(f"GRPOTrainer: {summary(cfg)}", file=sys.stderr, flush=True)
        self._overwrite = overwrite
        self._relay = CallbackRelay(self, callbacks)
        super().__init__(cfg, resume=resume, registry=RelayRegistry(registry or get_registry(), self._relay),
                         tools=tools, environment_factory=pool)
        self.reward_func_names = list(cfg.rewards.aliases)
        self.reward_processing_classes = [getattr(getattr(e.fn, "fn", None), "tokenizer", None)
                                          for e in cfg.rewards.entries]  # TRL's: a reward model's tokenizer, else None
        self.aux_loss_enabled = False  # TRL's flag for an MoE's load-balancing loss, which is not added here
        if trl is not None and trl.generation_kwargs:
            if not hasattr(self.backend, "generation_kwargs"):
                raise _problem("args.generation_kwargs", f"the {cfg.generation.backend} generation backend takes no "
                                                         f"generate() keywords; the transformers backend does")
            self.backend.generation_kwargs = dict(trl.generation_kwargs)

    # TRL's static helper, answered by the loss's own mask (TRL's tests call it on the class)
    get_off_policy_mask = staticmethod(off_policy_mask)

    # ---- what TRL users and transformers' callbacks touch (grpo_core.trl_surface) ----
    @property
    def state(self) -> Any:
        """A ``transformers.TrainerState``: ``global_step`` (TRL's optimizer steps), ``max_steps``, ``epoch`` and
        ``log_history`` in TRL's metric names."""
        return self._relay.state

    @property
    def processing_class(self) -> Any:
        return self.tokenizer

    @property
    def entropy_coef(self) -> float:
        """The entropy bonus's coefficient now (TRL's attribute; the adaptive controller moves it every optimizer
        step)."""
        return self.entropy.coef

    def add_callback(self, callback: Any) -> None:
        """A ``transformers.TrainerCallback`` (or its class) that hears the training events from now on."""
        self._relay.add(callback)

    def remove_callback(self, callback: Any) -> None:
        self._relay.callbacks = [c for c in self._relay.callbacks
                                 if c is not callback and not (isinstance(callback, type) and isinstance(c, callback))]

    def train(self, resume_from_checkpoint: Any = None) -> GRPOTrainOutput:  # type: ignore[override]
        """Train; a ``transformers.trainer_utils.TrainOutput`` (``result["step"]`` etc. give the run summary)."""
        if resume_from_checkpoint:
            raise _problem("resume_from_checkpoint", "pass resume=True to GRPOTrainer (it resumes the run folder's "
                                                     "newest checkpoint)")
        if self._overwrite and not self.resume:
            clear_run_dir(self.run_dir)
        result = super().train()
        if self._relay.stopped_at is not None:  # a callback's control.should_training_stop: no interruption
            result["interrupted"] = False
        if self.world.is_main:
            line = ending(result, self.cfg.logging.output_dir)
            if self._relay.stopped_at is not None:
                line = f"stopped at step {self._relay.stopped_at} (control.should_training_stop): {self.run_dir}"
            print(line, file=sys.stderr, flush=True)
        return train_output(self._relay, result)

    def save_model(self, output_dir: str | os.PathLike | None = None) -> None:
        """Save the model (the adapter of a LoRA run) and the tokenizer to ``output_dir`` (default: the run
        folder's ``model/``)."""
        save_model(self.engine.plain_model(), self.tokenizer, Path(output_dir) if output_dir else
                   self.run_dir / MODEL_DIR)

    def push_to_hub(self, commit_message: str | None = None, **_: Any) -> str:
        """Push the run folder's model (its card and curves) as ``[hub]`` says (``hub_model_id``, token); the
        repo's URL. ``save_model()`` or ``train()`` first."""
        cfg = dataclasses.replace(self.cfg, hub=dataclasses.replace(self.cfg.hub, push_to_hub=True))
        return push_run_to_hub(self.run_dir, cfg)

    def evaluate(self, eval_dataset: Any = None, metric_key_prefix: str = "eval") -> dict[str, float]:
        """Score one greedy completion per held-out row with the run's rewards, in TRL's names
        (``eval_reward``, ``eval_rewards/<name>/mean``, ``eval_completions/mean_length``). ``eval_dataset``: the
        held-out rows given at construction by default; another dataset object; or a dict of them, each scored
        under ``<prefix>_<name>_``."""
        if eval_dataset is None and self._eval_sets is not None:
            eval_dataset = self._eval_sets
        if isinstance(eval_dataset, Mapping):
            out: dict[str, float] = {}
            for name, dataset in eval_dataset.items():
                out.update(self.evaluate(dataset, f"{metric_key_prefix}_{name}"))
            return out
        saved = self.eval_prompts, self.eval_rows
        if eval_dataset is not None:
            d = self.cfg.data
            held = rows_from_object(eval_dataset, d, "eval_dataset")
            self.eval_prompts, self.eval_rows = fit_prompts(
                [format_prompt(r, d, self.tokenizer) for r in held], held, self.tokenizer, d.max_prompt_length,
                d.overlong_prompts, not d.chat_template, "held-out")
        if not len(self.eval_rows):
            raise _problem("eval_dataset", "no held-out rows: pass eval_dataset= here or to GRPOTrainer")
        try:
            metrics = self._evaluate()
        finally:
            self.eval_prompts, self.eval_rows = saved
        out = {f"{metric_key_prefix}_{k.removeprefix('eval_')}": v for k, v in trl_logs(metrics).items()}
        self.state.log_history.append({**out, "step": self.state.global_step})
        self._relay.fire("on_evaluate", metrics=out)
        return out

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
        model, tokenizer = self._load_objects()
        kwargs = self._trl.chat_template_kwargs if self._trl is not None else {}
        if kwargs:  # TRL's chat_template_kwargs (Qwen3's enable_thinking): every prompt is formatted with them
            tokenizer.apply_chat_template = functools.partial(type(tokenizer).apply_chat_template, tokenizer,
                                                              **kwargs)
        return model, tokenizer

    def _load_objects(self) -> tuple[Any, Any]:
        model, cfg = self._model_object, self.cfg
        if model is None and self._tokenizer_object is None and self._peft_config is None:
            return Trainer._load_policy(self)
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
