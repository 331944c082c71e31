"""Every hook has a section in docs/hooks.md naming each of its arguments, and a test that exercises it;
docs/hooks.md documents no hook that does not exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from grpo_rewards import load_registry

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "hooks.md"
SPEC = re.compile(r"^@hookspec(?:\(.*\))?\s*\n(?:@.*\n)*def (grpo_\w+)\(", re.MULTILINE)


def specified_hooks() -> dict[str, tuple[str, ...]]:
    """Hook name -> argument names: every hook the plugin manager knows, and every ``@hookspec`` in the
    packages' sources (a specification added in either package is found, wherever it is registered)."""
    manager = load_registry(entry_points=True).manager
    assert manager is not None
    hooks = {name: tuple(caller.spec.argnames) for name, caller in vars(manager.hook).items()
             if getattr(caller, "spec", None) is not None}
    for package in ("grpo_rewards", "grpo_core"):
        for path in (ROOT / package).rglob("*.py"):
            for name in SPEC.findall(path.read_text()):
                hooks.setdefault(name, ())
    return hooks


def doc_sections() -> dict[str, str]:
    """``## `hook_name` `` heading -> the text of its section."""
    parts = re.split(r"^## ", DOC.read_text(), flags=re.MULTILINE)[1:]
    return {part.split("\n", 1)[0].strip().strip("`"): part for part in parts}


def test_hooks_are_found():
    hooks = specified_hooks()
    assert {"grpo_register_rewards", "grpo_register_commands", "grpo_on_step_end"} <= set(hooks)
    assert hooks["grpo_on_step_end"] == ("context", "step", "metrics", "trainer")


@pytest.mark.parametrize("hook", sorted(specified_hooks()))
def test_every_hook_is_documented_with_its_arguments(hook):
    sections = doc_sections()
    assert hook in sections, f"docs/hooks.md has no section '## `{hook}`'"
    text = sections[hook]
    for arg in specified_hooks()[hook]:
        assert re.search(rf"\b{arg}\b", text), f"docs/hooks.md: {hook}: argument {arg!r} is not described"
    for part in ("**Arguments:**", "**Returns:**", "**Called:**"):
        assert part in text, f"docs/hooks.md: {hook}: no {part}"


def test_the_doc_names_no_hook_that_does_not_exist():
    assert sorted(set(doc_sections()) - set(specified_hooks())) == []


@pytest.mark.parametrize("hook", sorted(specified_hooks()))
def test_every_hook_is_exercised_by_a_test(hook):
    here = Path(__file__).resolve()
    files = [p for p in [*(ROOT / "tests").rglob("*.py"), *(ROOT / "plugins").glob("*/tests/**/*.py")] if p != here]
    users = [p for p in files if hook in p.read_text(errors="replace")]
    assert users, f"no test under tests/ or plugins/*/tests implements or calls {hook}"
