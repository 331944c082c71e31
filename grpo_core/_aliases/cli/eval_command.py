"""Deprecated: ``grpo_core.cli.eval_command`` moved (see :data:`grpo_core._aliases.MOVED`)."""

from grpo_core._aliases import moved

moved(__name__)
