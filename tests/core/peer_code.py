"""Functions taken from the peers' own releases (verl, Unsloth), pinned in ``pyproject.toml``
(``[tool.grpo-toolkit] peer-sources``) and installed by ``scripts/setup.sh`` with ``--no-deps`` into
``.venv/peers`` (``GRPO_PEER_SOURCES`` names another folder), for the tests that compare our losses with theirs.

Neither package imports here: ``verl/__init__`` imports ray, ``unsloth_zoo/__init__`` wants Unsloth and a GPU.
So :func:`load` reads the installed file, takes the named top-level functions out of it with ``ast`` (their
decorators, which only register them in the peer's own registries, dropped; annotations left unevaluated) and runs
those definitions, unchanged, in a namespace holding just the names their bodies use. Nothing of the peer's file is
copied into this repository. A missing or different release is an error naming the fix, never a skip.
"""

from __future__ import annotations
import __future__

import ast
import os
import sys
import tomllib
from importlib import metadata
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def pins() -> dict[str, str]:
    """``{distribution: version}`` from ``pyproject.toml``."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        specs = tomllib.load(f)["tool"]["grpo-toolkit"]["peer-sources"]
    return {name.replace("_", "-").lower(): version for name, version in (s.split("==") for s in specs)}


def folder() -> Path:
    """Where ``scripts/setup.sh`` installed the pinned releases."""
    return Path(os.environ.get("GRPO_PEER_SOURCES") or Path(sys.prefix) / "peers")


def source(distribution: str, relative_path: str) -> Path:
    """The installed file ``relative_path`` of ``distribution``, after checking its version is the pinned one."""
    want = pins()[distribution]
    where = folder()
    found = {d.metadata["Name"].replace("_", "-").lower(): d.version
             for d in metadata.distributions(path=[str(where)])}
    if found.get(distribution) != want:
        raise RuntimeError(
            f"{distribution}=={want} is not installed in {where} (found {found.get(distribution) or 'nothing'}): "
            f"run `bash scripts/setup.sh` (it installs pyproject.toml's [tool.grpo-toolkit] peer-sources there)")
    path = where / relative_path
    if not path.is_file():
        raise RuntimeError(f"{distribution}=={want} has no {relative_path} in {where}")
    return path


def load(distribution: str, relative_path: str, names: list[str], namespace: dict[str, Any]) -> SimpleNamespace:
    """The top-level functions ``names`` of the pinned release's file, defined in ``namespace`` (its globals)."""
    path = source(distribution, relative_path)
    tree = ast.parse(path.read_text(), filename=str(path))
    defs = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    missing = [name for name in names if name not in defs]
    if missing:
        raise RuntimeError(f"{path} defines no {', '.join(missing)}")
    for name in names:
        defs[name].decorator_list = []
    module = ast.Module(body=[defs[name] for name in names], type_ignores=[])
    code = compile(module, str(path), "exec", flags=__future__.annotations.compiler_flag, dont_inherit=True)
    globals_ = dict(namespace)
    exec(code, globals_)
    return SimpleNamespace(**{name: globals_[name] for name in names}, path=path)
