"""vLLM generation: ``[generation] backend = "vllm"``.

``support``  what a config needs for vLLM (checked by ``grpo config validate``; imports no vLLM)
``weights``  the policy's tensors under vLLM's names (LoRA merged on the fly), changed ones only
``engine``   the backend: a colocated ``vllm.LLM`` in the training process, or a ``vllm serve`` server

Nothing here imports vLLM or torch at import time; the backend factory imports them when a run starts.
"""

from grpo_core.vllm.support import vllm_problems

__all__ = ["vllm_problems"]
