"""Deprecated: ``grpo_core.group_sampling`` moved (see :data:`grpo_core._aliases.MOVED`)."""

from grpo_core._aliases import moved

moved(__name__)
