"""What ``[generation] backend = "vllm"`` needs, as config problems (one line each), without importing vLLM,
and the server's base URL (``vllm_mode = "server"``)."""

from __future__ import annotations

import importlib.util
from typing import Any
from urllib.parse import urlparse

from grpo_rewards.suggest import did_you_mean

INSTALL_HINT = "bash scripts/setup.sh --vllm makes .venv-vllm with it, or pip install 'grpo-toolkit[vllm]'"


def vllm_available() -> bool:
    """vLLM is installed (a namespace package, such as a folder named ``vllm`` on the path, is not it)."""
    spec = importlib.util.find_spec("vllm")
    return spec is not None and spec.origin is not None


VLLM_MODES = ("colocate", "server")


def server_url(g: Any) -> str:
    """The server's base URL: ``vllm_server_url`` when set, else ``http://vllm_server_host:vllm_server_port``."""
    if g.vllm_server_url:
        return g.vllm_server_url.rstrip("/")
    host = f"[{g.vllm_server_host}]" if ":" in g.vllm_server_host else g.vllm_server_host
    return f"http://{host}:{g.vllm_server_port}"


def vllm_problems(sections: dict[str, Any]) -> list[tuple[tuple[str, ...], str]]:
    """``[(key, message)]`` for a config naming the vllm backend that vLLM cannot serve here."""
    g, q = sections["generation"], sections["quantization"]
    out: list[tuple[tuple[str, ...], str]] = []
    server = g.vllm_mode == "server"
    if g.vllm_mode not in VLLM_MODES:
        out.append((("generation", "vllm_mode"), f"must be one of {', '.join(VLLM_MODES)}, got {g.vllm_mode!r}"
                                                  f"{did_you_mean(str(g.vllm_mode), VLLM_MODES)}"))
    elif not server and not vllm_available():  # a server needs no vLLM in the training process
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
    elif g.vllm_sleep_level and server:
        out.append((("generation", "vllm_sleep_level"), 'sleep mode is the colocated engine\'s; with vllm_mode = '
                                                        '"server" the server keeps its own memory: set it to 0'))
    if g.vllm_max_model_len is not None and g.vllm_max_model_len <= 0:
        out.append((("generation", "vllm_max_model_len"), f"must be > 0, got {g.vllm_max_model_len}"))
    out.extend(_server_problems(g, server))
    return out


def _server_problems(g: Any, server: bool) -> list[tuple[tuple[str, ...], str]]:
    out: list[tuple[tuple[str, ...], str]] = []
    if g.vllm_server_url:
        url = urlparse(g.vllm_server_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            out.append((("generation", "vllm_server_url"), f"expected http://host:port, got {g.vllm_server_url!r}"))
        elif not server:
            out.append((("generation", "vllm_server_url"), 'read only with vllm_mode = "server" (the colocated '
                                                           'engine has no URL): set vllm_mode = "server" or remove it'))
    if not g.vllm_server_host or any(c in g.vllm_server_host for c in "/ "):
        out.append((("generation", "vllm_server_host"), f"expected a host name or address, got "
                                                        f"{g.vllm_server_host!r}"))
    if not 0 < g.vllm_server_port < 65536:
        out.append((("generation", "vllm_server_port"), f"must be in 1..65535, got {g.vllm_server_port}"))
    if not g.vllm_server_timeout > 0:
        out.append((("generation", "vllm_server_timeout"), f"must be > 0 (seconds), got {g.vllm_server_timeout}"))
    return out
