"""Training checkpoints: atomic (write to a temp folder, then rename), keep the last K, exact resume.

Layout of ``RUN_DIR/checkpoints/step-00000010/``::

    weights.safetensors   the trainable parameters (LoRA weights, or the whole model), bit-exact
    adapter/              LoRA only: the adapter in the peft layout (``PeftModel.from_pretrained``)
    optimizer.pt          optimizer.state_dict()
    scheduler.pt          scheduler.state_dict() (when there is a scheduler)
    rng.pt                python, numpy, torch CPU (and CUDA) generator states
    rng-rank<r>.pt        several processes: rank r's generator states (rank 0's are rng.pt)
    state.pt              the trainer's own ``state`` dict (data position, ...), plus ``step``
    meta.json             step and time, for people

A folder named ``step-*`` is complete by construction (the rename is the last thing done), so a run
killed at any moment resumes from the newest one. Everything loads with ``torch.load(weights_only=True)``.

A full disk (or a file-size limit) while writing a checkpoint, the final model, ``merged/`` or the records is
a :class:`DiskFullError`, one line naming what could not be written and the last good checkpoint, which stays
resumable: a checkpoint or model folder is written beside its place and renamed in only when complete
(:func:`atomic_folder`), and a half-written one is removed. :func:`describe_restored` is the line a resumed run
prints.

The run folder itself: :func:`check_run_dir` refuses, before anything loads, a folder that is a file, one
that cannot be written, and one holding an earlier run unless the user asked to continue it (``--resume``)
or replace it (``--overwrite``, which :func:`clear_run_dir` carries out). Problems are a
:class:`RunFolderError`.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_core.atomic_folders import (
    FULL_ERRNOS,
    atomic_folder,
    exception_chain,
)
from grpo_core.run_folder.layout import CHECKPOINTS, RECORDS, REPLACED, REPLACED_DIRS
from grpo_core.run_folder.lock import check_free
from grpo_core.run_folder.overlap import resolved
from grpo_rewards.errors import UserError

_NAME = re.compile(r"^step-(\d+)$")


class RunFolderError(UserError):
    """A run folder that cannot be used as asked: a file in the way, no access, an earlier run."""


class CheckpointError(RunFolderError, ValueError):
    """A checkpoint that does not fit the model being resumed (a changed config, another run's folder)."""


class DiskFullError(RunFolderError):
    """No space left (or a file-size limit reached) while writing the run folder; says what stays resumable."""




def disk_full_error(run_dir: str | Path, exc: BaseException) -> DiskFullError:
    """The one line a full disk gets: what failed, and the newest complete checkpoint to resume from."""
    inner = next((e for e in exception_chain(exc) if isinstance(e, OSError) and e.errno in FULL_ERRNOS), exc)
    if isinstance(inner, OSError) and inner.strerror:
        what = inner.strerror + (f" writing {inner.filename}" if inner.filename else "")
    else:
        what = str(inner).strip().splitlines()[-1] if str(inner).strip() else type(inner).__name__
    latest = load_latest_checkpoint(run_dir)
    resume = (f"the last good checkpoint, {latest.path} (step {latest.step}), is intact: free space and continue "
              "with --resume" if latest is not None else "no checkpoint had been written yet: free space and start again")
    return DiskFullError(f"disk full ({what}); {resume}", file=str(run_dir))


def write_error(run_dir: str | Path, exc: BaseException) -> RunFolderError | None:
    """The one line for a write into ``run_dir`` that failed for another reason than a full disk (a folder made
    read-only, removed or replaced by a file while the run went on), naming the last good checkpoint; None when
    ``exc`` is not such a write."""
    root = Path(run_dir).expanduser().absolute()
    for inner in exception_chain(exc):
        if not isinstance(inner, OSError) or not inner.filename:
            continue
        where = Path(str(inner.filename)).expanduser().absolute()
        if where != root and root not in where.parents:
            continue
        latest = load_latest_checkpoint(run_dir)
        resume = (f"the last good checkpoint, {latest.path} (step {latest.step}), is intact: make the folder "
                  "writable and continue with --resume" if latest is not None else "no checkpoint had been written")
        return RunFolderError(f"cannot write {inner.filename} ({inner.strerror or type(inner).__name__}); {resume}",
                              file=str(run_dir))
    return None


def describe_restored(checkpoint: Checkpoint, state: dict[str, Any]) -> str:
    """The line a resumed run prints: which checkpoint, which step, where in the data."""
    return (f"resumed from {checkpoint.path} at step {int(state['step'])} (epoch {int(state.get('epoch', 0))}, "
            f"row {int(state.get('position', 0))} of its order)")


@dataclass(frozen=True)
class Checkpoint:
    path: Path
    step: int


def checkpoints_dir(run_dir: str | Path) -> Path:
    return Path(run_dir) / CHECKPOINTS


def list_checkpoints(run_dir: str | Path) -> list[Checkpoint]:
    """Complete checkpoints of a run, oldest first."""
    root = checkpoints_dir(run_dir)
    if not root.is_dir():
        return []
    found = [Checkpoint(p, int(m.group(1))) for p in root.iterdir() if p.is_dir() and (m := _NAME.match(p.name))]
    return sorted(found, key=lambda c: c.step)


def load_latest_checkpoint(run_dir: str | Path) -> Checkpoint | None:
    """The newest complete checkpoint of ``run_dir``, or None."""
    found = list_checkpoints(run_dir)
    return found[-1] if found else None


def earlier_run(run_dir: str | Path) -> str | None:
    """What an earlier run left in ``run_dir`` (its newest checkpoint, its non-empty records), or None."""
    run_dir = Path(run_dir)
    found = []
    if (latest := load_latest_checkpoint(run_dir)) is not None:
        found.append(f"checkpoint at step {latest.step}")
    found += [name for name in RECORDS if (run_dir / name).is_file() and (run_dir / name).stat().st_size > 0]
    return ", ".join(found) or None


def check_run_dir(run_dir: str | Path, *, resume: bool = False, overwrite: bool = False, file: str = "",
                  key: str = "logging.output_dir") -> None:
    """Refuse a run folder that cannot hold this run (see the module docs); nothing is created or changed."""
    run_dir = Path(run_dir).expanduser()
    if resume and overwrite:
        raise RunFolderError("--resume continues the earlier run and --overwrite replaces it: give one",
                             file="--resume --overwrite")
    resolved(run_dir, RunFolderError, file=file, key=key)  # a symbolic link loop, a name too long: one line
    if run_dir.exists() and not run_dir.is_dir():
        raise RunFolderError(f"{run_dir} is a file, not a folder", file=file, key=key)
    existing = run_dir
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise RunFolderError(f"{existing} is a file, so {run_dir} cannot be created", file=file, key=key)
    if not os.access(existing, os.W_OK | os.X_OK):
        raise RunFolderError(f"cannot write in {existing} (permission denied)", file=file, key=key)
    check_free(run_dir, error=RunFolderError, file=file, key=key)  # another run writing it (--overwrite too)
    if resume:  # whether there is a checkpoint to resume from is the trainer backend's to say
        return
    if not overwrite and (what := earlier_run(run_dir)):
        raise RunFolderError(f"{run_dir} holds an earlier run ({what}): continue it with --resume, replace it "
                             "with --overwrite, or set another logging.output_dir", file=file, key=key)


def clear_run_dir(run_dir: str | Path) -> None:
    """Remove an earlier run's checkpoints, records and tensorboard events (``--overwrite``); other files stay."""
    run_dir = Path(run_dir)
    for name in REPLACED_DIRS:
        shutil.rmtree(run_dir / name, ignore_errors=True)
    for name in REPLACED:
        (run_dir / name).unlink(missing_ok=True)


def rng_state() -> dict[str, Any]:
    """Every random generator the loop draws from, in a form ``torch.load(weights_only=True)`` accepts."""
    import numpy as np
    import torch

    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": (kind, torch.from_numpy(np.asarray(keys, dtype=np.int64)), int(pos), int(has_gauss), float(gauss)),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    import numpy as np
    import torch

    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _trainable(model: Any) -> dict[str, Any]:
    return {n: p for n, p in model.named_parameters() if p.requires_grad}


def save_checkpoint(
    run_dir: str | Path,
    step: int,
    *,
    model: Any,
    optimizer: Any,
    scheduler: Any = None,
    state: dict[str, Any] | None = None,
    keep_last: int = 2,
    rank_rng: list[dict[str, Any]] | None = None,
    model_state: dict[str, Any] | None = None,
    optimizer_state: dict[str, Any] | None = None,
) -> Path:
    """Write checkpoint ``step`` atomically and delete all but the newest ``keep_last``; returns its folder.
    ``rank_rng``: every rank's :func:`rng_state` when several processes train (rank 0's goes to ``rng.pt``).
    ``model_state``, ``optimizer_state``: full state dicts to write instead of the model's parameters and
    ``optimizer.state_dict()`` (a sharded model's, gathered: grpo_core.parallel.fsdp)."""
    import torch
    from safetensors.torch import save_file

    root = checkpoints_dir(run_dir)
    final = root / f"step-{step:08d}"
    with atomic_folder(final) as tmp:
        source = _trainable(model) if model_state is None else {n: model_state[n] for n in _trainable(model)}
        weights = {n: p.detach().to("cpu").contiguous() for n, p in source.items()}
        save_file(weights, tmp / "weights.safetensors")
        if hasattr(model, "peft_config") and hasattr(model, "save_pretrained"):
            model.save_pretrained(tmp / "adapter", **({} if model_state is None else {"state_dict": model_state}))
        torch.save(optimizer.state_dict() if optimizer_state is None else optimizer_state, tmp / "optimizer.pt")
        if scheduler is not None:
            torch.save(scheduler.state_dict(), tmp / "scheduler.pt")
        torch.save(rank_rng[0] if rank_rng else rng_state(), tmp / "rng.pt")
        for rank, rank_state in enumerate(rank_rng or []):
            if rank:
                torch.save(rank_state, tmp / f"rng-rank{rank}.pt")
        torch.save({**(state or {}), "step": step}, tmp / "state.pt")
        (tmp / "meta.json").write_text(json.dumps({"step": step, "time": time.time()}) + "\n")
    for old in list_checkpoints(run_dir)[:-keep_last] if keep_last > 0 else []:
        shutil.rmtree(old.path, ignore_errors=True)
    for stale in root.glob(".tmp-step-*"):  # left by a run killed mid-write
        shutil.rmtree(stale, ignore_errors=True)
    return final


def _load(path: Path, what: str, loader: Any) -> Any:
    """``loader(path)``, or a CheckpointError naming the checkpoint file that cannot be read (truncated, garbage)."""
    try:
        return loader(path)
    except Exception as exc:  # noqa: BLE001 (safetensors, pickle and zip raise many kinds for a damaged file)
        why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CheckpointError(f"{path}: the checkpoint's {what} cannot be read ({why[:200]}); the checkpoint is "
                              f"damaged: remove {path.parent.name} to resume from the one before it") from None


def check_fits(path: Path, weights: dict[str, Any], params: dict[str, Any], model: Any = None) -> None:
    """Refuse a checkpoint whose trainable parameters are not this model's: other names (another model, LoRA
    switched on or off), other shapes (a changed ``[lora] r``), or an adapter config that differs."""
    missing, unexpected = sorted(set(params) - set(weights)), sorted(set(weights) - set(params))
    if missing or unexpected:
        raise CheckpointError(f"{path}: checkpoint does not match the model's trainable parameters "
                              f"(missing {missing[:3]}, unexpected {unexpected[:3]}); was the [lora] config or "
                              "the model changed?")
    for name, param in params.items():
        saved = tuple(weights[name].shape)
        if saved != tuple(param.shape):
            raise CheckpointError(f"{path}: {name} has shape {list(saved)} in the checkpoint and "
                                  f"{list(param.shape)} in this run; was [lora] r or the model changed?")
    saved_config = path / "adapter" / "adapter_config.json"
    config = getattr(model, "peft_config", {}).get("default") if model is not None else None
    if config is None or not saved_config.is_file():
        return
    saved = _load(saved_config, "adapter config", lambda p: json.loads(p.read_text(encoding="utf-8")))
    differ = []
    for key in ("r", "lora_alpha", "target_modules", "base_model_name_or_path"):
        ours, theirs = getattr(config, key, None), saved.get(key) if isinstance(saved, dict) else None
        if isinstance(ours, (set, list, tuple)) or isinstance(theirs, list):
            ours, theirs = sorted(ours or []), sorted(theirs or [])
        if key == "base_model_name_or_path" and ours and theirs and Path(str(ours)).name == Path(str(theirs)).name:
            continue  # the same model, moved
        if ours != theirs:
            differ.append(f"{key} {theirs!r} in the checkpoint, {ours!r} in this run")
    if differ:
        raise CheckpointError(f"{path}: the checkpoint's adapter differs from this run's: {'; '.join(differ)}")


def restore(checkpoint: Checkpoint, model: Any, optimizer: Any = None, scheduler: Any = None, *,
            rank: int = 0, load_state: Any = None) -> dict[str, Any]:
    """Load weights, optimizer, scheduler and RNG states (``rank``'s) from ``checkpoint``; returns the saved
    ``state``. ``load_state(weights, optimizer_state)``, when given, loads the first two (a sharded model's:
    grpo_core.parallel.fsdp). Everything is read and checked against the model (:func:`check_fits`) before
    anything is loaded into it: a damaged or foreign checkpoint is one CheckpointError."""
    import torch
    from safetensors.torch import load_file

    path = checkpoint.path

    def tensors(file: Path) -> Any:
        return torch.load(file, weights_only=True, map_location="cpu")

    weights = _load(path / "weights.safetensors", "weights", load_file)
    params = _trainable(model)
    check_fits(path, weights, params, model)
    optimizer_state = _load(path / "optimizer.pt", "optimizer state", tensors) if optimizer is not None else None
    scheduler_state = (_load(path / "scheduler.pt", "scheduler state", tensors)
                       if scheduler is not None and (path / "scheduler.pt").exists() else None)
    rng_file = path / ("rng.pt" if rank == 0 else f"rng-rank{rank}.pt")
    if not rng_file.exists():
        raise CheckpointError(f"{path}: no random generator state for rank {rank}: the checkpoint was written by "
                              "fewer processes; resume it with the same number")
    rng = _load(rng_file, "random generator state", lambda p: torch.load(p, weights_only=True))
    state = _load(path / "state.pt", "trainer state", lambda p: torch.load(p, weights_only=True))
    if not isinstance(state, dict) or "step" not in state:
        raise CheckpointError(f"{path / 'state.pt'}: not a trainer state (no step); the checkpoint is damaged: "
                              f"remove {path.name} to resume from the one before it")
    if load_state is not None:
        load_state(weights, optimizer_state)
    else:
        with torch.no_grad():
            for name, param in params.items():
                param.copy_(weights[name].to(param.device, param.dtype))
        if optimizer is not None:
            try:
                optimizer.load_state_dict(optimizer_state)
            except (ValueError, KeyError, TypeError, RuntimeError) as exc:
                raise CheckpointError(f"{path / 'optimizer.pt'}: the optimizer state does not fit this run's "
                                      f"parameters ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"
                                      ) from None
    if scheduler_state is not None:
        scheduler.load_state_dict(scheduler_state)
    set_rng_state(rng)
    return state
