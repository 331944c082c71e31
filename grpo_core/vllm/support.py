"""What ``[generation] backend = "vllm"`` needs, as config problems (one line each), without importing vLLM."""

from __future__ import annotations

import importlib.util
from typing import Any
from urllib.parse import urlparse

INSTALL_HINT = "bash scripts/setup.sh --vllm makes .venv-vllm with it, or pip install 'grpo-toolkit[vllm]'"


def vllm_available() -> bool:
    """vLLM is installed (a namespace package, such as a folder named ``vllm`` on the path, is not it)."""
    spec = importlib.util.find_spec("vllm")
    return spec is not None and spec.origin is not None


def vllm_problems(sections: dict[str, Any]) -> list[tuple[tuple[str, ...], str]]:
    """``[(key, message)]`` for a config naming the vllm backend that vLLM cannot serve here."""
    g, q = sections["generation"], sections["quantization"]
    out: list[tuple[tuple[str, ...], str]] = []
    if not vllm_available():
        out.append((("generation", "backend"), f"'vllm' needs the vllm package, not installed in this "
                                               f"environment ({INSTALL_HINT})"))
    if q.load_in_4bit:
        out.append((("quantization", "load_in_4bit"), 'backend = "vllm" serves 16/32-bit weights; a 4-bit '
                                                      '(QLoRA) policy needs backend = "transformers"'))
    if not 0 < g.vllm_gpu_memory_utilization <= 1:
        out.append((("generation", "vllm_gpu_memory_utilization"),
                     f"must be in (0, 1], got {g.vllm_gpu_memory_utilization}"))
    if g.vllm_sleep_level not in (0, 1, 2):
        out.append((("generation", "vllm_sleep_level"), f"must be 0, 1 or 2, got {g.vllm_sleep_level}"))
    if g.vllm_max_model_len is not None and g.vllm_max_model_len <= 0:
        out.append((("generation", "vllm_max_model_len"), f"must be > 0, got {g.vllm_max_model_len}"))
    if g.vllm_server_url:
        url = urlparse(g.vllm_server_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            out.append((("generation", "vllm_server_url"), f"expected http://host:port, got {g.vllm_server_url!r}"))
        elif sections["trainer"].backend == "grpo_core":
            out.append((("generation", "vllm_server_url"), "the grpo_core trainer has no server mode yet (the trl "
                                                           "trainer backend has): leave it empty for the colocated "
                                                           "engine"))
    return out
