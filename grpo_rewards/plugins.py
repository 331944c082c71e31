"""The plugin manager: find plugins through entry points, isolate failures, collect registrations.

Loading
    Each entry point of the ``grpo`` group is loaded on its own. A plugin that fails to
    import, implements a misspelled hook or a hook wrapper, or raises while registering
    (or registers something malformed: a non-callable factory, a verifier given to the
    rewards hook, a parameter named like a config key) is reported with its distribution
    and version and loses *all* its registrations and hooks; the others still load. A
    module function named like a hook but not marked ``@hookimpl`` is ignored by pluggy,
    so it gets a warning. ``strict=True`` (or ``GRPO_STRICT_PLUGINS=1``) turns any such
    problem into a :class:`PluginError`.

Choosing plugins
    ``GRPO_LOAD_PLUGINS`` (as ``LLM_LOAD_PLUGINS``): unset, every installed plugin loads;
    a comma-separated list of distribution or entry-point names, only those load (plus
    the built-ins of ``grpo-toolkit``); empty, only the built-ins. ``GRPO_DISABLE_PLUGINS``
    (pytest's ``-p no:NAME``): a comma-separated list of names never loaded, built-in
    entry points included. Names compare case-insensitively, ``-``/``_``/``.`` alike. A built-in
    left out still adds the hooks it specifies (``grpo_add_hookspecs``: the trainer's), so a plugin
    implementing them loads; none of its own hooks run and nothing it registers is kept.

Names
    Two plugins registering the same name make that name ambiguous: using it raises an
    error naming both. Every registration is also reachable qualified by its
    distribution or entry-point name, ``"grpo-toolkit:exact_match"``, which is never
    ambiguous.

Calling hooks
    :attr:`Registry.hook` calls every implementation of a hook one at a time. One that
    raises is logged (once per plugin and hook, with its file and line), counted in
    :attr:`Registry.hook_failures` and skipped, so a broken listener cannot stop a
    training loop or a ``grpo`` command; in strict mode it raises :class:`PluginError`.
    The built-ins are called first (their commands win a name clash).
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib.metadata
import logging
import os
import re
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import pluggy

from grpo_rewards import hookspecs
from grpo_rewards.specs import RESERVED_PARAMS, VERIFIER_RESERVED_PARAMS, RewardSpec, VerifierSpec, params_of
from grpo_rewards.suggest import did_you_mean

log = logging.getLogger("grpo.plugins")

ENTRY_POINT_GROUP = "grpo"
OWN_DISTRIBUTION = "grpo-toolkit"
LOAD_ENV = "GRPO_LOAD_PLUGINS"
DISABLE_ENV = "GRPO_DISABLE_PLUGINS"

REGISTER_PREFIX = "grpo_register_"  # grpo_register_<kind>(register): a registration hook, kept in registry.<kind>


def hook_names(pm: pluggy.PluginManager) -> frozenset[str]:
    """The hooks ``pm`` has a specification for: this package's and those plugins added (``grpo_add_hookspecs``)."""
    return frozenset(name for name, caller in vars(pm.hook).items() if getattr(caller, "spec", None) is not None)


def registration_hooks(pm: pluggy.PluginManager) -> dict[str, str]:
    """Hook name -> the kind of thing it registers (``grpo_register_rewards`` -> ``rewards``): every specified
    ``grpo_register_<kind>(register)``, the rewards and verifiers first."""
    hooks = {name: name[len(REGISTER_PREFIX):] for name in sorted(hook_names(pm))
             if name.startswith(REGISTER_PREFIX) and tuple(getattr(pm.hook, name).spec.argnames) == ("register",)}
    first = [n for n in ("grpo_register_rewards", "grpo_register_verifiers") if n in hooks]
    return {name: hooks[name] for name in [*first, *(n for n in hooks if n not in first)]}


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

    def __getattr__(self, kind: str) -> dict[str, Any]:
        tables = self.__dict__.get("tables")
        if tables is None or kind not in tables:
            raise AttributeError(f"{type(self).__name__!r} has no attribute {kind!r} (no registration hook "
                                 f"grpo_register_{kind} is specified)")
        return tables[kind]

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

    @property
    def hook(self) -> HookRelay:
        """Calls hooks one implementation at a time, isolating failures (``registry.hook.grpo_on_step_end(...)``)."""
        assert self.manager is not None
        return HookRelay(self)

    def _label(self, plugin_name: str) -> str:
        info = next((p for p in self.plugins if p.name == plugin_name), None)
        return info.label if info else repr(plugin_name)


class HookRelay:
    """``relay.<hook>(**kwargs)``: every implementation called in turn; one that raises is reported and skipped."""

    def __init__(self, registry: Registry):
        self._registry = registry

    def __getattr__(self, name: str) -> Callable[..., list[Any]]:
        manager = self._registry.manager
        assert manager is not None
        caller = getattr(manager.hook, name)  # AttributeError for an unknown hook, as pluggy
        registry = self._registry
        builtins = {p.name for p in registry.plugins if p.builtin}

        def call(**kwargs: Any) -> list[Any]:
            impls = list(reversed(caller.get_hookimpls()))  # pluggy's own order (tryfirst .. trylast)
            impls.sort(key=lambda impl: impl.plugin_name not in builtins)  # then the built-ins first
            results = []
            for impl in impls:
                try:
                    result = impl.function(*(kwargs[arg] for arg in impl.argnames))
                except Exception as exc:
                    _hook_failed(registry, impl.plugin_name, name, exc)
                    continue
                if result is not None:
                    results.append(result)
            return results

        call.__name__ = name
        return call


def _hook_failed(registry: Registry, plugin_name: str, hook: str, exc: Exception) -> None:
    key = (plugin_name, hook)
    registry.hook_failures[key] = registry.hook_failures.get(key, 0) + 1
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
    problem = f"plugin {registry._label(plugin_name)}: {hook} raised {type(exc).__name__}: {exc}{where}; skipped"
    if registry.strict:
        raise PluginError(problem) from exc
    if registry.hook_failures[key] == 1:
        registry.problems.append(problem)
        log.warning("%s (later failures of this hook are counted, not logged)", problem)


def new_manager() -> pluggy.PluginManager:
    """A plugin manager with this package's hooks; a plugin implementing ``grpo_add_hookspecs`` adds its own
    when it registers (pytest's ``pytest_addhooks``)."""
    pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    pm.add_hookspecs(hookspecs)
    pm.hook.grpo_add_hookspecs.call_historic(kwargs={"pluginmanager": pm})
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
    pm = new_manager()
    registry = Registry(manager=pm, strict=strict)
    exactly = None if only is None else {normalize_name(n) for n in only}
    only, disabled = _names_from_env(LOAD_ENV), _names_from_env(DISABLE_ENV) or set()

    def fail(info: PluginInfo, message: str) -> None:
        info.error = message
        problem = f"plugin {info.label} failed: {message}"
        registry.problems.append(problem)
        log.warning(problem)
        if strict:
            raise PluginError(problem)

    def warn(info: PluginInfo, message: str) -> None:
        info.warnings.append(message)
        problem = f"plugin {info.label}: {message}"
        registry.problems.append(problem)
        log.warning(problem)

    candidates: list[tuple[PluginInfo, Callable[[], object]]] = []
    seen_names: set[str] = set()
    if entry_points:
        for ep in _entry_points():
            dist, version = _dist_of(ep)
            info = PluginInfo(ep.name, dist, version, ep.value)
            names = {normalize_name(ep.name), normalize_name(dist)}
            seen_names |= names
            if exactly is not None:
                left_out = not names & exactly
            else:
                left_out = bool(names & disabled) or (only is not None and not info.builtin and not names & only)
            if left_out:
                registry.skipped.append(info.label)
                if info.builtin:
                    _add_builtin_hookspecs(pm, info, ep, registry)
                continue
            candidates.append((info, ep.load))
        for name in sorted(((only if exactly is None else exactly) or set()) - seen_names):
            source = LOAD_ENV if exactly is None else "only="
            problem = f"{source} names {name!r}, which is not an installed plugin or distribution"
            registry.problems.append(problem)
            log.warning(problem)
    candidates.sort(key=lambda c: not c[0].builtin)  # stable: the built-ins first, then by entry-point name
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
            pm.register(plugin, name=info.name)
        except Exception as exc:  # import errors, bad hookimpl signatures, a grpo_add_hookspecs that raised
            if pm.has_plugin(info.name):
                pm.unregister(name=info.name)
            info.traceback = "".join(traceback.format_exception(exc))
            fail(info, f"{type(exc).__name__}: {exc}{_where(exc)}")
            continue
        registered[info.name] = (info, plugin)

    for kind in registration_hooks(pm).values():
        if not hasattr(registry, kind):
            registry.tables[kind] = {}
    infos: dict[str, PluginInfo] = {}
    owners: dict[tuple[str, str], PluginInfo] = {}
    for info, plugin in registered.values():
        try:
            _check_plugin(pm, info, plugin, warn)
            staged = _stage_registrations(pm, info)
        except (pluggy.PluginValidationError, _Refused) as exc:
            pm.unregister(name=info.name)
            if exc.__cause__ is not None:  # a registration hook raised
                info.traceback = "".join(traceback.format_exception(exc.__cause__))
            fail(info, str(exc))
            continue
        infos[info.name] = info
        info.hooks = sorted(impl.function.__name__ for impl in _impls_of(pm, info.name))
        for kind, name, value in staged:
            _add(registry, owners, info, kind, name, value)

    for (kind, name), labels in registry.conflicts.items():
        problem = f"{kind[:-1].replace('_', ' ')} {name!r} is registered by both {' and '.join(labels)}"
        registry.problems.append(problem)
        log.warning(problem)
        if strict:
            raise PluginError(problem)
    return registry


def _add_builtin_hookspecs(pm: pluggy.PluginManager, info: PluginInfo, ep: importlib.metadata.EntryPoint,
                           registry: Registry) -> None:
    """The hooks a built-in plugin left out (``only=``, ``GRPO_DISABLE_PLUGINS``) specifies are still known, so
    a plugin implementing the trainer's hooks loads in a registry without the trainer's registrations."""
    try:
        module = ep.load()
        if pm.parse_hookimpl_opts(module, "grpo_add_hookspecs") is not None:
            module.grpo_add_hookspecs(pluginmanager=pm)
    except Exception as exc:
        problem = f"plugin {info.label}: its hook specifications could not be added: {type(exc).__name__}: {exc}"
        registry.problems.append(problem)
        log.warning(problem)


class _Refused(Exception):
    """A plugin's hooks or registrations are malformed; it is not loaded."""


_IMPORT_MACHINERY = (os.path.dirname(importlib.__file__), __file__)


def _where(exc: BaseException) -> str:
    """`` (at file:line)`` of the plugin's code that failed, the import machinery left out: a syntax error's
    own line, else the deepest frame, with the plugin's first frame too when the failure is deeper (in
    a library the plugin imports)."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f" (at {exc.filename}:{exc.lineno})"
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if not f.filename.startswith(("<frozen ", "<string>")) and not f.filename.startswith(_IMPORT_MACHINERY)]
    if not frames:
        return ""
    first, last = frames[0], frames[-1]
    via = f", from {first.filename}:{first.lineno}" if first.filename != last.filename else ""
    return f" (at {last.filename}:{last.lineno}{via})"


def _check_plugin(pm: pluggy.PluginManager, info: PluginInfo, plugin: object, warn: Callable[[PluginInfo, str], None]
                  ) -> None:
    known = hook_names(pm)
    plugin_obj = pm.get_plugin(info.name)
    unknown = [caller.name for caller in pm.get_hookcallers(plugin_obj) or [] if caller.name not in known
               and any(impl.plugin is plugin_obj and not impl.optionalhook for impl in caller.get_hookimpls())]
    if unknown:  # a hookimpl whose name matches no hookspec: a misspelling, or a hook of a package not loaded
        raise _Refused(f"unknown hook (misspelled?): {unknown[0]} is marked @hookimpl, but no hook of that name is "
                       f"specified by grpo_rewards or a loaded plugin{did_you_mean(unknown[0], known)}")
    for impl in _impls_of(pm, info.name):
        if impl.hookwrapper or getattr(impl, "wrapper", False):
            raise _Refused(f"{impl.function.__name__} is a hook wrapper; grpo hooks take plain implementations only")
    for attr in sorted(known):
        fn = getattr(plugin, attr, None)
        if callable(fn) and pm.parse_hookimpl_opts(plugin, attr) is None:
            warn(info, f"{attr} is not marked @hookimpl, so it is never called (add `@grpo_rewards.hookimpl`)")
    for attr in sorted(a for a in dir(plugin) if a.startswith("grpo_") and a not in known):
        hint = did_you_mean(attr, known)
        if hint and callable(getattr(plugin, attr, None)) and pm.parse_hookimpl_opts(plugin, attr) is None:
            warn(info, f"{attr} is not a hook, so it is never called{hint} (and mark it `@grpo_rewards.hookimpl`)")


def _impls_of(pm: pluggy.PluginManager, plugin_name: str) -> list[Any]:
    plugin = pm.get_plugin(plugin_name)
    return [impl for caller in pm.get_hookcallers(plugin) or [] for impl in caller.get_hookimpls() if impl.plugin is plugin]


def _stage_registrations(pm: pluggy.PluginManager, info: PluginInfo) -> list[tuple[str, str, Any]]:
    """Call the plugin's registration hooks and check every item; all or nothing (a failure raises ``_Refused``)."""
    staged: list[tuple[str, str, Any]] = []
    for hook_name, kind in registration_hooks(pm).items():
        for impl in getattr(pm.hook, hook_name).get_hookimpls():
            if impl.plugin_name != info.name:
                continue

            def register(item: Any, factory: Any = None, *, _kind: str = kind, _hook: str = hook_name) -> None:
                name, value = _checked(_kind, _hook, item, factory, info)
                staged.append((_kind, name, value))

            try:
                impl.function(register=register)
            except Exception as exc:
                raise _Refused(f"{hook_name} raised {type(exc).__name__}: {exc}{_where(exc)}") from exc
    return staged


def _checked(kind: str, hook: str, item: Any, factory: Any, info: PluginInfo) -> tuple[str, Any]:
    """``(name, value)`` of one ``register(...)`` call, or a ``TypeError`` saying what is wrong with it."""
    expected = {"rewards": RewardSpec, "verifiers": VerifierSpec}.get(kind)
    if expected is not None:
        if not isinstance(item, expected):
            given = type(item).__name__
            other = "grpo_register_verifiers" if isinstance(item, VerifierSpec) else "grpo_register_rewards"
            hint = f" (a {given} belongs in {other})" if isinstance(item, (RewardSpec, VerifierSpec)) else ""
            raise TypeError(f"{hook} takes register({expected.__name__}(...)), got {given}{hint}")
        if factory is not None:
            raise TypeError(f"{hook}: register() takes one {expected.__name__}, not a name and a factory")
        name, value, target = item.name, replace(item, plugin=info.name), item.factory
    else:
        name, value, target = item, factory, factory
    if not isinstance(name, str) or not name or ":" in name:
        raise TypeError(f"{hook}: register() needs a non-empty name without ':', got {name!r}")
    if not callable(target):
        raise TypeError(f"{hook}: {name!r} has a factory that is not callable ({type(target).__name__})")
    own = getattr(item, "extract", None) if kind == "verifiers" else None
    if own is not None and not callable(own):
        raise TypeError(f"{hook}: {name!r} has an extract that is not callable ({type(own).__name__}); "
                        "give a function extract(text) -> str | None")
    if expected is not None:
        try:
            params = params_of(target)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"{hook}: the parameters of {name!r}'s factory cannot be read: {exc}") from exc
        reserved = RESERVED_PARAMS if kind == "rewards" else VERIFIER_RESERVED_PARAMS
        clash = sorted(set(params) & set(reserved))
        if clash:
            raise TypeError(f"{hook}: {name!r} has parameter(s) {', '.join(clash)}, reserved for the config's own "
                            "keys; rename them")
    return name, value


def _add(registry: Registry, owners: dict[tuple[str, str], PluginInfo], info: PluginInfo, kind: str, name: str,
         value: Any) -> None:
    table: dict[str, Any] = getattr(registry, kind)
    for prefix in {normalize_name(info.name), normalize_name(info.distribution)}:
        registry.qualified[(kind, prefix, name)] = value
    info.registers.setdefault(kind, []).append(name)
    key = (kind, name)
    if key in registry.conflicts:
        registry.conflicts[key].append(info.label)
        return
    if key in owners and owners[key] is not info:
        registry.conflicts[key] = [owners[key].label, info.label]
        table.pop(name, None)
        return
    owners[key] = info
    table[name] = value


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
