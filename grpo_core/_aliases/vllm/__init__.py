"""Deprecated: ``grpo_core.vllm`` moved to :mod:`grpo_core.generation.vllm`.

A package of its own (not the new one under the old name), so that ``grpo_core.vllm.server_worker`` and
its siblings resolve to this folder's aliases and so to the modules they moved to, never to second copies.
"""

from grpo_core._aliases import warn
from grpo_core.generation.vllm import *  # noqa: F403
from grpo_core.generation.vllm import __all__  # noqa: F401

warn(__name__)
