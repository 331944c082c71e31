"""What ``[generation] backend = "vllm"`` needs, as config problems (one line each), without importing vLLM,
the server's base URL (``vllm_mode = "server"``), and what an adapter must be for vLLM to serve it
(``vllm_lora_push = "adapter"``: the LoRA ranks vLLM accepts, the peft features it refuses).

The adapter checks mirror vLLM 0.32's ``PEFTHelper.validate_legal`` (``vllm/lora/peft_helper.py``), so a
run that vLLM would refuse at its first generation call is refused by ``grpo config validate`` instead
(``tests/vllm_lane/test_adapter_push.py`` holds them against vLLM's own checks)."""

from __future__ import annotations

import contextlib
import importlib.util
from typing import Any
from urllib.parse import urlparse

from grpo_core.adapter import is_adapter_folder, read_adapter_config
from grpo_rewards.suggest import did_you_mean

INSTALL_HINT = "bash scripts/setup.sh --vllm makes .venv-vllm with it, or pip install 'grpo-toolkit[vllm]'"


def vllm_available() -> bool:
    """vLLM is installed (a namespace package, such as a folder named ``vllm`` on the path, is not it)."""
    spec = importlib.util.find_spec("vllm")
    return spec is not None and spec.origin is not None


VLLM_MODES = ("colocate", "server")
LORA_PUSHES = ("merged", "adapter")
# the ranks vLLM's engine can be started with (vllm.config.lora.MaxLoRARanks): an adapter of rank r needs the
# smallest one >= r
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
# peft init_lora_weights values that only set the adapter's first weights (the others, PiSSA, OLoRA, LoftQ,
# CorDA, change the base weights, which the engine loads from the checkpoint)
_PLAIN_INITS = ("gaussian", "eva", "orthogonal", "mica", "lora_ga")


def engine_lora_rank(r: int) -> int | None:
    """The ``max_lora_rank`` an engine serving a rank-``r`` adapter is started with; None above vLLM's largest."""
    return next((rank for rank in VLLM_LORA_RANKS if rank >= r), None)


def unservable_adapter(peft: dict[str, Any]) -> list[str]:
    """Why vLLM cannot serve a LoRA adapter as it trains, from its peft config (``LoraConfig.to_dict()`` or
    ``adapter_config.json``), one reason each; [] when it can."""
    out = []
    if str(peft.get("peft_type", "LORA")).upper() != "LORA":
        out.append(f"a {peft.get('peft_type')} adapter is not LoRA")
    if [m for m in peft.get("modules_to_save") or [] if m not in ("classifier", "score")]:
        out.append(f"modules_to_save = {sorted(peft['modules_to_save'])}: vLLM serves LoRA layers only (those "
                   "modules are trained whole)")
    if peft.get("use_dora"):
        out.append("use_dora: vLLM does not serve DoRA")
    if peft.get("lora_bias") or peft.get("bias", "none") != "none":
        out.append("a trained bias (bias / lora_bias): vLLM does not serve adapter biases")
    init = peft.get("init_lora_weights", True)
    if isinstance(init, str) and init.lower() not in _PLAIN_INITS:
        out.append(f"init_lora_weights = {init!r} changes the base weights, which vLLM loads from the checkpoint")
    for key, what in (("alora_invocation_tokens", "activated LoRA"), ("layer_replication", "layer_replication"),
                      ("use_bdlora", "block-diagonal LoRA"), ("use_qalora", "QALoRA")):
        if peft.get(key):
            out.append(f"{key}: vLLM does not serve {what}")
    ranks = [peft.get("r", 0), *(peft.get("rank_pattern") or {}).values()]
    if engine_lora_rank(max(ranks)) is None:
        out.append(f"rank {max(ranks)} is above vLLM's largest LoRA rank ({VLLM_LORA_RANKS[-1]})")
    return out


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
    out.extend(_lora_push_problems(sections, server))
    return out


def _lora_push_problems(sections: dict[str, Any], server: bool) -> list[tuple[tuple[str, ...], str]]:
    g, lo, m = sections["generation"], sections["lora"], sections["model"]
    key = ("generation", "vllm_lora_push")
    if g.vllm_lora_push not in LORA_PUSHES:
        return [(key, f"must be one of {', '.join(LORA_PUSHES)}, got {g.vllm_lora_push!r}"
                      f"{did_you_mean(str(g.vllm_lora_push), LORA_PUSHES)}")]
    if g.vllm_lora_push != "adapter":
        return []
    if not lo.enabled:
        return [(key, '"adapter" serves a LoRA adapter, and this run trains every weight ([lora] enabled = false): '
                      'set it to "merged" (the default)')]
    if server:
        return [(key, '"adapter" is the colocated engine\'s; a server gets merged weights: set it to "merged" or '
                      'vllm_mode = "colocate"')]
    if g.vllm_sleep_level == 2:
        return [(key, '"adapter" keeps the checkpoint\'s base weights in the engine, which sleep level 2 drops: '
                      'set vllm_sleep_level to 0 or 1')]
    peft: dict[str, Any] = {"r": lo.r}
    if m.adapter and is_adapter_folder(m.adapter):
        with contextlib.suppress(ValueError):  # an unreadable file is model.adapter's own problem
            peft = read_adapter_config(m.adapter)
    return [(key, f'"adapter": vLLM cannot serve this adapter ({why}); set it to "merged"')
            for why in unservable_adapter(peft)]


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
