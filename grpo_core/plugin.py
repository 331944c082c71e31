"""Registers the trainer's commands (``grpo train``, ``grpo demo``, ...) and backends (filled in by the trainer work).

Each module in ``COMMAND_MODULES`` has ``register(subparsers)``; add a module there to add commands
(imports stay inside, so ``grpo --help`` does not import torch).
"""

from __future__ import annotations

import importlib
from typing import Any

from grpo_rewards.hookspecs import hookimpl

COMMAND_MODULES = ["grpo_core.cli_commands"]


@hookimpl
def grpo_register_commands(subparsers: Any) -> None:
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
