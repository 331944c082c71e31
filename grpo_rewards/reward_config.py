"""``[rewards.<alias>]`` tables: validate them all at once and build the composed reward.

    [rewards]                 # optional defaults for every reward below
    on_error = "none"         # none | zero | raise
    timeout = 300             # seconds before a reward call is stopped (its worker process killed)
    max_consecutive_failures = 3   # calls in a row scoring no row before the run stops (0: never)

    [rewards.correct]
    use = "exact_match"       # a registered reward ("dist:name" when two plugins clash), "verify:<verifier>",
                              # or a local one: "path/to/file.py:name" or "package.module:name"
    weight = 1.0
    value = 2.0               # any parameter of the reward's factory

An alias may not be ``total`` (the weighted sum's column) and a weight must be a finite
number. Every problem is reported as ``file:line: key: what is wrong`` (with a did-you-mean
for unknown names and keys) in one :class:`ConfigError`.
"""

from __future__ import annotations

import math
import os
from typing import Any

from grpo_rewards.answers.extraction import METHODS
from grpo_rewards.compose import RESERVED_ALIASES, ComposedReward, RewardEntry, check_weight
from grpo_rewards.contract import DEFAULT_MAX_CONSECUTIVE_FAILURES, DEFAULT_TIMEOUT, ON_ERROR, SafeReward
from grpo_rewards.errors import ConfigError, Problem
from grpo_rewards.extras import MissingExtra
from grpo_rewards.local_rewards import local_spec, looks_local
from grpo_rewards.plugins import PluginError, Registry, building_from, get_registry
from grpo_rewards.specs import (
    RESERVED_PARAMS,
    VERIFIER_REWARD_KEYS,
    Param,
    RewardSpec,
    VerifierSpec,
    params_of,
)
from grpo_rewards.suggest import did_you_mean
from grpo_rewards.tomlfile import TomlDoc, load_toml
from grpo_rewards.verdict import reward_from_verifier

ENTRY_KEYS = RESERVED_PARAMS
DEFAULT_KEYS = ("on_error", "timeout", "max_consecutive_failures")
VERIFIER_PREFIX = "verify:"
OWN_EXTRACTION = "verifier"  # extract = "verifier": the verifier's own extraction (VerifierSpec.extract)


def _not_finite(value: Any) -> bool:
    """NaN or an infinity anywhere in ``value`` (a number, or inside a list or table)."""
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, (list, tuple)):
        return any(_not_finite(v) for v in value)
    if isinstance(value, dict):
        return any(_not_finite(v) for v in value.values())
    return False


def _type_error(param: Param, value: Any) -> str | None:
    """Why ``value`` does not fit ``param`` (judged from its annotation and default), or None."""
    if _not_finite(value):
        return f"must be a finite number, got {value!r}"
    ann = param.annotation.replace(" ", "")
    default = param.default
    allowed: list[type] = []
    for name, types in (("bool", [bool]), ("int", [int]), ("float", [int, float]), ("str", [str]),
                        ("list", [list]), ("tuple", [list]), ("dict", [dict])):
        if name in ann.split("|") or ann.startswith(f"{name}[") or any(p.startswith(f"{name}[") for p in ann.split("|")):
            allowed += types
    if not allowed and not param.required and default is not None:
        allowed = [int, float] if isinstance(default, float) else [type(default)]
    if not allowed:
        return None
    if isinstance(value, bool) and bool not in allowed:
        return f"expected {param.annotation or type(default).__name__}, got a boolean"
    if not isinstance(value, tuple(allowed)):
        return f"expected {param.annotation or type(default).__name__}, got {type(value).__name__} {value!r}"
    return None


def reward_spec(use: str, registry: Registry, base_dir: str = ".") -> RewardSpec:
    """The spec ``use`` names: a registered reward (``name`` or ``dist:name``) or a local one
    (``path/to/file.py:name``, ``package.module:name``; see :mod:`grpo_rewards.local_rewards`)."""
    if ":" in use and not registry.has_prefix(use.split(":", 1)[0]) and looks_local(use):
        return local_spec(use, base_dir)
    return registry.reward(use)


def build_reward_fn(use: str, params: dict[str, Any], registry: Registry, base_dir: str = ".") -> Any:
    """Build one reward function from a registered name (or ``verify:<name>``, or a local reward) and its
    parameters; its factory sees ``registry`` as :func:`~grpo_rewards.plugins.current_registry`."""
    with building_from(registry):
        return _build_reward_fn(use, params, registry, base_dir)


def _build_reward_fn(use: str, params: dict[str, Any], registry: Registry, base_dir: str) -> Any:
    if use.startswith(VERIFIER_PREFIX):
        spec = registry.verifier(use[len(VERIFIER_PREFIX):])
        reward_params = {k: params[k] for k in VERIFIER_REWARD_KEYS if k in params}
        verifier_params = {k: v for k, v in params.items() if k not in VERIFIER_REWARD_KEYS}
        extract = reward_params.get("extract", OWN_EXTRACTION if spec.extract else "auto")
        if extract == OWN_EXTRACTION:
            if spec.extract is None:
                raise ValueError(f"extract = {OWN_EXTRACTION!r}: verifier {spec.name!r} brings no extraction of its "
                                 f"own; pick a method ({', '.join(METHODS)})")
            reward_params["extract"] = spec.extract
        return reward_from_verifier(spec.factory(**verifier_params), name=spec.name, **reward_params)
    return reward_spec(use, registry, base_dir).build(**params)


def verifier_reward_params(spec: VerifierSpec) -> dict[str, Param]:
    """The keys a ``verify:<name>`` table passes to the reward around the verifier (``value``, ``extract``...)."""
    params = {k: v for k, v in params_of(reward_from_verifier).items() if k in VERIFIER_REWARD_KEYS}
    own = OWN_EXTRACTION if spec.extract else "auto"
    params["extract"] = Param("extract", own, "str", f"an extraction method, or {OWN_EXTRACTION!r} for the "
                                                    "verifier's own")
    return params


def _known_params(use: str, registry: Registry, base_dir: str = ".") -> dict[str, Param]:
    if use.startswith(VERIFIER_PREFIX):
        spec = registry.verifier(use[len(VERIFIER_PREFIX):])
        return {**spec.params, **verifier_reward_params(spec)}
    return reward_spec(use, registry, base_dir).params


def param_problems(use: str, params: dict[str, Any], known: dict[str, Param]) -> list[tuple[str, str]]:
    """``(parameter, what is wrong)`` for each unknown, mistyped or missing parameter of ``use``
    (``""`` as the parameter when the problem is the table's, a missing required one)."""
    found: list[tuple[str, str]] = []
    for name, value in params.items():
        if name not in known:
            found.append((name, f"unknown parameter of {use!r}{did_you_mean(name, [*known, *ENTRY_KEYS])}"))
        elif (why := _type_error(known[name], value)) is not None:
            found.append((name, why))
    found += [("", f"missing required parameter {name!r} of {use!r}")
              for name, param in known.items() if param.required and name not in params]
    return found


def checked_reward(use: str, params: dict[str, Any], registry: Registry | None = None) -> Any:
    """Python's ``reward(use, **params)``: the parameters checked as a config's are (unknown keys with a
    did-you-mean, types, required ones), then the reward built; a :class:`ConfigError` lists every problem."""
    registry = registry or get_registry()
    where = f"reward({use!r})"
    known = _known_params(use, registry)
    problems = []
    for name, why in param_problems(use, params, known):
        if name in ENTRY_KEYS:
            why = (f"{name!r} is a key of a [rewards.<alias>] table, not a parameter of {use!r} (in Python, "
                   "compose() takes weights, on_error and timeout)")
        problems.append(Problem(where, None, name, why))
    if problems:
        raise ConfigError(problems)
    return build_reward_fn(use, params, registry)


def rewards_from_doc(doc: TomlDoc, registry: Registry | None = None, *, section: str = "rewards") -> ComposedReward | None:
    """Validate ``doc``'s ``[rewards.*]`` tables and build the composed reward.

    Problems are added to ``doc.problems``; the caller raises (so a run config can
    report reward and trainer problems together). Returns None when there are problems.
    """
    registry = registry or get_registry()
    base_dir = os.path.dirname(doc.path) if doc.path and os.path.isfile(doc.path) else "."
    table = doc.data.get(section)
    if table is None:
        doc.problem((section,), "no rewards configured: add at least one [rewards.<alias>] table with `use = ...`")
        return None
    if not isinstance(table, dict):
        doc.problem((section,), "must be a table of [rewards.<alias>] tables")
        return None
    defaults = {k: v for k, v in table.items() if not isinstance(v, dict)}
    for key in defaults:
        if key not in DEFAULT_KEYS:
            doc.problem((section, key), f"unknown key{did_you_mean(key, DEFAULT_KEYS)} (each reward goes in its own [rewards.<alias>] table)")
    on_error_default = defaults.get("on_error", "none")
    timeout_default = defaults.get("timeout")
    failures_default = defaults.get("max_consecutive_failures", DEFAULT_MAX_CONSECUTIVE_FAILURES)

    entries: list[RewardEntry] = []
    aliases = [k for k, v in table.items() if isinstance(v, dict)]
    if not aliases:
        doc.problem((section,), "no rewards configured: add at least one [rewards.<alias>] table with `use = ...`")
    before = len(doc.problems)
    for alias in aliases:
        entry = table[alias]
        key = (section, alias)
        if alias in RESERVED_ALIASES:
            doc.problem(key, f"the alias {alias!r} is reserved for the weighted sum of the rewards; pick another name")
            continue
        use = entry.get("use")
        if not isinstance(use, str):
            near = [k for k in entry if k not in ENTRY_KEYS and did_you_mean(k, ["use"])]
            if "use" not in entry and near:
                doc.problem(key + (near[0],), f"unknown key{did_you_mean(near[0], ['use'])}")
            else:
                doc.problem(key + ("use",) if "use" in entry else key,
                            "`use` must name a reward (see `grpo rewards list`)")
            continue
        try:
            known = _known_params(use, registry, base_dir)
        except PluginError as exc:
            doc.problem(key + ("use",), str(exc))
            continue
        weight = entry.get("weight", 1.0)
        if (why := check_weight(weight)) is not None:
            doc.problem(key + ("weight",), why)
        on_error = entry.get("on_error", on_error_default)
        if on_error not in ON_ERROR:
            doc.problem(key + ("on_error",) if "on_error" in entry else (section, "on_error"),
                        f"must be one of {', '.join(ON_ERROR)}, got {on_error!r}")
        timeout = entry.get("timeout", timeout_default)
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                    or not 0 < timeout < math.inf):
            doc.problem(key + ("timeout",) if "timeout" in entry else (section, "timeout"),
                        f"must be a positive, finite number of seconds, got {timeout!r}")
        failures = entry.get("max_consecutive_failures", failures_default)
        if isinstance(failures, bool) or not isinstance(failures, int) or failures < 0:
            doc.problem(key + ("max_consecutive_failures",),
                        f"must be a whole number >= 0 (0: never stop), got {failures!r}")
        params = {k: v for k, v in entry.items() if k not in ENTRY_KEYS}
        found = param_problems(use, params, known)
        for name, why in found:
            doc.problem(key + ((name,) if name else ()), why)
        if found or len(doc.problems) > before:
            before = len(doc.problems)
            continue
        try:
            fn = build_reward_fn(use, params, registry, base_dir)
        except MissingExtra as exc:  # an optional dependency not installed: the reward, not a parameter
            doc.problem(key + ("use",), str(exc))
            before = len(doc.problems)
            continue
        except (ValueError, TypeError, KeyError, PluginError) as exc:
            _blame_params(doc, key, use, params, known, registry, exc, base_dir)
            before = len(doc.problems)
            continue
        needed = getattr(fn, "worst_case", None)  # a reward that waits on a service: its retries within the timeout
        if callable(needed) and needed() >= (DEFAULT_TIMEOUT if timeout is None else timeout):
            doc.problem(key + ("timeout",) if "timeout" in entry else key,
                        f"the reward's requests can take {needed():g} s with their retries (request_timeout x tries, "
                        f"and the waits between them), not below its timeout of "
                        f"{DEFAULT_TIMEOUT if timeout is None else timeout:g} s: raise timeout, or lower "
                        "request_timeout or retries")
            before = len(doc.problems)
            continue
        plugin = "" if use.startswith(VERIFIER_PREFIX) else reward_spec(use, registry, base_dir).plugin
        safe = SafeReward(fn, alias, on_error=on_error, timeout=timeout, plugin=plugin,
                          max_consecutive_failures=failures)
        ref = params.get("reference_column", known["reference_column"].default) if "reference_column" in known else None
        entries.append(RewardEntry(alias, safe, float(weight), use, ref if isinstance(ref, str) else None))
    if doc.problems:
        return None
    return ComposedReward(entries)


def _builds(use: str, params: dict[str, Any], registry: Registry, base_dir: str) -> Exception | None:
    """The error building ``use`` with ``params`` raises (a refusal of its parameters), or ``None`` when it builds."""
    try:
        build_reward_fn(use, params, registry, base_dir)
    except (ValueError, TypeError, KeyError, PluginError) as exc:
        return exc
    return None


def _blame_params(doc: TomlDoc, key: tuple[str, ...], use: str, params: dict[str, Any], known: dict[str, Param],
                  registry: Registry, exc: Exception, base_dir: str = ".") -> None:
    """A factory refused its parameters: build again with each optional parameter alone (the required ones
    always given) to report every parameter it refuses, at that parameter's line. A factory that refuses its
    required parameters alone needs more of them together (``llm_judge``: a question or criteria, an endpoint):
    then a parameter is blamed when leaving it out makes the rest build. If none is (a rule between
    parameters), the factory's message goes on the table."""
    required = {n: v for n, v in params.items() if known[n].required}
    optional = [n for n in params if n not in required]
    alone = _builds(use, required, registry, base_dir) is None
    blamed = False
    for name in optional:
        try:
            if alone:
                why = _builds(use, {**required, name: params[name]}, registry, base_dir)
            else:
                why = exc if _builds(use, {k: v for k, v in params.items() if k != name}, registry, base_dir) is None \
                    else None
        except Exception:  # noqa: BLE001, S112 (a factory's own bug with these parameters: the table is blamed below)
            continue
        if why is not None:
            doc.problem(key + (name,), f"{use}: {why}")
            blamed = True
    if not blamed:
        doc.problem(key, f"{use}: {exc}")


def load_rewards(path: str, registry: Registry | None = None) -> ComposedReward:
    """Load and validate a rewards (or run) file; raises :class:`ConfigError` listing every problem."""
    doc = load_toml(path)
    composed = rewards_from_doc(doc, registry)
    doc.raise_if_problems()
    assert composed is not None
    return composed
