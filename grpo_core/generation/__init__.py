"""Generation: prompts in, a group of completions per prompt out (:class:`Generation`).

``backend``               the backend protocol, :class:`Generation`, finding a run's backend, EOS ids
``transformers_backend``  the ``transformers`` backend
``transformers_support``  the ``transformers`` backend's config checks (no torch)
``group_sampling``        plain temperature sampling with each prompt prefilled once for its group
``static_decode``         its preallocated KV cache and decode step (replayed as a CUDA graph on CUDA)
``multi_turn``            a rollout of model and tool turns; ``tools`` the tool-call formats and tool set
``tool_rollouts``         what both backends share of a rollout with tools (each samples its turns its own way)
``vllm``                  the ``vllm`` backend, colocated or against a ``vllm serve`` server

The names below are importable from ``grpo_core.generation`` itself; they load on first use, so that
importing this package (for ``grpo_core.generation.vllm.support``, say) does not import torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    **{name: "grpo_core.generation.backend"
       for name in ("Generation", "GenerationBackend", "build_backend", "completion_mask_from_eos", "end_of_turn_ids",
                    "eos_token_ids")},
    **{name: "grpo_core.generation.transformers_backend"
       for name in ("TransformersBackend", "clean_generation_config", "make_transformers_backend",
                    "off_policy_warnings", "sampling_autocast")},
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'grpo_core.generation' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
