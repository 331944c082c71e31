"""The worker side of ``vllm_mode = "server"``: mixed into each worker of a ``vllm serve`` server started with
``--worker-extension-cls grpo_core.generation.vllm.server_worker.WeightLoader`` (and ``VLLM_SERVER_DEV_MODE=1``, which
opens ``/collective_rpc``), so the trainer (:mod:`grpo_core.generation.vllm.server`) can push weights to it.

``grpo_load_weights(path)`` reads a safetensors file of ``(Hugging Face name, tensor)`` pairs (whole
attention/MLP blocks, written by the trainer to shared memory) and reloads them in place with vLLM's
``reload_weights``, as the colocated engine does, then rebuilds a head tied to reloaded embeddings.
``grpo_worker_info()`` tells the trainer the extension is there, how log-probs are returned and the
engine's dtype.

This module runs inside the server's worker processes; it imports vLLM nothing at import time.
"""

from __future__ import annotations

from typing import Any


class WeightLoader:
    """Worker methods reachable through ``POST /collective_rpc`` (``self`` is vLLM's worker)."""

    def grpo_worker_info(self: Any) -> dict[str, Any]:
        """What the trainer checks before a run: the log-prob mode and the dtype of this worker's engine."""
        config = self.vllm_config.model_config
        mode = getattr(config, "logprobs_mode", None)
        return {"logprobs_mode": str(getattr(mode, "value", mode)),
                "dtype": str(getattr(config, "dtype", "")).removeprefix("torch.")}

    def grpo_load_weights(self: Any, path: str) -> int:
        """Reload the tensors of the safetensors file at ``path`` in place; returns how many."""
        from safetensors.torch import load_file

        # torch: this module loads light in vLLM's workers
        from grpo_core.generation.vllm.engine import refresh_tied_head
        from grpo_core.generation.vllm.quiet_reload import quiet_partial_reload

        batch = list(load_file(path).items())
        if batch:
            with quiet_partial_reload():
                self.reload_weights(weights_iterator=batch, is_checkpoint_format=True)
            if any(name.endswith("embed_tokens.weight") for name, _ in batch):
                refresh_tied_head(self.get_model())
        return len(batch)
