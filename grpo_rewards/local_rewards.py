"""One-off rewards without a package: ``use = "path/to/file.py:name"`` or ``use = "package.module:name"``.

``name`` is either

* a reward itself, a function whose first parameter is ``completions``
  (``def my_reward(completions, **columns)``): it takes no parameters in the table; or
* a factory (a function or class whose keyword parameters are the reward's parameters,
  returning the batch callable), exactly like a registered :class:`~grpo_rewards.specs.RewardSpec`:
  the table's keys are checked against its signature, and the config's own keys
  (``use``, ``weight``, ``on_error``, ...) cannot be parameter names.

A relative file path is looked up next to the config file, then in the current folder.
The file is imported as a module named after it, with its folder appended to ``sys.path``
(as ``python file.py`` would), so a reward defined in it pickles and runs in a worker
process like any other; a different module already imported under that name is an error.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from pathlib import Path
from typing import Any

from grpo_rewards.plugins import PluginError
from grpo_rewards.specs import RESERVED_PARAMS, RewardSpec, params_of
from grpo_rewards.suggest import did_you_mean


def looks_local(use: str) -> bool:
    """``path.py:name`` or ``pkg.module:name`` (a qualified ``dist:name`` has no ``.`` or ``/`` before the colon)."""
    if ":" not in use:
        return False
    target = use.rsplit(":", 1)[0]
    return target.endswith(".py") or "/" in target or "\\" in target or "." in target


class GivenReward:
    """The factory of a reward function named directly: no parameters, returns the function (it pickles)."""

    def __init__(self, fn: Any):
        self.fn = fn

    def __call__(self) -> Any:
        return self.fn


def local_spec(use: str, base_dir: str = ".") -> RewardSpec:
    """The :class:`RewardSpec` of a local reward (see module docs); :class:`PluginError` says what is wrong."""
    target, _, name = use.rpartition(":")
    if not target or not name:
        raise PluginError(f"{use!r}: expected 'path/to/file.py:name' or 'package.module:name'")
    if target.endswith(".py") or "/" in target or "\\" in target:
        module, label = _import_file(target, base_dir), target
    else:
        try:
            module = importlib.import_module(target)
        except Exception as exc:  # noqa: BLE001 - any import failure is the config's problem
            raise PluginError(f"cannot import module {target!r}: {type(exc).__name__}: {exc}") from exc
        label = target
    obj = getattr(module, name, None)
    if obj is None:
        public = [n for n in vars(module) if not n.startswith("_")]
        raise PluginError(f"{label} has no {name!r}{did_you_mean(name, public)}")
    if not callable(obj):
        raise PluginError(f"{label}:{name} is a {type(obj).__name__}, not a reward function or factory")
    factory: Any = GivenReward(obj) if _is_reward(obj) else obj
    try:
        params = params_of(factory)
    except (TypeError, ValueError) as exc:
        raise PluginError(f"{label}:{name}: its parameters cannot be read: {exc}") from exc
    clash = sorted(set(params) & set(RESERVED_PARAMS))
    if clash:
        raise PluginError(f"{label}:{name} has parameter(s) {', '.join(clash)}, reserved for the config's own keys; "
                          "rename them")
    doc = inspect.getdoc(obj) or ""
    return RewardSpec(name=name, factory=factory, description=doc.splitlines()[0] if doc else "",
                      plugin=f"local {label}")


def _is_reward(obj: Any) -> bool:
    if not (inspect.isfunction(obj) or inspect.ismethod(obj)):
        return False
    first = next(iter(inspect.signature(obj).parameters), None)
    return first == "completions"


def _import_file(target: str, base_dir: str) -> Any:
    given = Path(target).expanduser()
    candidates = [given] if given.is_absolute() else [Path(base_dir) / given, given]
    path = next((p.resolve() for p in candidates if p.is_file()), None)
    if path is None:
        raise PluginError(f"{target}: no such file" + ("" if given.is_absolute() else f" (looked in {base_dir} and .)"))
    stem = path.stem
    if not stem.isidentifier():
        raise PluginError(f"{target}: the file name must be a Python module name (letters, digits, _)")
    loaded = sys.modules.get(stem)
    if loaded is not None and _file_of(loaded) != path:
        raise PluginError(f"{target}: a module named {stem!r} is already imported from {_file_of(loaded)}; "
                          "rename the file")
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.append(folder)
    try:
        module = importlib.import_module(stem)
    except SyntaxError as exc:
        raise PluginError(f"{exc.filename}:{exc.lineno}: {exc.msg}") from exc
    except Exception as exc:  # noqa: BLE001 - the file's own error, with where it happened
        raise PluginError(f"{target}: importing it raised {type(exc).__name__}: {exc}") from exc
    if _file_of(module) != path:
        raise PluginError(f"{target}: the name {stem!r} finds {_file_of(module)} first on sys.path; rename the file")
    return module


def _file_of(module: Any) -> Path | None:
    file = getattr(module, "__file__", None)
    return Path(file).resolve() if file else None
