"""What a run is checked for before any model loads, one set of checks for ``grpo config validate``, ``grpo
train`` (``--dry-run`` too) and ``grpo signal`` (:func:`run_checks`, :func:`preflight`): the trackers and the
hub push, the run folder (``grpo train`` refuses one holding an earlier run unless given ``--resume`` or
``--overwrite``), every row of a local data file, whether the model and hub datasets can be fetched at all
(a cache look-up and a TCP probe, in seconds instead of after the hub's retries), and the one-line
:func:`summary` of a run config.

Bad input raises the layer's error (``ConfigError``, ``DataError``, ``RunFolderError``); the ``grpo`` shell
prints one line per problem and exits 2.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from grpo_core.config import SOURCE_SCHEME, looks_local, loss_type_warnings
from grpo_core.data import is_builder, missing_reward_columns, train_eval_rows
from grpo_core.outputs import check_outputs, deprecations
from grpo_core.row_stream import StreamedRows
from grpo_core.run_folder.checkpoints import (
    RunFolderError,
    check_run_dir,
    checkpoints_dir,
    earlier_run,
    load_latest_checkpoint,
)
from grpo_core.run_folder.overlap import check_run_dir_apart
from grpo_rewards.errors import ConfigError, Problem
from grpo_rewards.tomlfile import load_toml


def summary(cfg: Any) -> str:
    g, o = cfg.generation, cfg.grpo
    mode = "QLoRA (4-bit NF4)" if cfg.quantization.load_in_4bit else "LoRA" if cfg.lora.enabled else "full fine-tune"
    rewards = ", ".join(f"{e.alias}={e.use} x{e.weight:g}" for e in cfg.rewards.entries)
    return (f"{cfg.path}: model {cfg.model.name_or_path} ({mode}, {cfg.model.dtype}); data {cfg.data.source} "
            f"[{cfg.data.split}]; {o.max_steps} steps x {o.prompts_per_step} prompts x {g.num_generations} "
            f"generations; loss {o.loss_type}, beta {o.beta:g}; rewards: {rewards}; run folder {cfg.logging.output_dir}")


def ending(result: Any, output_dir: str) -> str:
    """The last line of a run: ``done at step N: <run folder>``, or ``stopped at step N (interrupted): ...``."""
    steps = result.get("step", result.get("steps")) if isinstance(result, dict) else None
    at = f" at step {steps}" if steps is not None else ""
    if isinstance(result, dict) and result.get("interrupted"):
        return f"stopped{at} (interrupted): {output_dir}"
    return f"done{at}: {output_dir}"


STREAM_CHECKED = 1000  # rows of a streamed source read by the checks before a run


def _is_local(source: str | None) -> bool:
    return bool(source) and not SOURCE_SCHEME.match(source) and (Path(source).expanduser().exists()
                                                                 or is_builder(source))  # "json" + data_files


def _hub_reachable(timeout: float = 3.0) -> bool:
    """Whether the Hugging Face hub answers a TCP connection within ``timeout`` seconds (DNS included)."""
    url = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    result: list[bool] = []

    def probe() -> None:
        try:
            with socket.create_connection((url.hostname or "huggingface.co", url.port or 443), timeout=timeout):
                result.append(True)
        except OSError:
            result.append(False)

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(timeout + 0.5)
    return bool(result and result[0])


def model_source_problem(cfg: Any) -> str | None:
    """Why the model cannot be fetched, found in a second instead of after the hub's retries: not a local
    folder, not in the Hugging Face cache, and the hub offline (``HF_HUB_OFFLINE``) or unreachable."""
    m = cfg.model
    if not m.name_or_path or Path(m.name_or_path).expanduser().exists() or getattr(m, "gguf_file", None):
        return None
    if looks_local(m.name_or_path):
        return f"folder not found: {m.name_or_path} (a path, not a hub id)"
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    try:
        cached = try_to_load_from_cache(m.name_or_path, "config.json", revision=m.revision)
    except Exception:  # noqa: BLE001 (a name the cache cannot even look up: let the loader say why)
        return None
    if isinstance(cached, str):
        return None
    switched_off = any(os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on")
                       for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))
    if switched_off:
        return (f"{m.name_or_path!r} is not a local folder and not in the Hugging Face cache, and the hub is "
                "switched off (HF_HUB_OFFLINE)")
    if not _hub_reachable():
        return (f"{m.name_or_path!r} is not a local folder and not in the Hugging Face cache, and the hub "
                "cannot be reached (offline?)")
    return None


def preflight(cfg: Any, *, resume: bool = False, overwrite: bool = False, all_sources: bool = False,
              run_folder: bool = True, model: bool = False, outputs: bool = True, data: bool = True
              ) -> list[dict[str, Any]] | None:
    """What a run would fail on, checked before any model loads: the trackers and the hub push (``outputs``:
    grpo_core.outputs), the run folder (``run_folder``), then every
    row of the training (and held-out) data when it is a local file (any source with ``all_sources``).
    With ``model``, also whether the model can be fetched at all (:func:`model_source_problem`).
    Raises the layer's error; returns the training rows when they were loaded."""

    if outputs:
        for line in deprecations(cfg) + loss_type_warnings(cfg):
            print(f"warning: {line}", file=sys.stderr)
        check_outputs(cfg)
    if run_folder:
        check_run_dir_apart(cfg, RunFolderError)  # the model, an adapter, a data file or the run file: never written
        check_run_dir(cfg.logging.output_dir, resume=resume, overwrite=overwrite, file=cfg.path)
        if resume and cfg.trainer.backend == "grpo_core" and load_latest_checkpoint(cfg.logging.output_dir) is None:
            raise RunFolderError(f"no checkpoint in {checkpoints_dir(cfg.logging.output_dir)}", file="--resume")
    d, rows = cfg.data, None
    if data and (all_sources or (_is_local(d.source) and (not d.eval_source or _is_local(d.eval_source)))):
        rows, _ = train_eval_rows(d)
        if isinstance(rows, StreamedRows):  # a stream is not read through: its first rows are checked
            rows = list(rows.head(STREAM_CHECKED))
        for warning in missing_reward_columns(cfg, rows):
            print(f"warning: {warning}", file=sys.stderr)
    if model and (why := model_source_problem(cfg)):
        raise ConfigError(why, file=cfg.path, key="model.name_or_path")
    return rows


def key_line(cfg: Any, *key: str) -> int | None:
    """The line of ``key`` in the run file (None for a dict config or a key it does not hold)."""
    try:
        return load_toml(cfg.path).line_of(*key)
    except Exception:  # noqa: BLE001 (no file to point into: the message names the key alone)
        return None


def hub_dataset_problem(cfg: Any) -> list[tuple[str, str]]:
    """``(key, why)`` for each hub dataset of ``[data]`` that cannot be fetched, found in seconds (the cache, then
    a TCP probe of the hub) instead of after ``datasets``' retries."""
    out = []
    for key in ("source", "eval_source"):
        source = getattr(cfg.data, key, None)
        if not source or SOURCE_SCHEME.match(source) or _is_local(source):
            continue
        try:
            from huggingface_hub import scan_cache_dir  # optional: no cache look-up without it

            cached = any(r.repo_id == source and r.repo_type == "dataset" for r in scan_cache_dir().repos)
        except Exception:  # noqa: BLE001 (no cache yet)
            cached = False
        if cached:
            continue
        if any(os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on")
               for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")):
            out.append((key, f"hub dataset {source!r} is not in the cache and the hub is switched off (HF_HUB_OFFLINE)"))
        elif not _hub_reachable():
            out.append((key, f"hub dataset {source!r} is not in the cache and the hub cannot be reached (offline?)"))
    return out


def run_checks(cfg: Any, *, resume: bool = False, overwrite: bool = False, processes: int = 1,
               all_sources: bool = False, validate: bool = False, run_folder: bool = True) -> list[dict[str, Any]] | None:
    """Every check made before any model loads, the same for ``grpo config validate`` (``validate``) and
    ``grpo train`` (``--dry-run`` too): the engine and process count, the run folder (validate: an earlier run
    is a warning, as it cannot know --resume or --overwrite), the model (found, a model folder, fetchable), hub
    datasets reachable, and the data rows when local (any source with ``all_sources``). Returns the training rows
    when they were loaded. Raises the layer's one-line errors."""
    from grpo_core.parallel.deepspeed import check_trainable  # torch: loaded when a command checks
    from grpo_core.parallel.distributed import check_world  # torch: loaded when a command checks


    check_trainable(cfg)
    check_world(cfg, processes)
    if run_folder and not validate:
        preflight(cfg, resume=resume, overwrite=overwrite, run_folder=True, all_sources=False, data=False)
    if validate and run_folder:
        check_run_dir_apart(cfg, RunFolderError)
        check_run_dir(cfg.logging.output_dir, overwrite=True, file=cfg.path)  # a file in the way, no access
        if what := earlier_run(cfg.logging.output_dir):
            print(f"warning: {cfg.path}: logging.output_dir: {cfg.logging.output_dir} holds an earlier run ({what}); "
                  "`grpo train` will need --resume or --overwrite", file=sys.stderr)
    outputs_checked = run_folder and not validate  # the trackers and the hub push: checked (and warned about) once
    rows = None if all_sources else preflight(cfg, run_folder=False, outputs=not outputs_checked)  # local rows first
    # the hub's reachability (a hub model's, a hub dataset's): the one check left to `grpo train` and --dry-run
    # (validate reads configs offline too; a model *path* is checked by both, in grpo_core.config)
    if not validate and (why := model_source_problem(cfg)):
        raise ConfigError(why, file=cfg.path, key="model.name_or_path")
    if not validate and (problems := hub_dataset_problem(cfg)):
        raise ConfigError([Problem(cfg.path, key_line(cfg, "data", key), f"data.{key}", why) for key, why in problems])
    if all_sources:
        return preflight(cfg, all_sources=True, run_folder=False, outputs=not outputs_checked)
    return rows
