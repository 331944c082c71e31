"""Deprecated: ``grpo_core.shared_prompts`` moved (see :data:`grpo_core._aliases.MOVED`)."""

from grpo_core._aliases import moved

moved(__name__)
