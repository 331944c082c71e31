"""What a plugin registers: reward and verifier specifications, and their parameters.

A spec names a *factory*. The factory's keyword parameters (with type hints and
defaults) are the reward's parameters: config validation, ``grpo rewards show``
and the docs all read them from the signature, so there is one source of truth.
:data:`RESERVED_PARAMS` (and, for verifiers, :data:`VERIFIER_REWARD_KEYS`) are the
config's own keys and cannot be parameter names; the plugin manager refuses them.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

REQUIRED = inspect.Parameter.empty

# Keys of a [rewards.<alias>] table that configure the wrapper, not the reward: no factory may take them.
RESERVED_PARAMS = ("use", "weight", "on_error", "timeout", "max_consecutive_failures")
# Keys a verify:<name> table passes to the reward built around the verifier, not to the verifier.
VERIFIER_REWARD_KEYS = ("value", "wrong_value", "extract", "pattern", "reference_column")
VERIFIER_RESERVED_PARAMS = RESERVED_PARAMS + VERIFIER_REWARD_KEYS


class RewardFunction(Protocol):
    """TRL's reward signature: one score per completion, ``None`` where it does not apply."""

    __name__: str

    def __call__(self, completions: list[Any], **columns: Any) -> list[float | None]: ...


@dataclass(frozen=True)
class Param:
    """One parameter of a reward or verifier factory."""

    name: str
    default: Any
    annotation: str
    doc: str = ""

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


def params_of(factory: Callable[..., Any]) -> dict[str, Param]:
    params: dict[str, Param] = {}
    for p in inspect.signature(factory).parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        ann = p.annotation
        ann_text = ann if isinstance(ann, str) else getattr(ann, "__name__", repr(ann))
        params[p.name] = Param(p.name, p.default, "" if ann is REQUIRED else str(ann_text))
    return params


def _first_line(doc: str | None) -> str:
    return (inspect.cleandoc(doc).splitlines() or [""])[0] if doc else ""


class _FactorySpec:
    """What a spec says about itself, read from its ``factory``: parameters and a one-line summary."""

    factory: Callable[..., Any]
    description: str

    @property
    def params(self) -> dict[str, Param]:
        return params_of(self.factory)

    @property
    def summary(self) -> str:
        return self.description or _first_line(self.factory.__doc__)


@dataclass(frozen=True)
class RewardSpec(_FactorySpec):
    """A named reward: ``factory(**params)`` returns a :class:`RewardFunction`.

    ``columns`` lists the dataset columns the reward reads (``answer``, ``tests``...),
    so tools can check a dataset before a run; ``example`` is a TOML snippet shown by
    ``grpo rewards show``.
    """

    name: str
    factory: Callable[..., RewardFunction]
    description: str = ""
    columns: tuple[str, ...] = ()
    example: str = ""
    plugin: str = field(default="", compare=False)  # filled in by the plugin manager


    def build(self, **params: Any) -> RewardFunction:
        fn = self.factory(**params)
        if not getattr(fn, "__name__", None):
            with contextlib.suppress(AttributeError):
                fn.__name__ = self.name  # type: ignore[attr-defined]
        return fn


@dataclass(frozen=True)
class VerifierSpec(_FactorySpec):
    """A named verifier: ``factory(**params)`` returns ``verify(answer, reference) -> Verdict``.

    ``extract``, when given, is the verifier's own way to find the answer in a completion:
    ``extract(text) -> str | None``, handed the completion text without its reasoning. A
    ``use = "verify:<name>"`` reward then uses it by default (``extract = "verifier"``); a
    config can still pick a shared method (``extract = "answer_tag"``...). Make it a
    module-level function, so the reward pickles.
    """

    name: str
    factory: Callable[..., Callable[[str, str], Any]]
    description: str = ""
    example: str = ""
    plugin: str = field(default="", compare=False)
    extract: Callable[[str], str | None] | None = None

