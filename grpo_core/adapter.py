"""Starting from a saved LoRA adapter (``[model] adapter``): checking the folder before anything loads, the
run's ``[lora]`` section taken from the adapter's own config, and the adapter attached, trainable, to the base.

A folder written by ``PeftModel.save_pretrained`` (this trainer's ``model/`` with LoRA) holds
``adapter_config.json`` and ``adapter_model.safetensors`` (or ``.bin``). Its LoRA config wins: ``[lora]``
keys left out take the adapter's values, a key given with another value is an error (the weights have the
adapter's shapes). No torch import here: the checks run at config time.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from grpo_rewards.errors import ConfigError

WEIGHT_FILES = ("adapter_model.safetensors", "adapter_model.bin")
# [lora] key -> adapter_config.json key
LORA_KEYS = {"r": "r", "alpha": "lora_alpha", "dropout": "lora_dropout", "target_modules": "target_modules"}


def is_adapter_folder(path: str | Path) -> bool:
    """Whether ``path`` is a folder holding a PEFT adapter (``adapter_config.json``)."""
    return (Path(path).expanduser() / "adapter_config.json").is_file()


def read_adapter_config(path: str | Path) -> dict[str, Any]:
    """``adapter_config.json`` of an adapter folder as a dict; ``ValueError`` (one line) when unreadable."""
    file = Path(path).expanduser() / "adapter_config.json"
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"{file}: not a readable adapter config: {str(exc).splitlines()[0] if str(exc) else exc}") \
            from None
    if not isinstance(data, dict):
        raise ValueError(f"{file}: expected a JSON object")
    return data


def adapter_folder_hint(name_or_path: str) -> str | None:
    """The one-line hint when ``model.name_or_path`` names an adapter folder rather than a model, else None."""
    path = Path(name_or_path).expanduser()
    if not path.is_dir() or (path / "config.json").is_file() or not is_adapter_folder(path):
        return None
    try:
        base = read_adapter_config(path).get("base_model_name_or_path") or "<its base model>"
    except ValueError:
        base = "<its base model>"
    return (f"{name_or_path} is a LoRA adapter, not a model: set model.adapter = \"{name_or_path}\" and "
            f"model.name_or_path = \"{base}\" (the adapter's base model)")


def _same(key: str, ours: Any, theirs: Any) -> bool:
    if key == "target_modules":
        if isinstance(ours, str) or isinstance(theirs, str):
            return ours == theirs
        return sorted(ours or []) == sorted(theirs or [])
    if key == "dropout":
        return abs(float(ours) - float(theirs or 0.0)) < 1e-12
    return ours == theirs


def adapter_problems(adapter: str, lora: Any, lora_table: dict[str, Any] | None) -> list[tuple[tuple[str, ...], str]]:
    """Problems of ``model.adapter`` as ``(key, message)`` pairs; on none, ``lora`` (the ``[lora]`` section)
    is set from the adapter's config (enabled, r, alpha, dropout, target modules)."""
    path = Path(adapter).expanduser()
    key = ("model", "adapter")
    if not path.is_dir():
        return [(key, f"folder not found: {adapter}")]
    if not is_adapter_folder(path):
        return [(key, f"{adapter} has no adapter_config.json: not a saved PEFT adapter")]
    try:
        saved = read_adapter_config(path)
    except ValueError as exc:
        return [(key, str(exc))]
    if str(saved.get("peft_type", "LORA")).upper() != "LORA":
        return [(key, f"{adapter} is a {saved.get('peft_type')} adapter; only LoRA adapters can be started from")]
    if not any((path / name).is_file() for name in WEIGHT_FILES):
        return [(key, f"{adapter} has no adapter weights ({' or '.join(WEIGHT_FILES)})")]
    table = lora_table if isinstance(lora_table, dict) else {}
    problems = []
    if table.get("enabled") is False:
        problems.append((("lora", "enabled"), "is false, but model.adapter is a LoRA adapter: drop the key"))
    for ours, theirs in LORA_KEYS.items():
        if ours in table and theirs in saved and not _same(ours, table[ours], saved[theirs]):
            problems.append((("lora", ours), f"{table[ours]!r} differs from the adapter's {theirs} = {saved[theirs]!r} "
                                             f"({path / 'adapter_config.json'}); leave it out to use the adapter's"))
    if problems:
        return problems
    lora.enabled = True
    for ours, theirs in LORA_KEYS.items():
        value = saved.get(theirs)
        if value is not None:
            setattr(lora, ours, sorted(value) if isinstance(value, list) else value)
    return []


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:300]


def check_adapter_weights(adapter: str | Path, *, file: str = "") -> None:
    """Refuse adapter weights that cannot be read (a truncated or damaged ``adapter_model.safetensors``)."""
    weights_file = Path(adapter).expanduser() / WEIGHT_FILES[0]
    if not weights_file.is_file():
        return
    from safetensors import safe_open  # torch's companion: loaded when an adapter is attached

    try:
        with safe_open(str(weights_file), "pt") as weights:
            for name in weights.keys():  # noqa: SIM118 (safe_open is not a mapping)
                weights.get_slice(name).get_shape()
    except Exception as exc:  # noqa: BLE001 (safetensors raises its own error kinds for a damaged file)
        raise ConfigError(f"{weights_file}: the adapter's weights cannot be read ({_first_line(exc)}); truncated or "
                          "damaged?", file=file, key="model.adapter") from None


def loaded_line(model: Any, adapter: str | Path) -> str:
    """What a run says once ``[model] adapter`` is on the model: the folder, its rank and how many of its weight
    tensors now train."""
    config = read_adapter_config(adapter)
    trained = sum(1 for name, p in model.named_parameters() if p.requires_grad and "lora_" in name)
    return (f"adapter loaded: {Path(adapter).expanduser()} (LoRA r={config.get('r', '?')}, {trained} weight "
            f"tensors training, trained on {config.get('base_model_name_or_path') or 'an unnamed base'})")


def attach_adapter(model: Any, adapter: str | Path, *, file: str = "") -> Any:
    """``model`` with the saved adapter at ``adapter`` on top, its LoRA weights trainable (a ``PeftModel``).
    Weights that cannot be read, or that do not fit ``model`` (an adapter of another base model), are a
    ``ConfigError`` naming the adapter, its base model and the first difference."""
    from peft import PeftModel

    check_adapter_weights(adapter, file=file)
    try:
        return PeftModel.from_pretrained(model, str(Path(adapter).expanduser()), is_trainable=True)
    except (RuntimeError, ValueError, KeyError) as exc:
        if isinstance(exc, ConfigError):
            raise
        try:
            base = read_adapter_config(adapter).get("base_model_name_or_path") or "another model"
        except ValueError:
            base = "another model"
        text = str(exc)
        detail = next((line.strip() for line in text.splitlines() if "size mismatch" in line), _first_line(exc))
        ours = getattr(getattr(model, "config", None), "_name_or_path", "") or "this model"
        raise ConfigError(f"{adapter} does not fit {ours}: it was trained on {base} ({detail[:300]})",
                          file=file, key="model.adapter") from None
