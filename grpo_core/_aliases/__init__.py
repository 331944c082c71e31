"""Deprecated module paths from before ``grpo_core`` had a folder per extension point.

``grpo_core/__init__.py`` appends this folder to the package's ``__path__``, so that ``grpo_core.checkpoint``
(say), no longer a file of ``grpo_core/``, is found here: a module of two lines that warns with a
:class:`DeprecationWarning` and puts the module it moved to in its place in ``sys.modules`` (the old path
then *is* the new module: same functions, same classes, and monkeypatching either patches both).
:data:`MOVED` lists every old path and its new home; ``tests/core/test_moved_modules.py`` imports each.
An old path inside a package that still exists (``grpo_core.cli.eval_command``) is found the same way: the
package appends its folder here (``_aliases/cli``, no ``__init__.py``) to its ``__path__``.
"""

from __future__ import annotations

import importlib
import sys
import warnings

MOVED = {
    "grpo_core.advantages": "grpo_core.algorithm.advantages",
    "grpo_core.loss": "grpo_core.algorithm.loss",
    "grpo_core.sampler_correction": "grpo_core.algorithm.sampler_correction",
    "grpo_core.models": "grpo_core.policy.models",
    "grpo_core.checkpointing": "grpo_core.policy.activations",
    "grpo_core.logprobs": "grpo_core.policy.logprobs",
    "grpo_core.shared_prompts": "grpo_core.policy.shared_prompts",
    "grpo_core.lean_lora": "grpo_core.policy.lean_lora",
    "grpo_core.memory_model": "grpo_core.policy.memory_model",
    "grpo_core.group_sampling": "grpo_core.generation.group_sampling",
    "grpo_core.vllm": "grpo_core.generation.vllm",
    "grpo_core.vllm.engine": "grpo_core.generation.vllm.engine",
    "grpo_core.vllm.server": "grpo_core.generation.vllm.server",
    "grpo_core.vllm.server_worker": "grpo_core.generation.vllm.server_worker",
    "grpo_core.vllm.support": "grpo_core.generation.vllm.support",
    "grpo_core.vllm.weights": "grpo_core.generation.vllm.weights",
    "grpo_core.distributed": "grpo_core.parallel.distributed",
    "grpo_core.fsdp": "grpo_core.parallel.fsdp",
    "grpo_core.deepspeed_engine": "grpo_core.parallel.deepspeed",
    "grpo_core.checkpoint": "grpo_core.run_folder.checkpoints",
    "grpo_core.metrics": "grpo_core.run_folder.metrics",
    "grpo_core.plotting": "grpo_core.run_folder.plotting",
    "grpo_core.cli_commands": "grpo_core.cli.commands",
    "grpo_core.cli.eval_command": "grpo_core.cli.commands.eval",
    "grpo_core.backends": "grpo_core.trainer_backends",
    "grpo_core.backends.trl_backend": "grpo_core.trainer_backends.trl_backend",
    "grpo_core.backends.trl_mapping": "grpo_core.trainer_backends.trl_mapping",
}


def warn(old: str) -> None:
    old = old.replace("grpo_core._aliases.", "grpo_core.")  # imported by this folder's own name
    warnings.warn(f"{old} is deprecated: import {MOVED[old]}", DeprecationWarning, stacklevel=3)


def moved(old: str) -> None:
    """Called by the module ``old`` as it is imported: warn, and let ``old`` be the module it moved to."""
    warn(old)
    sys.modules[old] = importlib.import_module(MOVED[old.replace("grpo_core._aliases.", "grpo_core.")])
