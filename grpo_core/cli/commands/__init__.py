"""The trainer's ``grpo`` commands, one module each, and their registration: a plugin of its own (entry point
``builtin_trainer_cli``) adding them through the ``grpo_register_commands`` hook as any third party does.

``train``    ``grpo train CONFIG``: train from a run config (``--dry-run``, ``--nproc N``, ``--resume``)
``config``   ``grpo config validate CONFIG``: check a run config without running it
``signal``   ``grpo signal CONFIG``: which rewards vary within a group on the run's model
``plot``     ``grpo plot RUN_DIR``: a run's metric curves to a PNG
``eval``     ``grpo eval MODEL``: a model scored on a dataset by a rewards file

Each module has ``add_parser(subparsers)`` and its ``cmd_*`` function; the checks they share are in
:mod:`grpo_core.cli.checks`, the ``--nproc`` launcher in :mod:`grpo_core.cli.launch`. To add a command, add a
module here and name it in :data:`COMMANDS` (the order of ``grpo --help``). Heavy imports (torch,
transformers, numpy) stay inside the commands, so that ``grpo --help`` loads none of them.
"""

from __future__ import annotations

from typing import Any

from grpo_core.cli.commands import config, eval, plot, signal, train
from grpo_rewards.hookspecs import hookimpl

COMMANDS = (train, config, signal, plot, eval)


@hookimpl
def grpo_register_commands(subparsers: Any) -> None:
    for command in COMMANDS:
        command.add_parser(subparsers)


__all__ = ["COMMANDS", "grpo_register_commands"]
