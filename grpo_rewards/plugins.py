"""The plugin manager: find plugins through entry points, isolate failures, collect registrations.

Each entry point of the ``grpo`` group is loaded on its own. A plugin that fails
to import, implements a misspelled hook, or raises while registering is reported
with its distribution and version, and the others still load; ``strict=True``
(or ``GRPO_STRICT_PLUGINS=1``) turns any such problem into a :class:`PluginError`.
Two plugins registering the same name make that name ambiguous: using it raises
an error naming both distributions.
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import pluggy

from grpo_rewards import hookspecs
from grpo_rewards.specs import RewardSpec, VerifierSpec
from grpo_rewards.suggest import did_you_mean

log = logging.getLogger("grpo.plugins")

ENTRY_POINT_GROUP = "grpo"

# hook name -> kind of thing it registers (also the Registry attribute holding them)
REGISTRATION_HOOKS: dict[str, str] = {
    "grpo_register_rewards": "rewards",
    "grpo_register_verifiers": "verifiers",
    "grpo_register_generation_backends": "generation_backends",
    "grpo_register_trainer_backends": "trainer_backends",
    "grpo_register_dataset_sources": "dataset_sources",
    "grpo_register_sandbox_backends": "sandbox_backends",
}


class PluginError(RuntimeError):
    """A plugin could not be loaded, or a name it registered is ambiguous."""


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

    @property
    def label(self) -> str:
        return f"{self.distribution} {self.version} (plugin {self.name!r})"


@dataclass
class Registry:
    """Everything the installed plugins registered, keyed by kind then name."""

    plugins: list[PluginInfo] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    rewards: dict[str, RewardSpec] = field(default_factory=dict)
    verifiers: dict[str, VerifierSpec] = field(default_factory=dict)
    generation_backends: dict[str, Any] = field(default_factory=dict)
    trainer_backends: dict[str, Any] = field(default_factory=dict)
    dataset_sources: dict[str, Any] = field(default_factory=dict)
    sandbox_backends: dict[str, Any] = field(default_factory=dict)
    conflicts: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    manager: pluggy.PluginManager | None = None

    def get(self, kind: str, name: str) -> Any:
        """The thing of ``kind`` registered as ``name``; a clear error if missing or ambiguous."""
        if (kind, name) in self.conflicts:
            owners = " and ".join(self.conflicts[(kind, name)])
            raise PluginError(f"{kind[:-1].replace('_', ' ')} {name!r} is registered by both {owners}; uninstall one")
        table: dict[str, Any] = getattr(self, kind)
        if name not in table:
            raise PluginError(f"unknown {kind[:-1].replace('_', ' ')} {name!r}{did_you_mean(name, table)}")
        return table[name]

    def reward(self, name: str) -> RewardSpec:
        return self.get("rewards", name)

    def verifier(self, name: str) -> VerifierSpec:
        return self.get("verifiers", name)

    @property
    def hook(self) -> Any:
        """The pluggy hook relay, for calling lifecycle hooks (``registry.hook.grpo_on_step_end(...)``)."""
        assert self.manager is not None
        return self.manager.hook


def new_manager() -> pluggy.PluginManager:
    pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    pm.add_hookspecs(hookspecs)
    return pm


def _entry_points() -> list[importlib.metadata.EntryPoint]:
    eps = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
    seen: set[tuple[str, str]] = set()
    unique = []
    for ep in sorted(eps, key=lambda e: e.name):  # an editable install can list a distribution twice
        key = (ep.name, ep.value)
        if key not in seen:
            seen.add(key)
            unique.append(ep)
    return unique


def _dist_of(ep: importlib.metadata.EntryPoint) -> tuple[str, str]:
    dist = getattr(ep, "dist", None)
    if dist is None:
        return "unknown", "?"
    return dist.metadata["Name"] or "unknown", dist.version or "?"


def load_registry(
    *,
    strict: bool | None = None,
    entry_points: bool = True,
    extra_plugins: Iterable[tuple[str, object]] = (),
) -> Registry:
    """Load every plugin and collect what it registers.

    ``extra_plugins`` are ``(name, module_or_object)`` pairs registered as if
    found through an entry point (tests and notebooks use it).
    """
    if strict is None:
        strict = os.environ.get("GRPO_STRICT_PLUGINS", "") not in ("", "0", "false")
    pm = new_manager()
    registry = Registry(manager=pm)
    infos: dict[str, PluginInfo] = {}

    def fail(info: PluginInfo, message: str) -> None:
        info.error = message
        problem = f"plugin {info.label} failed: {message}"
        registry.problems.append(problem)
        log.warning(problem)
        if strict:
            raise PluginError(problem)

    candidates: list[tuple[PluginInfo, Callable[[], object]]] = []
    if entry_points:
        for ep in _entry_points():
            dist, version = _dist_of(ep)
            candidates.append((PluginInfo(ep.name, dist, version, ep.value), ep.load))
    for name, obj in extra_plugins:
        module = getattr(obj, "__name__", type(obj).__name__)
        candidates.append((PluginInfo(name, "(in process)", "-", module), lambda obj=obj: obj))

    for info, load in candidates:
        registry.plugins.append(info)
        if info.name in infos:
            fail(info, f"a plugin named {info.name!r} is already registered by {infos[info.name].label}")
            continue
        try:
            plugin = load()
            pm.register(plugin, name=info.name)
        except Exception as exc:  # import errors, bad hookimpl signatures
            fail(info, f"{type(exc).__name__}: {exc}")
            continue
        try:
            pm.check_pending()  # a hookimpl whose name matches no hookspec: a misspelling
        except pluggy.PluginValidationError as exc:
            pm.unregister(name=info.name)
            fail(info, f"unknown hook (misspelled?): {exc}")
            continue
        infos[info.name] = info
        info.hooks = sorted(impl.function.__name__ for impl in _impls_of(pm, info.name))

    owners: dict[tuple[str, str], PluginInfo] = {}
    for hook_name, kind in REGISTRATION_HOOKS.items():
        for impl in getattr(pm.hook, hook_name).get_hookimpls():
            info = infos[impl.plugin_name]
            register = _make_register(kind, info, registry, owners)
            try:
                impl.function(register=register)
            except Exception as exc:
                fail(info, f"{hook_name} raised {type(exc).__name__}: {exc}")

    for (kind, name), labels in registry.conflicts.items():
        problem = f"{kind[:-1].replace('_', ' ')} {name!r} is registered by both {' and '.join(labels)}"
        registry.problems.append(problem)
        log.warning(problem)
        if strict:
            raise PluginError(problem)
    return registry


def _impls_of(pm: pluggy.PluginManager, plugin_name: str) -> list[Any]:
    plugin = pm.get_plugin(plugin_name)
    return [impl for caller in pm.get_hookcallers(plugin) or [] for impl in caller.get_hookimpls() if impl.plugin is plugin]


def _make_register(
    kind: str, info: PluginInfo, registry: Registry, owners: dict[tuple[str, str], PluginInfo]
) -> Callable[..., None]:
    table: dict[str, Any] = getattr(registry, kind)

    def register(item: Any, factory: Any = None) -> None:
        if isinstance(item, (RewardSpec, VerifierSpec)):
            name = item.name
            value: Any = _with_plugin(item, info.name)
        else:  # backends and sources: register(name, factory)
            name, value = item, factory
        if not isinstance(name, str) or not name:
            raise TypeError(f"register() needs a non-empty name, got {name!r}")
        key = (kind, name)
        if key in owners and owners[key] is not info:
            registry.conflicts.setdefault(key, [owners[key].label]).append(info.label)
            table.pop(name, None)
            return
        if key in registry.conflicts:
            registry.conflicts[key].append(info.label)
            return
        owners[key] = info
        table[name] = value
        info.registers.setdefault(kind, []).append(name)

    return register


def _with_plugin(spec: Any, plugin_name: str) -> Any:
    return replace(spec, plugin=plugin_name)


_default: Registry | None = None


def get_registry(*, reload: bool = False, strict: bool | None = None) -> Registry:
    """The process-wide registry of installed plugins (loaded once, on first use; ``strict`` as in
    :func:`load_registry`, applied when it loads)."""
    global _default
    if _default is None or reload:
        _default = load_registry(strict=strict)
    return _default
