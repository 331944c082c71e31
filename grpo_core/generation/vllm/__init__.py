"""vLLM generation: ``[generation] backend = "vllm"``.

``support``  what a config needs for vLLM (checked by ``grpo config validate``; imports no vLLM)
``completion``  what an engine returns per completion
``weights``  the policy's tensors under vLLM's names (LoRA merged on the fly), changed ones only
``quiet_reload``  a push of the changed blocks without vLLM logging every layer it leaves alone
``adapter_files``  ``vllm_lora_push = "adapter"``: the policy's adapter as a folder vLLM loads, one per version
``engine``   the backend, and its colocated engine (a ``vllm.LLM`` in the training process); it drives either engine
``server``   ``vllm_mode = "server"``: a ``vllm serve`` server on this machine, weights pushed through /dev/shm
``server_worker``  the worker extension such a server runs to load the pushed weights

Nothing here imports vLLM or torch at import time; the backend factory imports them when a run starts.
"""

from grpo_core.generation.vllm.support import vllm_problems

__all__ = ["vllm_problems"]
