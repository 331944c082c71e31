"""Outputs never overlap inputs: a run folder (or another output) that is, lies inside or holds the model
folder or the adapter, or that would write over or remove a data file or the run config, is refused before
anything loads; and a path the system cannot resolve (a symbolic link loop, a name too long) is one line.

    check_run_dir_apart(cfg)               # logging.output_dir against [model] and [data] and the run file
    check_apart(out, inputs, label=...)    # any output against (key, path) inputs (``grpo eval --out``)

Paths are compared with symbolic links resolved. A folder input (the model, an adapter, a data folder) may
share nothing with the output: the output is not it, not inside it, does not hold it. A file input (a data
file, the run config) may live inside a run folder, except at a name the folder's layout writes or removes
(:data:`grpo_core.run_folder.layout.WRITTEN`), which is what ``--overwrite`` deletes.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from grpo_core.run_folder.layout import WRITTEN
from grpo_rewards.errors import UserError

_ABSENT = (errno.ENOENT, errno.ENOTDIR)


def resolved(path: str | Path, error: type[UserError] = UserError, *, file: str = "", key: str = "") -> Path:
    """``path`` with ``~`` and symbolic links resolved; a loop or a name the system refuses is ``error``."""
    given = Path(path).expanduser()
    try:
        real = given.resolve()
        os.stat(real)
    except RuntimeError:  # Python 3.11's "Symlink loop from ..."
        raise error(f"{path} cannot be resolved: a symbolic link loop", file=file, key=key) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise error(f"{path} cannot be resolved: a symbolic link loop", file=file, key=key) from None
        if exc.errno not in _ABSENT:
            raise error(f"{path} cannot be used: {exc.strerror or exc}", file=file, key=key) from None
    existing = real
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    try:  # a folder yet to be made: its names must fit the file system, or making it fails later
        name_max, path_max = os.pathconf(existing, "PC_NAME_MAX"), os.pathconf(existing, "PC_PATH_MAX")
    except (OSError, ValueError):
        name_max, path_max = 255, 4096
    if any(len(part.encode()) > name_max for part in real.parts) or len(str(real).encode()) >= path_max:
        raise error(f"{path} cannot be used: {os.strerror(errno.ENAMETOOLONG)}", file=file, key=key)
    return real


def _inside(inner: Path, outer: Path) -> bool:
    return inner == outer or outer in inner.parents


def check_apart(out: str | Path, inputs: Iterable[tuple[str, str | Path, bool]], error: type[UserError] = UserError,
                *, label: str = "", file: str = "", folder: bool = True) -> None:
    """Refuse the output ``out`` (a run folder when ``folder``, else a file) that overlaps an input:
    ``inputs`` are ``(what, path, is_folder)``, ``what`` naming the input in the message (``model.name_or_path``)."""
    where = {"file": file, "key": label} if file else {"file": label}
    out_real = resolved(out, error, **where)
    for what, path, is_folder in inputs:
        real = resolved(path, error, **where)
        if not os.path.lexists(real):
            continue
        if _inside(out_real, real):
            relation = "is" if out_real == real else "is inside"
            raise error(f"{out} {relation} an input, {what} = {path}: nothing is written into what the run "
                        "reads; write elsewhere", **where)
        if folder and _inside(real, out_real):
            relative = real.relative_to(out_real)
            if is_folder or relative.parts[0] in WRITTEN:
                raise error(f"{out} holds an input, {what} = {path}, which the run would write over or "
                            "remove; write elsewhere or move the input out", **where)


def run_inputs(cfg: Any) -> list[tuple[str, str, bool]]:
    """The local files and folders a run config reads: ``(key, path, is_folder)``."""
    found: list[tuple[str, str, bool]] = []

    def add(key: str, value: Any) -> None:
        if not value or not isinstance(value, str):
            return
        try:
            path = Path(value).expanduser()
            exists = os.path.lexists(path)
        except (OSError, ValueError):
            return
        if exists:
            found.append((key, value, path.is_dir()))

    m, d = cfg.model, cfg.data
    add("model.name_or_path", m.name_or_path)
    add("model.adapter", getattr(m, "adapter", None))
    add("data.source", d.source)
    add("data.eval_source", d.eval_source)
    files = d.data_files
    for value in ([files] if isinstance(files, str) else list(files.values()) if isinstance(files, dict)
                  else list(files or [])):
        for one in value if isinstance(value, list) else [value]:
            add("data.data_files", one)
    if getattr(cfg, "path", "").endswith(".toml"):
        add("the run config", cfg.path)
    return found


def check_run_dir_apart(cfg: Any, error: type[UserError] = UserError) -> None:
    """Refuse a ``logging.output_dir`` that overlaps what the run reads (see the module docs)."""
    check_apart(cfg.logging.output_dir, run_inputs(cfg), error, label="logging.output_dir",
                file=getattr(cfg, "path", ""), folder=True)
