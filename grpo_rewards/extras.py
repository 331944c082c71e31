"""Optional dependencies: which built-in rewards need which extra, and the one-line error when it is missing.

``pip install grpo-toolkit`` installs the reward side with what every reward needs (pluggy, rich,
pebble); the heavy verifier libraries are extras, installed only by who uses them:

    math    math-verify, sympy     math_equivalence, verify:math
    email   phonenumbers           email_rules
    train   torch, transformers... the trainer (``grpo train``, ``grpo demo``)

A reward whose extra is missing fails when it is built (a config's reward table, ``reward(...)``),
never when the plugins load, with :class:`MissingExtra`: one line naming the extra to install.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

DISTRIBUTION = "grpo-toolkit"
# extra -> {module: the distribution that provides it}
EXTRAS: dict[str, dict[str, str]] = {
    "math": {"math_verify": "math-verify", "sympy": "sympy"},
    "email": {"phonenumbers": "phonenumbers"},
}


class MissingExtra(ImportError):
    """A reward needs an optional dependency that is not installed; the message says which extra installs it."""


def install_hint(extra: str) -> str:
    return f"pip install '{DISTRIBUTION}[{extra}]'"


def _missing(extra: str) -> list[str]:
    missing = []
    for module, dist in EXTRAS[extra].items():
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):  # a broken install, or a module that blocks its own import
            found = False
        if not found:
            missing.append(dist)
    return missing


def require_extra(extra: str, what: str) -> None:
    """Raise :class:`MissingExtra` when a module of ``extra`` is not installed (``what`` needs it); nothing
    is imported, so a reward that runs its verifier in worker processes keeps the parent process light."""
    missing = _missing(extra)
    if missing:
        raise MissingExtra(f"{what} needs {' and '.join(missing)}, which {'is' if len(missing) == 1 else 'are'} "
                           f"not installed: {install_hint(extra)}")


def import_extra(extra: str, module: str, what: str) -> ModuleType:
    """``module`` imported, or :class:`MissingExtra` naming ``extra`` when it is not installed."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is not None and exc.name.split(".")[0] != module.split(".")[0]:
            raise  # the module is there but broken: its own error says more
        raise MissingExtra(f"{what} needs {EXTRAS[extra].get(module, module)}, which is not installed: "
                           f"{install_hint(extra)}") from None
