"""``grpo new reward NAME``: a ready reward package (pyproject with the ``grpo`` entry point, a reward and a
verifier, tests using :mod:`grpo_rewards.testing`, a README, a CI workflow), rendered from the templates
shipped in ``grpo_rewards/templates/reward_package``. ``--group`` makes the reward a group reward
(:mod:`grpo_rewards.group_reward`): the files of ``templates/reward_package_group`` replace those of the same
path.

Templates are :class:`string.Template` texts (``$dist``, ``$module``, ``$name``, ``$title``; ``$$`` is a
dollar sign). In their paths, ``module`` becomes the package's module, ``github`` and ``gitignore`` get
their leading dot, ``NAME`` becomes the reward's name, and the ``.tmpl`` suffix is dropped. The target
folder must not exist: nothing is ever overwritten.

Registered through the ``grpo`` entry-point group like any plugin's commands.
"""

from __future__ import annotations

import argparse
import importlib.util
import keyword
import re
import string
from dataclasses import dataclass
from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from grpo_rewards.errors import ConfigError
from grpo_rewards.hookspecs import hookimpl

TEMPLATE = "reward_package"
GROUP_TEMPLATE = "reward_package_group"  # laid over TEMPLATE by --group
# PEP 508 distribution names: letters, digits, and . _ - inside
_DIST_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$")
_PATH_PARTS = {"github": ".github", "gitignore": ".gitignore"}


@dataclass(frozen=True)
class PackageNames:
    """The names one ``NAME`` gives a package."""

    dist: str  # the distribution (and folder) name, as given
    module: str  # the import name: lower case, runs of ``-_.`` as ``_``
    name: str  # the reward's and verifier's registered name (the module name)
    title: str  # for prose: "Demo reward"

    def mapping(self) -> dict[str, str]:
        return {"dist": self.dist, "module": self.module, "name": self.name, "title": self.title}


def package_names(name: str) -> PackageNames:
    """The names for ``name``, or a :class:`ConfigError` saying why it cannot name a package."""
    if not _DIST_NAME.match(name):
        raise ConfigError(f"{name!r} is not a valid distribution name: use letters, digits and - _ . (starting "
                          "and ending with a letter or digit)", key="NAME")
    module = re.sub(r"[-_.]+", "_", name).lower()
    if not module.isidentifier() or keyword.iskeyword(module):
        raise ConfigError(f"{name!r} gives the module name {module!r}, which Python cannot import: start with "
                          "a letter", key="NAME")
    if importlib.util.find_spec(module) is not None:
        raise ConfigError(f"{name!r} gives the module name {module!r}, which is already importable here (a "
                          "standard or installed module); pick another name", key="NAME")
    title = re.sub(r"[-_.]+", " ", name).strip().capitalize()
    return PackageNames(name, module, module, title)


def _templates(name: str = TEMPLATE) -> Traversable:
    return files("grpo_rewards").joinpath("templates", name)


def _walk(folder: Traversable, parts: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Traversable]]:
    found = []
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name == "__pycache__":
            continue
        if entry.is_dir():
            found += _walk(entry, parts + (entry.name,))
        elif entry.name.endswith(".tmpl"):
            found.append((parts + (entry.name,), entry))
    return found


def _target_parts(parts: tuple[str, ...], names: PackageNames) -> tuple[str, ...]:
    out = []
    for part in parts:
        part = part.removesuffix(".tmpl")
        part = names.module if part == "module" else _PATH_PARTS.get(part, part)
        out.append(part.replace("NAME", names.name))
    return tuple(out)


def render(names: PackageNames, *, group: bool = False) -> dict[str, str]:
    """Every file of the package: relative POSIX path -> text (``group``: the group reward's files laid over)."""
    rendered = {}
    for template in (TEMPLATE, GROUP_TEMPLATE) if group else (TEMPLATE,):
        for parts, entry in _walk(_templates(template)):
            text = string.Template(entry.read_text(encoding="utf-8")).substitute(names.mapping())
            rendered["/".join(_target_parts(parts, names))] = text
    if not rendered:
        raise RuntimeError(f"no templates found in {_templates()} (a broken install of grpo-toolkit)")
    return rendered


def new_reward_package(name: str, parent: str | Path = ".", *, group: bool = False) -> Path:
    """Write the package ``name`` into ``parent/name`` and return that folder; a :class:`ConfigError`
    when the name is not usable or the folder exists (nothing is written then)."""
    names = package_names(name)
    target = Path(parent) / name
    if target.exists() or target.is_symlink():
        raise ConfigError("already exists; pick another NAME or folder (nothing was written)", file=str(target))
    if not Path(parent).is_dir():
        raise ConfigError("is not a folder", file=str(parent))
    rendered = render(names, group=group)
    target.mkdir()  # refuses a folder made since the check above: never overwrite
    for rel, text in rendered.items():
        path = target / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "x", encoding="utf-8") as fh:
            fh.write(text)
    return target


def cmd_new_reward(args: argparse.Namespace) -> int:
    target = new_reward_package(args.name, args.dir, group=args.group)
    names = package_names(args.name)
    kind = "group reward" if args.group else "reward"
    print(f"created {target}/: {kind} and verifier {names.name!r} (module {names.module}), tests, README, CI workflow")
    print("next:")
    print(f"  pip install -e {target}      # grpo finds it through its `grpo` entry point")
    print(f"  pytest {target}              # the kit's conformance suites and its own tests")
    print(f"  grpo rewards check {names.name}")
    return 0


@hookimpl
def grpo_register_commands(subparsers: Any) -> None:
    new = subparsers.add_parser("new", help="create a new plugin package from a template")
    nsub = new.add_subparsers(dest="new_command", metavar="KIND", required=True)
    p = nsub.add_parser("reward", help="a reward package: a reward, a verifier, tests using the kit, README, CI",
                        description="Create NAME/ with a reward and a verifier registered through the `grpo` "
                                    "entry point, tests using grpo_rewards.testing, a README and a CI workflow.")
    p.add_argument("name", metavar="NAME", help="the distribution name, e.g. grpo-reward-units (the folder too)")
    p.add_argument("--dir", default=".", help="the folder to create NAME/ in (default: the current folder)")
    p.add_argument("--group", action="store_true",
                   help="a group reward: all completions of one prompt scored together (grpo_rewards.group_reward)")
    p.set_defaults(func=cmd_new_reward)
