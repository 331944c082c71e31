"""What a sandboxed program may import: the standard library and an explicit allow-list of packages.

A program can read every folder it can import from. Handing it the trainer's
site-packages would hand it every installed package, and with them any expected
outputs a dataset or benchmark package ships. So programs get the interpreter's
standard library and, beyond it, only the packages named in the allow-list (empty by
default): :func:`resolve` finds each one where this process would import it from (its
folder or module file, the ``<name>.libs`` folder of vendored libraries a wheel may
carry beside it, and its distribution's ``.dist-info`` folder, which some packages read
at import to learn their own version), and the pool lays them out in one folder of links that is the only
entry past the standard library on the programs' ``sys.path`` (inside a mount namespace
the zygote bind-mounts them there instead, read-only). :func:`site_folders` names the
site-packages folders of this interpreter, which the zygote hides where it has a mount
namespace (a site-packages folder inside the standard library's own tree, as a pyenv or
a system Python has, would otherwise stay readable).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import re
import site
import sys
import sysconfig
from collections.abc import Sequence

SITE_NAMES = ("site-packages", "dist-packages")


class PackageError(ValueError):
    """A name of the allow-list that is not a top-level package this interpreter can import."""


def resolve(names: Sequence[str]) -> dict[str, str]:
    """Entry name -> real path, for every allowed package (a folder or a module file) and its ``.libs`` folder."""
    out: dict[str, str] = {}
    for name in names:
        if not name or not name.isidentifier():
            raise PackageError(f"sandbox packages: {name!r} is not a top-level import name")
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError) as exc:
            raise PackageError(f"sandbox packages: {name!r} cannot be found ({exc})") from None
        if spec is None:
            raise PackageError(f"sandbox packages: no package {name!r} is installed for {sys.executable}")
        if spec.origin in (None, "built-in", "frozen") and not spec.submodule_search_locations:
            continue  # part of the interpreter itself
        paths = list(spec.submodule_search_locations or []) or [str(spec.origin)]
        for path in paths:
            real = os.path.realpath(path)
            if _in_stdlib(real):
                continue
            out[os.path.basename(real)] = real
            libs = os.path.join(os.path.dirname(real), f"{name}.libs")
            if os.path.isdir(libs):
                out[os.path.basename(libs)] = os.path.realpath(libs)
            for info in _dist_infos(name, os.path.dirname(real)):
                out[info] = os.path.realpath(os.path.join(os.path.dirname(real), info))
    return out


def _dist_infos(name: str, folder: str) -> list[str]:
    """The ``.dist-info`` folders in ``folder`` of the distributions that provide import name ``name``."""
    try:
        wanted = {_normal(d) for d in importlib.metadata.packages_distributions().get(name, [])}
        entries = os.listdir(folder)
    except Exception:  # metadata this interpreter cannot read: the package still imports
        return []
    return [e for e in entries if e.endswith(".dist-info") and _normal(e[:-10].rsplit("-", 1)[0]) in wanted]


def _normal(dist: str) -> str:
    return re.sub(r"[-_.]+", "_", dist).lower()


def link_folder(folder: str, entries: dict[str, str]) -> None:
    """Make ``folder`` hold a link per entry (the programs' ``sys.path`` entry outside a mount namespace)."""
    os.makedirs(folder, mode=0o755, exist_ok=True)
    os.chmod(folder, 0o755)
    for name, target in entries.items():
        os.symlink(target, os.path.join(folder, name))


def site_folders() -> list[str]:
    """Every site-packages folder of this interpreter and its base (and those on ``sys.path``) that exists."""
    found: list[str] = []
    candidates = [*site.getsitepackages([sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix])]
    candidates += [sysconfig.get_paths().get(key, "") for key in ("purelib", "platlib")]
    if site.ENABLE_USER_SITE is not False:
        candidates.append(site.getusersitepackages())
    candidates += [p for p in sys.path if p.rstrip("/").endswith(SITE_NAMES)]
    for stdlib in _stdlib_folders():
        candidates += [os.path.join(stdlib, name) for name in SITE_NAMES]
    for path in candidates:
        real = os.path.realpath(path) if path else ""
        if real and os.path.isdir(real) and real not in found:
            found.append(real)
    return found


def _stdlib_folders() -> list[str]:
    paths = sysconfig.get_paths(vars={"base": sys.base_prefix, "platbase": sys.base_exec_prefix})  # not a venv's
    return [os.path.realpath(p) for p in dict.fromkeys((paths.get("stdlib"), paths.get("platstdlib"))) if p]


def _in_stdlib(path: str) -> bool:
    """Whether ``path`` is the standard library's own (not a site-packages folder inside its tree)."""
    for stdlib in _stdlib_folders():
        if path == stdlib or path.startswith(stdlib + os.sep):
            rel = path[len(stdlib):].lstrip(os.sep)
            return rel.split(os.sep, 1)[0] not in SITE_NAMES
    return False
