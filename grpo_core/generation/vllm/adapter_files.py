"""``vllm_lora_push = "adapter"``: the policy's LoRA adapter as the folder vLLM loads a ``LoRARequest`` from.

vLLM 0.32 takes an adapter only as a path (``LoRARequest.lora_path``: ``adapter_config.json`` and
``adapter_model.safetensors``, peft's ``save_pretrained`` layout); it has no public call that takes
tensors. So each version of the adapter is written to a new folder in shared memory (``/dev/shm`` where
it exists, else the temporary folder): the files go to a hidden folder that is renamed into place once
complete, so the engine never reads half a version. A version is written only when a LoRA tensor changed
since the last one (their version counters, as :mod:`weights` tracks them); the folders are removed when
the export is closed or the process ends.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import weakref
from pathlib import Path
from typing import Any

import torch

from grpo_core.generation.vllm.weights import clean_name


def shared_memory_root() -> str | None:
    """``/dev/shm`` when it is a writable folder (memory-backed on Linux), else None (the temporary folder)."""
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


def adapter_name(model: Any) -> str:
    """The peft model's active adapter."""
    active = getattr(model, "active_adapter", "default")
    return active[0] if isinstance(active, (list, tuple)) else active


def peft_config_dict(model: Any) -> dict[str, Any]:
    """The active adapter's ``LoraConfig`` as ``adapter_config.json`` holds it (sets as sorted lists)."""
    data = model.peft_config[adapter_name(model)].to_dict()
    return json.loads(json.dumps(data, default=lambda o: sorted(o) if isinstance(o, (set, frozenset)) else str(o)))


class AdapterFiles:
    """``write()``: a folder holding the policy's adapter as it is now; ``changed()``: whether a LoRA tensor
    changed since the last ``write()``."""

    def __init__(self, model: Any, root: str | None = None):
        from peft import get_peft_model_state_dict  # peft: only a LoRA run gets here

        self.model = model
        self._state = get_peft_model_state_dict
        self.name = adapter_name(model)
        self.config = peft_config_dict(model)
        self.tensors = {n: p for n, p in model.named_parameters() if "lora_" in n and f".{self.name}." in n}
        if not self.tensors:
            raise ValueError("the model has no LoRA tensors to serve as an adapter")
        self.root = Path(tempfile.mkdtemp(prefix="grpo-lora-", dir=root or shared_memory_root()))
        self._finalizer = weakref.finalize(self, shutil.rmtree, str(self.root), True)
        self._seen: int | None = None
        self.versions = 0

    def _version(self) -> int:
        return sum(t._version for t in self.tensors.values())

    def changed(self) -> bool:
        return self._seen != self._version()

    def reset(self) -> None:
        """The next ``changed()`` is True."""
        self._seen = None

    @torch.no_grad()
    def write(self) -> Path:
        """The adapter as it is now, in a new complete folder (``<root>/v<n>``)."""
        from safetensors.torch import save_file  # safetensors: installed with transformers

        self._seen = self._version()
        self.versions += 1
        state = self._state(self.model, adapter_name=self.name, save_embedding_layers=False)
        tensors = {clean_name(k): v.detach().contiguous() for k, v in state.items()}
        final = self.root / f"v{self.versions}"
        partial = self.root / f".v{self.versions}.partial"
        partial.mkdir()
        save_file(tensors, str(partial / "adapter_model.safetensors"))
        (partial / "adapter_config.json").write_text(json.dumps(self.config), encoding="utf-8")
        os.replace(partial, final)
        return final

    def remove(self, folder: Path) -> None:
        """Delete a version the engine no longer reads."""
        shutil.rmtree(folder, ignore_errors=True)

    def close(self) -> None:
        self._finalizer()
