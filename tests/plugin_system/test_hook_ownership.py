"""Each package owns its hooks: ``grpo_rewards`` specifies the rewards' hooks, ``grpo_core`` the trainer's,
added through ``grpo_add_hookspecs`` as pytest plugins add theirs; any plugin can add hooks that way."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import grpo_core.hookspecs
import grpo_core.plugin
import grpo_rewards.hookspecs
from grpo_rewards import hookimpl, hookspec, load_registry

TRAINER_HOOKS = {"grpo_register_generation_backends", "grpo_register_trainer_backends", "grpo_register_dataset_sources",
                 "grpo_register_engines", "grpo_register_loss_types", "grpo_register_tools",
                 "grpo_on_train_start", "grpo_on_rewards_scored", "grpo_on_step_end", "grpo_on_checkpoint",
                 "grpo_on_train_end"}


def specs_in(module: Any) -> set[str]:
    return {n for n in dir(module) if n.startswith("grpo_") and callable(getattr(module, n))}


def test_each_package_specifies_its_own_hooks() -> None:
    assert specs_in(grpo_core.hookspecs) == TRAINER_HOOKS
    assert not specs_in(grpo_rewards.hookspecs) & TRAINER_HOOKS
    assert {"grpo_register_rewards", "grpo_register_verifiers", "grpo_register_commands",
            "grpo_register_sandbox_backends", "grpo_add_hookspecs"} <= specs_in(grpo_rewards.hookspecs)
    manager = load_registry().manager  # the installed trainer plugin adds its hooks
    assert manager is not None
    assert {n for n, c in vars(manager.hook).items() if getattr(c, "spec", None) is not None} >= TRAINER_HOOKS


def test_the_rewards_plugin_manager_needs_no_trainer() -> None:
    code = ("import sys; from grpo_rewards import load_registry, reward\n"
            "r = load_registry(entry_points=False)\n"
            "assert not hasattr(r.manager.hook, 'grpo_on_step_end') and not hasattr(r, 'trainer_backends')\n"
            "assert 'grpo_core' not in sys.modules and 'torch' not in sys.modules, sorted(sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


class WeatherSpecs:
    @hookspec
    def grpo_on_weather(self, forecast: str) -> None:
        """A hook of a third party's own."""

    @hookspec
    def grpo_register_clouds(self, register: Any) -> None:
        """A registration hook of a third party's own."""


class Weather:
    @hookimpl
    def grpo_add_hookspecs(self, pluginmanager: Any) -> None:
        pluginmanager.add_hookspecs(WeatherSpecs)


class Listener:
    @hookimpl
    def grpo_on_weather(self, forecast: str) -> str:
        return f"heard {forecast}"

    @hookimpl
    def grpo_register_clouds(self, register: Any) -> None:
        register("cumulus", lambda: "fluffy")


def test_a_plugin_adds_hooks_that_load_whatever_the_order() -> None:
    registry = load_registry(entry_points=False, extra_plugins=[("listener", Listener()), ("weather", Weather())])
    assert registry.problems == []
    assert registry.hook.grpo_on_weather(forecast="rain") == ["heard rain"]
    assert registry.get("clouds", "cumulus")() == "fluffy" and list(registry.clouds) == ["cumulus"]
    listener = next(p for p in registry.plugins if p.name == "listener")
    assert listener.registers == {"clouds": ["cumulus"]}


def test_a_hook_no_loaded_plugin_specifies_is_refused_unless_optional() -> None:
    class StepListener:
        @hookimpl
        def grpo_on_step_end(self, step: int) -> None: ...

    class OptionalListener:
        @hookimpl(optionalhook=True)
        def grpo_on_step_end(self, step: int) -> None: ...

    alone = load_registry(entry_points=False, extra_plugins=[("steps", StepListener()), ("maybe", OptionalListener())])
    by_name = {p.name: p for p in alone.plugins}
    assert "unknown hook" in (by_name["steps"].error or "") and "grpo_on_step_end" in by_name["steps"].error
    assert by_name["maybe"].error is None
    with_trainer = load_registry(entry_points=False, extra_plugins=[("steps", StepListener()),
                                                                    ("builtin_trainer", grpo_core.plugin)])
    assert with_trainer.problems == [] and "grpo_on_step_end" in next(
        p for p in with_trainer.plugins if p.name == "steps").hooks


def test_a_plugin_whose_grpo_add_hookspecs_raises_fails_alone() -> None:
    class Broken:
        @hookimpl
        def grpo_add_hookspecs(self, pluginmanager: Any) -> None:
            raise RuntimeError("no specs today")

    registry = load_registry(entry_points=False, extra_plugins=[("broken", Broken()), ("weather", Weather()),
                                                                ("listener", Listener())])
    by_name = {p.name: p for p in registry.plugins}
    assert "no specs today" in (by_name["broken"].error or "")
    assert by_name["listener"].error is None and registry.hook.grpo_on_weather(forecast="sun") == ["heard sun"]


def test_a_registry_without_the_trainer_plugin_reports_rather_than_crashes() -> None:
    import pytest

    from grpo_core.config import config_from_dict
    from grpo_rewards import PluginError
    from grpo_rewards.errors import ConfigError

    bare = load_registry(entry_points=False)
    with pytest.raises(PluginError, match="no loaded plugin specifies grpo_register_generation_backends"):
        bare.get("generation_backends", "transformers")
    with pytest.raises(ConfigError, match=r"data.source: unknown dataset source 'demo' \(registered: none\)"):
        config_from_dict({"model": {"name_or_path": "m"}, "data": {"source": "demo:arithmetic"},
                          "rewards": {"r": {"use": "exact_match"}}}, registry=bare)


def test_the_trainers_hooks_are_known_when_its_plugin_is_left_out(monkeypatch: Any) -> None:
    class StepListener:
        @hookimpl
        def grpo_on_step_end(self, context: Any, step: int) -> str:
            return f"step {step}"

    only_mine = load_registry(only=[], extra_plugins=[("steps", StepListener())])  # as the kit's grpo_registry
    monkeypatch.setenv("GRPO_DISABLE_PLUGINS", "builtin_trainer")
    disabled = load_registry(extra_plugins=[("steps", StepListener())])
    for registry in (only_mine, disabled):
        assert [p.error for p in registry.plugins if p.name == "steps"] == [None]
        assert registry.hook.grpo_on_step_end(context=None, step=2, metrics={}, trainer=None) == ["step 2"]
        assert registry.trainer_backends == {}  # the hooks are known, the left-out plugin registered nothing
        assert any(label.startswith("grpo-toolkit") and "builtin_trainer" in label for label in registry.skipped)
