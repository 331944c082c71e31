"""The checks a plugin passes before anything it registers is kept (:func:`check_plugin`,
:func:`stage_registrations`), and where in its code a failure happened (:func:`where`).

A plugin that implements a hook nobody specifies (a misspelling), a hook wrapper, or whose
registration hook raises or registers something malformed (a non-callable factory, a verifier given
to the rewards hook, a parameter named like a config key) is :class:`Refused` as a whole. A module
function named like a hook but not marked ``@hookimpl`` is ignored by pluggy, so it gets a warning.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import traceback
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pluggy

from grpo_rewards.plugin_registry import PluginInfo
from grpo_rewards.specs import RESERVED_PARAMS, VERIFIER_RESERVED_PARAMS, RewardSpec, VerifierSpec, params_of
from grpo_rewards.suggest import closest, did_you_mean

REGISTER_PREFIX = "grpo_register_"  # grpo_register_<kind>(register): a registration hook, kept in registry.<kind>


class Refused(Exception):
    """A plugin's hooks or registrations are malformed; it is not loaded."""


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


_HERE = os.path.dirname(__file__)
# frames of the import machinery and of the loader itself say nothing about the plugin
_BACKPORT = importlib.util.find_spec("importlib_metadata")  # entry points load through it where a package uses it
_NOT_THE_PLUGIN = (os.path.dirname(importlib.__file__), os.path.join(_HERE, "plugins.py"), __file__,
                   *([os.path.dirname(_BACKPORT.origin)] if _BACKPORT is not None and _BACKPORT.origin else []))


def where(exc: BaseException) -> str:
    """`` (at file:line)`` of the plugin's code that failed, the import machinery left out: a syntax error's
    own line, else the deepest frame, with the plugin's first frame too when the failure is deeper (in
    a library the plugin imports)."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f" (at {exc.filename}:{exc.lineno})"
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if not f.filename.startswith(("<frozen ", "<string>")) and not f.filename.startswith(_NOT_THE_PLUGIN)]
    if not frames:
        return ""
    first, last = frames[0], frames[-1]
    via = f", from {first.filename}:{first.lineno}" if first.filename != last.filename else ""
    return f" (at {last.filename}:{last.lineno}{via})"


def impls_of(pm: pluggy.PluginManager, plugin_name: str) -> list[Any]:
    """The hook implementations of the plugin registered as ``plugin_name``."""
    plugin = pm.get_plugin(plugin_name)
    return [impl for caller in pm.get_hookcallers(plugin) or [] for impl in caller.get_hookimpls() if impl.plugin is plugin]


def check_plugin(pm: pluggy.PluginManager, info: PluginInfo, plugin: object, warn: Callable[[PluginInfo, str], None]
                 ) -> None:
    """Raise :class:`Refused` for an unknown hook or a hook wrapper; ``warn`` about hook-like functions
    that are not marked ``@hookimpl``."""
    known = hook_names(pm)
    plugin_obj = pm.get_plugin(info.name)
    unknown = [caller.name for caller in pm.get_hookcallers(plugin_obj) or [] if caller.name not in known
               and any(impl.plugin is plugin_obj and not impl.optionalhook for impl in caller.get_hookimpls())]
    if unknown:  # a hookimpl whose name matches no hookspec: a misspelling, or a hook of a package not loaded
        raise Refused(f"unknown hook (misspelled?): {unknown[0]} is marked @hookimpl, but no hook of that name is "
                      f"specified by grpo_rewards or a loaded plugin{did_you_mean(unknown[0], known)}")
    for impl in impls_of(pm, info.name):
        if impl.hookwrapper or getattr(impl, "wrapper", False):
            raise Refused(f"{impl.function.__name__} is a hook wrapper; grpo hooks take plain implementations only")
    for attr in sorted(known):
        fn = getattr(plugin, attr, None)
        if callable(fn) and pm.parse_hookimpl_opts(plugin, attr) is None:
            warn(info, f"{attr} is not marked @hookimpl, so it is never called (add `@grpo_rewards.hookimpl`)")
    bare = {k.removeprefix("grpo_"): k for k in known}  # compared without the prefix every hook shares
    for attr in sorted(a for a in dir(plugin) if a.startswith("grpo_") and a not in known):
        match = closest(attr.removeprefix("grpo_"), bare)
        hint = f"; did you mean {bare[match]!r}?" if match else ""
        if hint and callable(getattr(plugin, attr, None)) and pm.parse_hookimpl_opts(plugin, attr) is None:
            warn(info, f"{attr} is not a hook, so it is never called{hint} (and mark it `@grpo_rewards.hookimpl`)")


def stage_registrations(pm: pluggy.PluginManager, info: PluginInfo) -> list[tuple[str, str, Any]]:
    """Call the plugin's registration hooks and check every item; all or nothing (a failure raises ``Refused``)."""
    staged: list[tuple[str, str, Any]] = []
    for hook_name, kind in registration_hooks(pm).items():
        for impl in getattr(pm.hook, hook_name).get_hookimpls():
            if impl.plugin_name != info.name:
                continue

            def register(item: Any, factory: Any = None, *, _kind: str = kind, _hook: str = hook_name) -> None:
                name, value = checked(_kind, _hook, item, factory, info)
                staged.append((_kind, name, value))

            own = getattr(impl.function, "__wrapped__", impl.function)  # not the failure-isolating wrapper
            try:
                own(register=register)
            except Exception as exc:
                raise Refused(f"{hook_name} raised {type(exc).__name__}: {exc}{where(exc)}") from exc
    return staged


def checked(kind: str, hook: str, item: Any, factory: Any, info: PluginInfo) -> tuple[str, Any]:
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
