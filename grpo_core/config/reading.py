"""Reading a run config: a TOML file (``grpo train run.toml``) or a dict (the Python API), plus ``--set``
overrides, into a :class:`~grpo_core.config.sections.RunConfig`.

Each value is checked alone here (its section and key known, its type, its range in
:data:`~grpo_core.config.sections.LIMITS`); the checks across keys are :mod:`grpo_core.config.checks`. Every
problem is collected before one :class:`grpo_rewards.ConfigError` is raised. ``--set section.key=value``
overrides are parsed with TOML value syntax (``3``, ``1e-5``, ``true``, ``"x"``, ``[1, 2]``), falling back to a
bare string; a problem in an overridden value names the override instead of the file.
"""

from __future__ import annotations

import math
import os
import tomllib
import types
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from grpo_core.config.checks import cross_checks
from grpo_core.config.sections import LIMITS, REQUIRED, SECTIONS, RunConfig
from grpo_core.config.trl_names import trl_hint
from grpo_rewards.compose import ComposedReward
from grpo_rewards.plugins import Registry, get_registry
from grpo_rewards.reward_config import rewards_from_doc
from grpo_rewards.suggest import did_you_mean
from grpo_rewards.tomlfile import ConfigError, Problem, TomlDoc, load_toml

# ------------------------------------------------------------------ values ----

def _num(x: float | None) -> str:
    return str(int(x)) if x is not None and float(x).is_integer() else f"{x:g}"


def _limit_problem(key: tuple[str, str], value: Any) -> str | None:
    """Why a number is out of its range (see LIMITS), or None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return f"must be a finite number, got {value!r}"
    if isinstance(value, int) and not -(2**63) <= value < 2**64:
        return f"is too large ({value:.3g})"
    low, high = LIMITS.get(key, (None, None))
    if (low is not None and value < low) or (high is not None and value > high):
        shown = "> 0" if low is not None and 0 < low < 1e-3 else f">= {_num(low)}"
        got = f"{value:.6g}" if abs(value) >= 1e7 else repr(value)
        if high is None:
            return f"must be {shown}, got {got}"
        if low is None:
            return f"must be <= {_num(high)}, got {got}"
        return f"must be {shown} and <= {_num(high)}, got {got}"
    return None


def _type_problem(annotation: Any, value: Any) -> str | None:
    """Why ``value`` does not fit ``annotation`` (a resolved dataclass field type), or None."""
    options = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else (annotation,)
    for opt in options:
        if opt is type(None) and value is None:
            return None
        origin = typing.get_origin(opt) or opt
        if origin is bool and isinstance(value, bool):
            return None
        if isinstance(value, bool):
            continue
        if origin is int and isinstance(value, int):
            return None
        if origin is float and isinstance(value, (int, float)):
            return None
        if origin is str and isinstance(value, str):
            return None
        if origin is list and isinstance(value, list) and all(isinstance(v, str) for v in value):
            return None
        if origin is dict and isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
            return None
    names = {type(None): "nothing", list: "a list of strings", dict: "a table of strings"}
    wanted = " or ".join(names.get(typing.get_origin(o) or o, getattr(o, "__name__", str(o))) for o in options)
    got = "a boolean" if isinstance(value, bool) else f"{type(value).__name__} {value!r}"
    return f"expected {wanted}, got {got}"


def _coerce(annotation: Any, value: Any) -> Any:
    """An integer given for a float field becomes a float (``learning_rate = 1`` -> ``1.0``)."""
    options = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else (annotation,)
    if float in options and int not in options and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


_HINTS: dict[type, dict[str, Any]] = {cls: typing.get_type_hints(cls) for cls in SECTIONS.values()}
_KEYS: dict[str, dict[str, Any]] = {name: _HINTS[cls] for name, cls in SECTIONS.items()}


# -------------------------------------------------------------- overrides ----

def parse_override(text: str) -> tuple[tuple[str, ...], Any]:
    """``"grpo.learning_rate=1e-5"`` -> ``(("grpo", "learning_rate"), 1e-05)``; a non-TOML value stays a string."""
    key, sep, value = text.partition("=")
    path = tuple(p.strip() for p in key.strip().split("."))
    if not sep or len(path) < 2 or not all(path):
        raise ValueError("expected section.key=value")
    value = value.strip()
    try:
        parsed = tomllib.loads(f"v = {value}")["v"]
    except tomllib.TOMLDecodeError:
        parsed = value
    return path, parsed


def apply_overrides(doc: TomlDoc, overrides: Sequence[str]) -> dict[str, str]:
    """Apply ``--set`` overrides to ``doc.data``; returns ``{dotted key: "--set ..."}`` for error attribution."""
    origins: dict[str, str] = {}
    for text in overrides:
        label = f"--set {text}"
        try:
            path, value = parse_override(text)
        except ValueError as exc:
            doc.problems.append(Problem(label, None, "", str(exc)))
            continue
        table = doc.data
        for i, part in enumerate(path[:-1]):
            if table is doc.data and part not in table and part not in SECTIONS and part != "rewards":
                origins.setdefault(part, label)  # an unknown section the override made up: blame the override
            nxt = table.setdefault(part, {})
            if not isinstance(nxt, dict):
                doc.problems.append(Problem(label, None, ".".join(path[: i + 1]), "is not a table"))
                break
            table = nxt
        else:
            table[path[-1]] = value
            origins[".".join(path)] = label
    return origins


def _attribute(problems: list[Problem], origins: dict[str, str]) -> list[Problem]:
    """Point problems about overridden keys at the override rather than the file."""
    out = []
    for p in problems:
        label = next((lab for key, lab in origins.items() if p.key == key or p.key.startswith(key + ".")), None)
        out.append(Problem(label, None, p.key, p.message) if label else p)
    return out


# ------------------------------------------------------------- sections ----

def _suggestion(key: str, candidates: Any, section: str | None) -> str:
    """What to say after "unknown key/section": where our key of that name lives when it is in another section
    (``grpo.temperature`` -> ``generation.temperature``), what TRL's field of that name is here (the one table,
    :mod:`grpo_core.config.trl_names`), else a did-you-mean among ``candidates``. The first two come before a
    look-alike, which for a TRL name is often a key of another meaning (``num_train_epochs`` is not
    ``num_iterations``)."""
    elsewhere = [f"{other}.{key}" for other, hints in _KEYS.items() if other != section and key in hints]
    if elsewhere:
        return f": it is {' or '.join(elsewhere)}"
    hint = trl_hint(key)
    if hint is not None:
        return f": {hint}"
    return did_you_mean(key, candidates)


def _build_section(doc: TomlDoc, name: str) -> Any:
    cls = SECTIONS[name]
    table = doc.data.get(name, {})
    if not isinstance(table, dict):
        doc.problem((name,), f"must be a table [{name}]")
        return cls()
    hints = _HINTS[cls]
    kwargs = {}
    for key, value in table.items():
        if isinstance(value, os.PathLike):  # the Python API: Path objects for paths
            value = os.fspath(value)
        if key not in hints:
            doc.problem((name, key), f"unknown key{_suggestion(key, hints, name)}")
        elif (why := _type_problem(hints[key], value)
              or _limit_problem((name, key), _coerce(hints[key], value))) is not None:
            doc.problem((name, key), why)
        else:
            kwargs[key] = _coerce(hints[key], value)
    for key in REQUIRED.get(name, ()):
        if not table.get(key):
            doc.problem((name,), f"missing required key {key!r}")
    return cls(**kwargs)


# ---------------------------------------------------------------- entries ----

def config_from_doc(doc: TomlDoc, overrides: Sequence[str] = (), registry: Registry | None = None) -> RunConfig:
    """Validate a parsed run file (plus ``--set`` overrides); raises :class:`ConfigError` with every problem."""
    registry = registry or get_registry()
    origins = apply_overrides(doc, overrides)
    for name in doc.data:
        if name not in SECTIONS and name != "rewards":
            doc.problem((name,), f"unknown section{_suggestion(name, [*SECTIONS, 'rewards'], None)}")
    sections = {name: _build_section(doc, name) for name in SECTIONS}
    cross_checks(doc, sections, registry)
    rewards = doc.data.get("rewards")
    composed = rewards if isinstance(rewards, ComposedReward) else rewards_from_doc(doc, registry)
    if doc.problems:
        problems = _attribute(doc.problems, origins)  # file order first, then the overrides
        raise ConfigError(sorted(problems, key=lambda p: (p.file != doc.path, p.line or 0)))
    assert composed is not None
    if not sections["logging"].output_dir:
        stem = Path(doc.path).stem if doc.path not in ("<dict>", "<string>") else "run"
        sections["logging"].output_dir = str(Path("runs") / stem)
    raw = {k: v for k, v in doc.data.items() if k != "rewards" or not isinstance(v, ComposedReward)}
    return RunConfig(**sections, rewards=composed, path=doc.path, raw=raw)


def as_run_config(config: RunConfig | str | Path | dict[str, Any], overrides: Sequence[str] = ()) -> RunConfig:
    """What ``Trainer(config)`` accepts: a RunConfig as is, a TOML path, or a dict (the Python API)."""
    if isinstance(config, RunConfig):
        if overrides:
            raise ValueError("overrides apply to a path or a dict, not to a loaded RunConfig")
        return config
    if isinstance(config, dict):
        return config_from_dict(config, overrides=overrides)
    return load_config(config, overrides)


def load_config(path: str | Path, overrides: Sequence[str] = (), registry: Registry | None = None) -> RunConfig:
    """Load, override and validate a run file; raises :class:`ConfigError` listing every problem."""
    return config_from_doc(load_toml(path), overrides, registry)


def config_from_dict(data: dict[str, Any], path: str = "<dict>", overrides: Sequence[str] = (),
                     registry: Registry | None = None) -> RunConfig:
    """The Python API: the same sections as a dict. ``data["rewards"]`` may also be a ready ComposedReward."""
    import copy

    plain = {k: (v if isinstance(v, ComposedReward) else copy.deepcopy(v)) for k, v in data.items()}
    return config_from_doc(TomlDoc(path, plain), overrides, registry)
