"""One way to add `grpo` commands, ours included: a module with an `@hookimpl grpo_register_commands`, loaded
through its own entry point of the `grpo` group, exactly as a third party's; so each can be switched off alone."""

from __future__ import annotations

import argparse
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ADDS_COMMANDS = re.compile(r"\bsubparsers\.add_parser\(")
HOOK = re.compile(r"^@hookimpl\s*\ndef grpo_register_commands\(subparsers", re.MULTILINE)


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def plugin_of(module: str, entry_points: dict[str, str]) -> str:
    """The plugin a module belongs to: the entry point it is, or the package entry point holding it (a folder
    of one module per command, registered by its ``__init__``); else the module itself."""
    holders = [target for target in entry_points.values() if module == target or module.startswith(target + ".")]
    return max(holders, key=len, default=module)


def commands() -> set[str]:
    from grpo_rewards.command_line import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return set(sub.choices)


@pytest.fixture
def fresh(monkeypatch):
    import grpo_rewards.plugins as plugins

    monkeypatch.setattr(plugins, "_default", None)
    yield plugins
    plugins._default = None


def test_every_module_adding_commands_is_an_entry_point_implementing_the_hook():
    entry_points = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["grpo"]
    adding = {plugin_of(module_name(p), entry_points) for package in ("grpo_rewards", "grpo_core")
              for p in (ROOT / package).rglob("*.py") if ADDS_COMMANDS.search(p.read_text())}
    plugin_source = {module_name(p): p.read_text() for package in ("grpo_rewards", "grpo_core")
                     for p in (ROOT / package).rglob("*.py")}
    assert {"grpo_rewards.reward_commands", "grpo_core.cli.commands", "grpo_rewards.sandbox.cli",
            "grpo_core.demo.command"} <= set(adding)
    for module in adding:
        assert HOOK.search(plugin_source[module]), f"{module} adds commands without its own @hookimpl grpo_register_commands"
        assert module in entry_points.values(), f"{module} is not an entry point of the grpo group"
    hooked = {module_name(p) for package in ("grpo_rewards", "grpo_core") for p in (ROOT / package).rglob("*.py")
              if "def grpo_register_commands(" in p.read_text() and p.name != "hookspecs.py"}
    assert hooked == set(adding)  # no plugin module adds another module's commands for it


def test_each_command_module_can_be_switched_off_alone(fresh, monkeypatch):
    everything = commands()
    assert {"train", "config", "plot", "signal", "demo", "sandbox", "rewards", "plugins"} <= everything
    for entry_point, gone in (("builtin_sandbox_cli", {"sandbox"}), ("builtin_trainer_cli", {"train", "config", "plot", "signal", "eval"}),
                              ("builtin_demo_cli", {"demo"})):
        monkeypatch.setenv("GRPO_DISABLE_PLUGINS", entry_point)
        fresh._default = None
        assert everything - commands() == gone
        registry = fresh.get_registry()
        assert "code_execution" in registry.rewards and "grpo_core" in registry.trainer_backends  # the rest stays
