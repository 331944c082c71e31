"""The plugin manager: find plugins through entry points, isolate failures, collect registrations.

Loading
    Each entry point of the ``grpo`` group is loaded on its own. A plugin that fails to
    import, fails a check of :mod:`grpo_rewards.plugin_checks` or raises while registering
    is reported with its distribution and version and loses *all* its registrations and
    hooks; the others still load. ``strict=True`` (or ``GRPO_STRICT_PLUGINS=1``) turns any
    such problem into a :class:`PluginError`.

Choosing plugins
    ``GRPO_LOAD_PLUGINS`` (as ``LLM_LOAD_PLUGINS``): unset, every installed plugin loads;
    a comma-separated list of distribution or entry-point names, only those load (plus
    the built-ins of ``grpo-toolkit``); empty, only the built-ins. ``GRPO_DISABLE_PLUGINS``
    (pytest's ``-p no:NAME``): a comma-separated list of names never loaded, built-in
    entry points included. Names compare case-insensitively, ``-``/``_``/``.`` alike. A built-in
    left out still adds the hooks it specifies (``grpo_add_hookspecs``: the trainer's), so a plugin
    implementing them loads; none of its own hooks run and nothing it registers is kept.

Names
    See :mod:`grpo_rewards.plugin_registry`: a name two plugins register is ambiguous;
    ``"dist:name"`` never is.

Calling hooks
    :attr:`Registry.hook` is pluggy's own hook relay. pluggy stops a call at the first
    implementation that raises, so :class:`PluginManager` wraps every implementation as it
    registers: one that raises is logged (once per plugin and hook, with its file and line),
    counted in :attr:`Registry.hook_failures` and skipped, so a broken listener cannot stop a
    training loop or a ``grpo`` command; in strict mode it raises :class:`PluginError`. The
    built-ins' implementations are marked ``tryfirst`` (their commands win a name clash).
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import importlib.metadata
import logging
import os
import traceback
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pluggy

from grpo_rewards import hookspecs
from grpo_rewards.plugin_checks import (
    REGISTER_PREFIX,
    Refused,
    check_plugin,
    hook_names,
    impls_of,
    registration_hooks,
    stage_registrations,
    where,
)
from grpo_rewards.plugin_registry import (
    DISABLE_ENV,
    OWN_DISTRIBUTION,
    PluginError,
    PluginInfo,
    Registry,
    normalize_name,
)

__all__ = ["DISABLE_ENV", "ENTRY_POINT_GROUP", "LOAD_ENV", "OWN_DISTRIBUTION", "REGISTER_PREFIX", "PluginError",
           "PluginInfo", "PluginManager", "Registry", "building_from", "current_registry", "get_registry",
           "hook_names", "load_registry", "new_manager", "normalize_name", "registration_hooks"]

log = logging.getLogger("grpo.plugins")

ENTRY_POINT_GROUP = "grpo"
LOAD_ENV = "GRPO_LOAD_PLUGINS"

OnFailure = Callable[[str, str, Exception], None]  # (plugin name, hook name, what it raised)


class PluginManager(pluggy.PluginManager):
    """pluggy's manager with this package's hooks, wrapping each implementation as it registers so that
    one that raises goes to ``on_failure`` and the others still run; ``register(..., builtin=True)``
    marks a plugin's implementations ``tryfirst``."""

    def __init__(self, on_failure: OnFailure | None = None):
        super().__init__(hookspecs.PROJECT_NAME)
        self.on_failure = on_failure
        self._registering_builtin = False
        self.add_hookspecs(hookspecs)
        # a plugin implementing grpo_add_hookspecs adds its own when it registers (pytest's pytest_addhooks)
        self.hook.grpo_add_hookspecs.call_historic(kwargs={"pluginmanager": self})

    def parse_hookimpl_opts(self, plugin: object, name: str) -> Any:
        opts = super().parse_hookimpl_opts(plugin, name)
        if opts is not None and self._registering_builtin and not opts.get("trylast"):
            opts = {**opts, "tryfirst": True}
        return opts

    def register(self, plugin: object, name: str | None = None, *, builtin: bool = False) -> str | None:
        self._registering_builtin = builtin
        try:
            name = super().register(plugin, name)
        finally:
            self._registering_builtin = False
        if name is not None and self.on_failure is not None:
            for caller in self.get_hookcallers(plugin) or []:
                for impl in caller.get_hookimpls():
                    if impl.plugin is plugin and not (impl.hookwrapper or impl.wrapper):
                        impl.function = _isolated(impl.function, name, caller.name, self.on_failure)
        return name


def _isolated(fn: Callable[..., Any], plugin_name: str, hook: str, on_failure: OnFailure) -> Callable[..., Any]:
    @functools.wraps(fn)
    def call(*args: Any) -> Any:
        try:
            return fn(*args)
        except Exception as exc:
            on_failure(plugin_name, hook, exc)
            return None

    return call


def new_manager(on_failure: OnFailure | None = None) -> PluginManager:
    """A plugin manager with this package's hooks (see :class:`PluginManager`)."""
    return PluginManager(on_failure)


def _hook_failed(registry: Registry, plugin_name: str, hook: str, exc: Exception) -> None:
    key = (plugin_name, hook)
    registry.hook_failures[key] = registry.hook_failures.get(key, 0) + 1
    frames = traceback.extract_tb(exc.__traceback__)
    at = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
    problem = f"plugin {registry.label(plugin_name)}: {hook} raised {type(exc).__name__}: {exc}{at}; skipped"
    if registry.strict:
        raise PluginError(problem) from exc
    if registry.hook_failures[key] == 1:
        registry.problems.append(problem)
        log.warning("%s (later failures of this hook are counted, not logged)", problem)


def _entry_points() -> list[importlib.metadata.EntryPoint]:
    eps = importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)
    unique = {(ep.name, ep.value): ep for ep in sorted(eps, key=lambda e: e.name)}  # an editable install can
    return list(unique.values())  # list a distribution twice


def _dist_of(ep: importlib.metadata.EntryPoint) -> tuple[str, str]:
    dist = getattr(ep, "dist", None)
    if dist is None:
        return "unknown", "?"
    return dist.metadata["Name"] or "unknown", dist.version or "?"


def _names_from_env(var: str) -> set[str] | None:
    """The normalised names listed in ``var`` (None when it is unset)."""
    value = os.environ.get(var)
    if value is None:
        return None
    return {normalize_name(n.strip()) for n in value.split(",") if n.strip()}


def load_registry(
    *,
    strict: bool | None = None,
    entry_points: bool = True,
    extra_plugins: Iterable[tuple[str, object]] = (),
    only: Iterable[str] | None = None,
) -> Registry:
    """Load the plugins (see module docs) and collect what they register.

    ``extra_plugins`` are ``(name, module_or_object)`` pairs registered as if found
    through an entry point (tests and notebooks use it); ``GRPO_LOAD_PLUGINS`` and
    ``GRPO_DISABLE_PLUGINS`` do not apply to them. ``only`` (distribution or entry-point
    names) loads those plugins and nothing else, not even the built-ins, whatever the
    environment says: a registry holding only the plugin under test.
    """
    if strict is None:
        strict = os.environ.get("GRPO_STRICT_PLUGINS", "") not in ("", "0", "false")
    registry = Registry(strict=strict)
    pm = registry.manager = new_manager(functools.partial(_hook_failed, registry))

    def problem(message: str) -> None:
        registry.problems.append(message)
        log.warning(message)

    def fail(info: PluginInfo, message: str) -> None:
        info.error = message
        problem(f"plugin {info.label} failed: {message}")
        if strict:
            raise PluginError(registry.problems[-1])

    def warn(info: PluginInfo, message: str) -> None:
        info.warnings.append(message)
        problem(f"plugin {info.label}: {message}")

    candidates = _candidates(registry, only) if entry_points else []
    for name, obj in extra_plugins:
        module = getattr(obj, "__name__", type(obj).__name__)
        candidates.append((PluginInfo(name, "(in process)", "-", module), lambda obj=obj: obj))

    # every plugin registers first, so that hooks a plugin adds (grpo_add_hookspecs) are known to all
    registered: dict[str, tuple[PluginInfo, object]] = {}
    for info, load in candidates:
        registry.plugins.append(info)
        if info.name in registered:
            fail(info, f"a plugin named {info.name!r} is already registered by {registered[info.name][0].label}")
            continue
        try:
            plugin = load()
            pm.register(plugin, name=info.name, builtin=info.builtin)
        except Exception as exc:  # import errors, bad hookimpl signatures, a grpo_add_hookspecs that raised
            if pm.has_plugin(info.name):
                pm.unregister(name=info.name)
            info.traceback = "".join(traceback.format_exception(exc))
            fail(info, f"{type(exc).__name__}: {exc}{where(exc)}")
            continue
        registered[info.name] = (info, plugin)

    for kind in registration_hooks(pm).values():
        if not hasattr(registry, kind):
            registry.tables[kind] = {}
    for info, plugin in registered.values():
        try:
            check_plugin(pm, info, plugin, warn)
            staged = stage_registrations(pm, info)
        except (pluggy.PluginValidationError, Refused) as exc:
            pm.unregister(name=info.name)
            if exc.__cause__ is not None:  # a registration hook raised
                info.traceback = "".join(traceback.format_exception(exc.__cause__))
            fail(info, str(exc))
            continue
        info.hooks = sorted(impl.function.__name__ for impl in impls_of(pm, info.name))
        for kind, name, value in staged:
            registry.add(info, kind, name, value)

    for (kind, name), labels in registry.conflicts.items():
        problem(f"{kind[:-1].replace('_', ' ')} {name!r} is registered by both {' and '.join(labels)}")
        if strict:
            raise PluginError(registry.problems[-1])
    return registry


def _candidates(registry: Registry, exactly: Iterable[str] | None) -> list[tuple[PluginInfo, Callable[[], object]]]:
    """The entry points to load, the built-ins first, as ``(info, load)``; those left out are in
    ``registry.skipped`` (a built-in left out still adds its hook specifications)."""
    wanted = None if exactly is None else {normalize_name(n) for n in exactly}
    only, disabled = _names_from_env(LOAD_ENV), _names_from_env(DISABLE_ENV) or set()
    candidates: list[tuple[PluginInfo, Callable[[], object]]] = []
    seen_names: set[str] = set()
    for ep in _entry_points():
        dist, version = _dist_of(ep)
        info = PluginInfo(ep.name, dist, version, ep.value)
        names = {normalize_name(ep.name), normalize_name(dist)}
        seen_names |= names
        if wanted is not None:
            left_out = not names & wanted
        else:
            left_out = bool(names & disabled) or (only is not None and not info.builtin and not names & only)
        if not left_out:
            candidates.append((info, ep.load))
            continue
        registry.skipped.append(info.label)
        if info.builtin:
            _add_builtin_hookspecs(registry, info, ep)
    for name in sorted(((only if wanted is None else wanted) or set()) - seen_names):
        source = LOAD_ENV if wanted is None else "only="
        message = f"{source} names {name!r}, which is not an installed plugin or distribution"
        registry.problems.append(message)
        log.warning(message)
    for name in sorted(disabled - seen_names) if wanted is None else []:  # a typo would leave nothing out, silently
        message = f"{DISABLE_ENV} names {name!r}, which is not an installed plugin or distribution: nothing left out"
        registry.problems.append(message)
        log.warning(message)
    candidates.sort(key=lambda c: not c[0].builtin)  # stable: the built-ins first, then by entry-point name
    return candidates


def _add_builtin_hookspecs(registry: Registry, info: PluginInfo, ep: importlib.metadata.EntryPoint) -> None:
    """The hooks a built-in plugin left out (``only=``, ``GRPO_DISABLE_PLUGINS``) specifies are still known, so
    a plugin implementing the trainer's hooks loads in a registry without the trainer's registrations."""
    pm = registry.manager
    assert pm is not None
    try:
        module = ep.load()
        if pm.parse_hookimpl_opts(module, "grpo_add_hookspecs") is not None:
            module.grpo_add_hookspecs(pluginmanager=pm)
    except Exception as exc:
        message = f"plugin {info.label}: its hook specifications could not be added: {type(exc).__name__}: {exc}"
        registry.problems.append(message)
        log.warning(message)


_default: Registry | None = None
_building: contextvars.ContextVar[Registry | None] = contextvars.ContextVar("grpo_building_from", default=None)


def get_registry(*, reload: bool = False, strict: bool | None = None) -> Registry:
    """The process-wide registry of installed plugins (loaded once, on first use; ``strict`` as in
    :func:`load_registry`, applied when it loads)."""
    global _default
    if _default is None or reload:
        _default = load_registry(strict=strict)
    return _default


def current_registry() -> Registry:
    """The registry a reward is being built from (``reward(name, registry=...)``, a TOML composition given
    one), else the process-wide one: where a reward factory looks up what else it uses (a code reward, its
    sandbox backend), so a registry given per call reaches it."""
    return _building.get() or get_registry()


@contextlib.contextmanager
def building_from(registry: Registry) -> Iterator[Registry]:
    """Within the block, :func:`current_registry` is ``registry`` (in this thread or task)."""
    token = _building.set(registry)
    try:
        yield registry
    finally:
        _building.reset(token)
