"""Adds the trainer's hooks (:mod:`grpo_core.hookspecs`) to the plugin manager, and registers the trainer
backends (``grpo_core``, ``trl``), generation backends, parallel engines, loss types, tools, dataset sources and
the rewards and judges that run a model (``reward_model``, the ``transformers`` judge backend:
:mod:`grpo_core.judges`) (the
trainer's commands are plugins of their own: :mod:`grpo_core.cli.commands`, :mod:`grpo_core.demo.command`).

Imports nothing heavy: each registered factory imports its module when it is used (the loss types' module
imports no torch, so their classes are registered as they are). A generation backend's or a loss type's
factory may carry ``config_problems(sections) -> [(key, message)]``, the checks ``grpo_core.config`` runs for it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pluggy

from grpo_core import hookspecs
from grpo_core.algorithm.loss_cispo import CISPO
from grpo_core.algorithm.loss_luspo import LUSPO
from grpo_core.algorithm.loss_sapo import SAPO
from grpo_core.algorithm.loss_types import BUILTIN_LOSS_TYPES
from grpo_core.algorithm.loss_vespo import VESPO
from grpo_core.demo.task import load_source
from grpo_core.generation.tools.builtin import BUILTIN_TOOLS
from grpo_core.generation.transformers_support import transformers_problems
from grpo_core.generation.vllm.support import vllm_problems
from grpo_core.judges import reward_model  # imports torch only when its factory is called
from grpo_rewards.hookspecs import hookimpl


@hookimpl
def grpo_add_hookspecs(pluginmanager: pluggy.PluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


@hookimpl
def grpo_register_trainer_backends(register: Callable[..., None]) -> None:
    def grpo_core_backend(config: Any, *, resume: bool = False) -> Any:
        from grpo_core.trainer import Trainer  # torch: imported when the factory is called

        return Trainer(config, resume=resume)

    def trl_backend(config: Any, *, resume: bool = False) -> Any:
        # torch, TRL: when the factory is called
        from grpo_core.trainer_backends.trl_backend import TRLBackend

        return TRLBackend(config, resume=resume)

    register("grpo_core", grpo_core_backend)
    register("trl", trl_backend)


@hookimpl
def grpo_register_generation_backends(register: Callable[..., None]) -> None:
    def transformers_backend(config: Any, model: Any, tokenizer: Any) -> Any:
        # torch: imported when the factory is called
        from grpo_core.generation.transformers_backend import make_transformers_backend

        return make_transformers_backend(config, model, tokenizer)

    def vllm_backend(config: Any, model: Any, tokenizer: Any) -> Any:
        # torch, vLLM: when the factory is called
        from grpo_core.generation.vllm.engine import make_vllm_backend

        return make_vllm_backend(config, model, tokenizer)

    transformers_backend.config_problems = transformers_problems  # type: ignore[attr-defined]
    vllm_backend.config_problems = vllm_problems  # type: ignore[attr-defined]
    register("transformers", transformers_backend)
    register("vllm", vllm_backend)


@hookimpl
def grpo_register_engines(register: Callable[..., None]) -> None:
    def ddp() -> Any:
        from grpo_core.parallel.ddp import DDPEngine  # torch: imported when the factory is called

        return DDPEngine

    def fsdp2() -> Any:
        from grpo_core.parallel.fsdp import FSDP2Engine  # torch: imported when the factory is called

        return FSDP2Engine

    def deepspeed() -> Any:
        # torch, DeepSpeed: when the factory is called
        from grpo_core.parallel.deepspeed import DeepSpeedEngine

        return DeepSpeedEngine

    register("ddp", ddp)
    register("fsdp2", fsdp2)
    register("deepspeed", deepspeed)


@hookimpl
def grpo_register_loss_types(register: Callable[..., None]) -> None:
    for loss_type in (*BUILTIN_LOSS_TYPES, CISPO, SAPO, LUSPO, VESPO):  # a class is its own factory: cls(config)
        register(loss_type.name, loss_type)


@hookimpl
def grpo_register_rewards(register: Callable[..., None]) -> None:
    register(reward_model.SPEC)


@hookimpl
def grpo_register_judge_backends(register: Callable[..., None]) -> None:
    def transformers_judge(model: str, **options: Any) -> Any:
        from grpo_core.judges.local_judge import transformers_backend  # torch: when the factory is called

        return transformers_backend(model, **options)

    register("transformers", transformers_judge)


@hookimpl
def grpo_register_dataset_sources(register: Callable[..., None]) -> None:
    def demo_source(spec: dict[str, Any]) -> list[dict[str, Any]]:
        if spec["source"].partition(":")[2].partition("?")[0] == "multiplication":  # the tool example's task
            from grpo_core.demo.tool_task import load_source as load_multiplication

            return load_multiplication(spec)
        return load_source(spec)

    register("demo", demo_source)


@hookimpl
def grpo_register_tools(register: Callable[..., None]) -> None:
    for name, function in BUILTIN_TOOLS.items():
        register(name, function)
