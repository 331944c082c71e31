"""What a sandbox language is: its names, fence tags, file suffixes, compiler and run mode, in one registry.

Every other module asks here: code extraction (which fence tags mean the language),
``grpo sandbox run`` (which suffix means it), the code reward (which languages the local
backend runs, which are judged on stdin/stdout only), and the local pool (how to compile
a source and in which seccomp mode to run it). A language the local sandbox runs is
either ``python`` (run in the zygote's own interpreter: seccomp mode ``python``) or
compiled in the jail by a compiler found through ``PATH`` (seccomp mode ``compile``),
its binary then executed from a sealed memfd (mode ``exec``). Languages with
``local=False`` only name what remote backends run (their fence tags still work).

A plugin or a test adds one with :func:`register`::

    register(Language("c89", suffixes=(".c89",), compiler="gcc",
                      flags=("-std=c89", "-O2", "-o", "a.out", "main.c"), source_name="main.c"))
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass

RUN_MODES = ("python", "exec")  # how a program of the language runs; compiled ones are built in mode "compile"


@dataclass(frozen=True)
class Language:
    """One language. ``compiler`` empty: interpreted in the zygote (Python only); else the compiler's name
    (found through ``PATH``), its ``flags`` (they must write ``a.out``) and the file the source is written to."""

    name: str
    aliases: tuple[str, ...] = ()  # other names it goes by (``py``, ``c++``...)
    fences: tuple[str, ...] = ()  # fence tags that mean it; empty: its name and aliases
    suffixes: tuple[str, ...] = ()  # file suffixes, lower case with the dot
    compiler: str = ""
    flags: tuple[str, ...] = ()
    source_name: str = ""
    local: bool = True  # the local sandbox runs it
    stdio_only: bool = False  # judged on stdin/stdout tests only (function calls and asserts are Python)

    @property
    def compiled(self) -> bool:
        return bool(self.compiler)

    @property
    def run_mode(self) -> str:
        """The seccomp mode its programs run in: ``exec`` for a compiled binary, ``python`` otherwise."""
        return "exec" if self.compiled else "python"

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name, *(a for a in self.aliases if a != self.name))

    @property
    def fence_tags(self) -> tuple[str, ...]:
        return tuple(t.lower() for t in (self.fences or self.names))


_REGISTRY: dict[str, Language] = {}
_BY_NAME: dict[str, Language] = {}


def register(language: Language) -> None:
    """Add (or replace) a language; its name and aliases resolve to it from now on."""
    if language.compiled and not (language.source_name and language.flags):
        raise ValueError(f"language {language.name!r}: a compiler needs flags and a source_name")
    old = _REGISTRY.pop(language.name, None)
    if old is not None:
        for name in old.names:
            _BY_NAME.pop(name, None)
    _REGISTRY[language.name] = language
    for name in language.names:
        _BY_NAME.setdefault(name.lower(), language)


def unregister(name: str) -> None:
    language = _REGISTRY.pop(name, None)
    if language is not None:
        for alias in language.names:
            if _BY_NAME.get(alias.lower()) is language:
                del _BY_NAME[alias.lower()]


def get(name: str) -> Language | None:
    """The language ``name`` (or an alias of it, any case) means, or None."""
    return _BY_NAME.get(name.lower())


def canonical(name: str) -> str:
    """The registered name for ``name`` (``py`` -> ``python``); unknown names come back lower-cased."""
    language = get(name)
    return language.name if language else name.lower()


def fence_tags(name: str) -> tuple[str, ...]:
    """Fence tags that mean ``name``'s language (lower case)."""
    language = get(name)
    return language.fence_tags if language else (name.lower(),)


def by_suffix(suffix: str) -> Language | None:
    for language in _REGISTRY.values():
        if suffix.lower() in language.suffixes:
            return language
    return None


def local_names() -> tuple[str, ...]:
    """Names (and aliases) of every language the local sandbox runs."""
    return tuple(n for lang in _REGISTRY.values() if lang.local for n in lang.names)


def local_languages() -> tuple[Language, ...]:
    return tuple(lang for lang in _REGISTRY.values() if lang.local)


def is_compiled(name: str) -> bool:
    language = get(name)
    return bool(language and language.compiled)


def compilers() -> dict[str, str]:
    """Absolute paths of the compilers found through ``PATH``, by language (the zygote's environment is empty)."""
    found = {}
    for language in _REGISTRY.values():
        if language.compiled and language.local:
            path = shutil.which(language.compiler)
            if path:
                found[language.name] = os.path.abspath(path)
    return found


register(Language("python", aliases=("python3", "py"), fences=("python", "py", "python3", "py3"), suffixes=(".py",)))
register(Language("c", aliases=("gcc",), fences=("c",), suffixes=(".c",), compiler="gcc",
                  flags=("-std=gnu17", "-O2", "-pipe", "-o", "a.out", "main.c", "-lm"), source_name="main.c",
                  stdio_only=True))
register(Language("cpp", aliases=("c++", "cxx", "cc"), suffixes=(".cpp", ".cc", ".cxx", ".c++"), compiler="g++",
                  flags=("-std=gnu++17", "-O2", "-pipe", "-o", "a.out", "main.cpp", "-lm"), source_name="main.cpp",
                  stdio_only=True))
register(Language("javascript", aliases=("js", "nodejs", "node"), local=False))
register(Language("bash", aliases=("sh", "shell"), local=False))
