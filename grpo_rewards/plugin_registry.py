"""What the loaded plugins registered: :class:`Registry` (keyed by kind, then name) and :class:`PluginInfo`.

Filled by :func:`grpo_rewards.plugins.load_registry`. Two plugins registering one name make that name
ambiguous (using it raises an error naming both); every registration is also reachable qualified by
its plugin's distribution or entry-point name (``"grpo-toolkit:exact_match"``), which never is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import pluggy

from grpo_rewards.specs import RewardSpec, VerifierSpec
from grpo_rewards.suggest import did_you_mean

OWN_DISTRIBUTION = "grpo-toolkit"
DISABLE_ENV = "GRPO_DISABLE_PLUGINS"


class PluginError(RuntimeError):
    """A plugin could not be loaded, a hook of it failed in strict mode, or a name it registered is ambiguous."""


def normalize_name(name: str) -> str:
    """A distribution or plugin name as compared: lower case, runs of ``-_.`` as one ``-`` (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass
class PluginInfo:
    """One plugin as ``grpo plugins`` lists it."""

    name: str
    distribution: str
    version: str
    module: str
    error: str | None = None
    hooks: list[str] = field(default_factory=list)
    registers: dict[str, list[str]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    traceback: str | None = None  # of a failure to load (``grpo --debug`` prints it)

    @property
    def label(self) -> str:
        return f"{self.distribution} {self.version} (plugin {self.name!r})"

    @property
    def builtin(self) -> bool:
        return self.distribution == OWN_DISTRIBUTION


@dataclass
class Registry:
    """Everything the installed plugins registered, keyed by kind then name.

    ``rewards``, ``verifiers`` and ``sandbox_backends`` are this package's kinds; a kind of another
    package's registration hook (``grpo_core``'s ``trainer_backends``, ...) is in :attr:`tables` and
    read the same way, ``registry.trainer_backends`` or ``registry.get("trainer_backends", name)``.
    """

    plugins: list[PluginInfo] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    rewards: dict[str, RewardSpec] = field(default_factory=dict)
    verifiers: dict[str, VerifierSpec] = field(default_factory=dict)
    sandbox_backends: dict[str, Any] = field(default_factory=dict)
    conflicts: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    qualified: dict[tuple[str, str, str], Any] = field(default_factory=dict)  # (kind, plugin-or-dist, name)
    skipped: list[str] = field(default_factory=list)  # plugins left out by GRPO_LOAD/DISABLE_PLUGINS
    hook_failures: dict[tuple[str, str], int] = field(default_factory=dict)  # (plugin, hook) -> count
    manager: pluggy.PluginManager | None = None
    strict: bool = False
    tables: dict[str, dict[str, Any]] = field(default_factory=dict)  # kind -> name -> thing, other packages' kinds
    _owners: dict[tuple[str, str], PluginInfo] = field(default_factory=dict, repr=False)

    def __getattr__(self, kind: str) -> dict[str, Any]:
        tables = self.__dict__.get("tables")
        if tables is None or kind not in tables:
            raise AttributeError(f"{type(self).__name__!r} has no attribute {kind!r} (no registration hook "
                                 f"grpo_register_{kind} is specified)")
        return tables[kind]

    @property
    def hook(self) -> pluggy.HookRelay:
        """pluggy's hook relay (``registry.hook.grpo_on_step_end(...)``): the plugin manager wrapped each
        implementation as it registered, so one that raises is reported and skipped, and the others run."""
        assert self.manager is not None
        return self.manager.hook

    def get(self, kind: str, name: str) -> Any:
        """The thing of ``kind`` registered as ``name`` (or ``dist:name``); a clear error if missing or ambiguous."""
        what = kind[:-1].replace("_", " ")
        if ":" in name:
            prefix, bare = name.split(":", 1)
            value = self.qualified.get((kind, normalize_name(prefix), bare))
            if value is None:
                known = [f"{p}:{n}" for k, p, n in self.qualified if k == kind]
                raise PluginError(f"unknown {what} {name!r}{did_you_mean(name, known)}")
            return value
        if (kind, name) in self.conflicts:
            labels = self.conflicts[(kind, name)]
            owners = " and ".join(labels)
            qualified = " or ".join(f'"{label.split(" ", 1)[0]}:{name}"' for label in labels)
            raise PluginError(f"{what} {name!r} is registered by both {owners}; name one of them ({qualified}), "
                              f"or leave one out with {DISABLE_ENV}")
        table: dict[str, Any] | None = getattr(self, kind, None)
        if table is None:
            raise PluginError(f"no {what} {name!r}: no loaded plugin specifies grpo_register_{kind} (the trainer's "
                              "plugin, builtin_trainer, adds the trainer's hooks)")
        if name not in table:
            raise PluginError(f"unknown {what} {name!r}{did_you_mean(name, table)}")
        return table[name]

    def has_prefix(self, prefix: str) -> bool:
        """Whether ``prefix`` names a loaded plugin or its distribution (the ``dist:`` of a qualified name)."""
        key = normalize_name(prefix)
        return any(key in (normalize_name(p.name), normalize_name(p.distribution)) for p in self.plugins if not p.error)

    def reward(self, name: str) -> RewardSpec:
        return self.get("rewards", name)

    def verifier(self, name: str) -> VerifierSpec:
        return self.get("verifiers", name)

    def label(self, plugin_name: str) -> str:
        """How a message names the plugin registered as ``plugin_name``."""
        info = next((p for p in self.plugins if p.name == plugin_name), None)
        return info.label if info else repr(plugin_name)

    def add(self, info: PluginInfo, kind: str, name: str, value: Any) -> None:
        """Keep what ``info``'s plugin registered; a name a second plugin registers becomes a conflict."""
        table: dict[str, Any] = getattr(self, kind)
        for prefix in {normalize_name(info.name), normalize_name(info.distribution)}:
            self.qualified[(kind, prefix, name)] = value
        info.registers.setdefault(kind, []).append(name)
        key = (kind, name)
        if key in self.conflicts:
            self.conflicts[key].append(info.label)
            return
        owner = self._owners.get(key)
        if owner is not None and owner is not info:
            self.conflicts[key] = [owner.label, info.label]
            table.pop(name, None)
            return
        self._owners[key] = info
        table[name] = value
