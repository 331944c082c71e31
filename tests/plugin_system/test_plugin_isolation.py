"""Plugins are isolated at every call: hooks run one implementation at a time, a raising one is reported and
skipped; malformed registrations are refused with a clear message, all or nothing per plugin."""

from __future__ import annotations

import logging

import pytest

from grpo_rewards import PluginError, load_registry
from grpo_rewards.command_line import main

from .test_plugins import GOOD as SHOUT  # the same throw-away plugin


@pytest.fixture
def fresh_default(monkeypatch):
    import grpo_rewards.plugins as plugins

    monkeypatch.setattr(plugins, "_default", None)
    monkeypatch.setenv("COLUMNS", "200")
    yield
    plugins._default = None


def problem_of(registry, needle):
    return [p for p in registry.problems if needle in p]


# ---- hooks called one implementation at a time ----


def test_a_plugin_whose_command_hook_raises_does_not_break_grpo(install_plugin, fresh_default, capsys):
    install_plugin("grpo-badcli", "0.1", "grpo_badcli_plugin", """
        from grpo_rewards import hookimpl

        @hookimpl
        def grpo_register_commands(subparsers):
            raise RuntimeError("cli hook exploded")
        """)
    assert main(["plugins"]) == 0
    captured = capsys.readouterr()
    assert "builtin_rewards" in captured.out
    assert "grpo-badcli 0.1" in captured.err and "cli hook exploded" in captured.err


def test_a_plugin_adding_an_existing_command_name_does_not_take_it_over(install_plugin, fresh_default, capsys):
    install_plugin("grpo-clash", "0.1", "aaa_clash_plugin", """
        from grpo_rewards import hookimpl

        @hookimpl
        def grpo_register_commands(subparsers):
            p = subparsers.add_parser("plugins")
            p.set_defaults(func=lambda args: 42)
        """)
    assert main(["plugins"]) == 0  # the built-in command, not the plugin's
    err = capsys.readouterr().err
    assert "grpo-clash 0.1" in err and "conflicting subparser" in err


def test_a_raising_lifecycle_hook_is_reported_once_and_the_others_still_run(install_plugin, caplog):
    install_plugin("grpo-listener", "1.0", "grpo_listener_plugin", """
        from grpo_rewards import hookimpl
        seen = []

        @hookimpl
        def grpo_on_step_end(trainer, step, metrics):
            seen.append(step)
        """)
    install_plugin("grpo-crasher", "1.0", "grpo_crasher_plugin", """
        from grpo_rewards import hookimpl

        @hookimpl
        def grpo_on_step_end(trainer, step, metrics):
            raise KeyError("missing metric")
        """)
    registry = load_registry()
    with caplog.at_level(logging.WARNING, logger="grpo.plugins"):
        for step in (1, 2, 3):
            registry.hook.grpo_on_step_end(trainer=None, step=step, metrics={})
    import grpo_listener_plugin

    assert grpo_listener_plugin.seen == [1, 2, 3]
    assert registry.hook_failures == {("grpo_crasher_plugin", "grpo_on_step_end"): 3}
    assert len(problem_of(registry, "missing metric")) == 1
    assert sum("missing metric" in r.getMessage() for r in caplog.records) == 1
    assert "grpo_crasher_plugin.py:" in problem_of(registry, "missing metric")[0]  # where it raised
    with pytest.raises(PluginError, match="grpo-crasher 1.0.*missing metric"):
        load_registry(strict=True).hook.grpo_on_step_end(trainer=None, step=1, metrics={})


# ---- registrations checked, all or nothing ----


@pytest.mark.parametrize("body, message", [
    ('register(RewardSpec(name="r", factory=3))', "factory that is not callable"),
    ('register(VerifierSpec(name="v", factory=lambda: None))', "a VerifierSpec belongs in grpo_register_verifiers"),
    ('register("r", lambda: None)', "takes register(RewardSpec(...)), got str"),
    ('register(RewardSpec(name="r", factory=lambda timeout=1.0: None))', "parameter(s) timeout, reserved"),
    ('register(RewardSpec(name="r", factory=lambda weight=1.0, use="": None))', "parameter(s) use, weight, reserved"),
    ('register(RewardSpec(name="a:b", factory=lambda: None))', "without ':'"),
])
def test_malformed_reward_registrations_are_refused(install_plugin, body, message):
    install_plugin("grpo-malformed", "0.2", "grpo_malformed_plugin", f"""
        from grpo_rewards import hookimpl, RewardSpec, VerifierSpec

        @hookimpl
        def grpo_register_rewards(register):
            {body}
        """)
    registry = load_registry()
    info = next(p for p in registry.plugins if p.name == "grpo_malformed_plugin")
    assert message in info.error
    assert "r" not in registry.rewards and "a:b" not in registry.rewards
    with pytest.raises(PluginError, match="grpo-malformed 0.2"):
        load_registry(strict=True)


def test_a_verifier_with_a_reward_key_as_parameter_is_refused(install_plugin):
    install_plugin("grpo-vbad", "0.1", "grpo_vbad_plugin", """
        from grpo_rewards import hookimpl, VerifierSpec

        def make(value: float = 1.0):
            return lambda answer, reference: None

        @hookimpl
        def grpo_register_verifiers(register):
            register(VerifierSpec(name="vbad", factory=make))
        """)
    info = next(p for p in load_registry().plugins if p.name == "grpo_vbad_plugin")
    assert "parameter(s) value, reserved" in info.error


def test_a_hook_wrapper_is_refused(install_plugin):
    install_plugin("grpo-wrapper", "0.1", "grpo_wrapper_plugin", """
        from grpo_rewards import hookimpl

        @hookimpl(hookwrapper=True)
        def grpo_on_step_end(trainer, step, metrics):
            yield
        """)
    registry = load_registry()
    info = next(p for p in registry.plugins if p.name == "grpo_wrapper_plugin")
    assert "hook wrapper" in info.error
    registry.hook.grpo_on_step_end(trainer=None, step=1, metrics={})  # not registered: nothing to call


def test_a_hook_named_function_without_hookimpl_gets_a_warning(install_plugin):
    install_plugin("grpo-unmarked", "0.1", "grpo_unmarked_plugin", """
        def grpo_register_rewards(register):  # forgot @hookimpl
            pass
        """)
    registry = load_registry()
    info = next(p for p in registry.plugins if p.name == "grpo_unmarked_plugin")
    assert info.error is None
    assert info.warnings == ["grpo_register_rewards is not marked @hookimpl, so it is never called "
                             "(add `@grpo_rewards.hookimpl`)"]
    assert problem_of(registry, "grpo-unmarked 0.1")


def test_a_plugin_failing_halfway_loses_all_its_registrations_and_hooks(install_plugin):
    install_plugin("grpo-half", "0.3", "grpo_half_plugin", """
        from grpo_rewards import hookimpl, RewardSpec
        calls = []

        @hookimpl
        def grpo_register_rewards(register):
            register(RewardSpec(name="half_reward", factory=lambda: None))

        @hookimpl
        def grpo_register_verifiers(register):
            raise RuntimeError("verifiers broke")

        @hookimpl
        def grpo_on_step_end(trainer, step, metrics):
            calls.append(step)
        """)
    registry = load_registry()
    info = next(p for p in registry.plugins if p.name == "grpo_half_plugin")
    assert "verifiers broke" in info.error and info.registers == {}
    assert "half_reward" not in registry.rewards
    assert not any(n == "half_reward" for _, _, n in registry.qualified)
    registry.hook.grpo_on_step_end(trainer=None, step=1, metrics={})
    import grpo_half_plugin

    assert grpo_half_plugin.calls == []


def test_a_misspelled_hook_gets_a_did_you_mean(install_plugin):
    install_plugin("grpo-typo", "2.0", "grpo_typo_plugin", """
        from grpo_rewards import hookimpl

        @hookimpl
        def grpo_register_reward(register):
            pass
        """)
    info = next(p for p in load_registry().plugins if p.name == "grpo_typo_plugin")
    assert "did you mean 'grpo_register_rewards'?" in info.error


# ---- name clashes: qualified names, choosing plugins ----


def test_qualified_names_resolve_a_clash(install_plugin):
    install_plugin("grpo-shout", "1.2.3", "grpo_shout_plugin", SHOUT)
    install_plugin("grpo-shout-fork", "9.9", "grpo_shout_fork", SHOUT)
    registry = load_registry()
    with pytest.raises(PluginError, match='name one of them \\("grpo-shout-fork:shout" or "grpo-shout:shout"\\)'):
        registry.reward("shout")
    assert registry.reward("grpo-shout:shout").plugin == "grpo_shout_plugin"
    assert registry.reward("GRPO_shout_fork:shout").plugin == "grpo_shout_fork"
    assert registry.reward("grpo-shout-fork:shout").plugin == "grpo_shout_fork"
    with pytest.raises(PluginError, match="unknown reward 'grpo-shout:shoot'; did you mean 'grpo-shout:shout'"):
        registry.reward("grpo-shout:shoot")


def test_a_plugin_shadowing_a_builtin_leaves_it_usable_by_its_qualified_name(install_plugin, tmp_path):
    from grpo_rewards import load_rewards

    install_plugin("grpo-imposter", "0.1", "grpo_imposter_plugin", SHOUT.replace('name="shout"', 'name="exact_match"'))
    registry = load_registry()
    path = tmp_path / "r.toml"
    path.write_text('[rewards.correct]\nuse = "grpo-toolkit:exact_match"\n\n'
                    '[rewards.theirs]\nuse = "grpo-imposter:exact_match"\nbonus = 2.0\n')
    composed = load_rewards(str(path), registry)
    assert composed.score(["<answer>4</answer>"], answer=["4"]).columns == {"correct": [2.0], "theirs": [0.0]}
    for e in composed.entries:
        e.fn.close()


def test_grpo_load_plugins_loads_only_those_plus_the_builtins(install_plugin, monkeypatch):
    install_plugin("grpo-shout", "1.2.3", "grpo_shout_plugin", SHOUT)
    install_plugin("grpo-other", "1.0", "grpo_other_plugin", SHOUT.replace('"shout"', '"other"'))
    monkeypatch.setenv("GRPO_LOAD_PLUGINS", "grpo_shout, not-installed")
    registry = load_registry()
    assert "shout" in registry.rewards and "other" not in registry.rewards and "exact_match" in registry.rewards
    assert any("grpo-other 1.0" in s for s in registry.skipped)
    assert problem_of(registry, "GRPO_LOAD_PLUGINS names 'not-installed'")
    monkeypatch.setenv("GRPO_LOAD_PLUGINS", "")
    registry = load_registry()
    assert "shout" not in registry.rewards and "exact_match" in registry.rewards
    assert {p.distribution for p in registry.plugins} == {"grpo-toolkit"}


def test_grpo_disable_plugins_skips_plugins_and_builtin_entry_points(install_plugin, monkeypatch):
    install_plugin("grpo-shout", "1.2.3", "grpo_shout_plugin", SHOUT)
    monkeypatch.setenv("GRPO_DISABLE_PLUGINS", "GRPO-Shout,builtin_sandbox")
    registry = load_registry()
    assert "shout" not in registry.rewards and "code_execution" not in registry.rewards
    assert "exact_match" in registry.rewards


def test_a_broken_plugin_can_be_switched_off_to_run_grpo(install_plugin, fresh_default, monkeypatch, capsys):
    install_plugin("grpo-broken", "0.1", "grpo_broken_plugin", "raise RuntimeError('boom')")
    assert main(["--strict-plugins", "plugins"]) == 2
    monkeypatch.setenv("GRPO_DISABLE_PLUGINS", "grpo-broken")
    import grpo_rewards.plugins as plugins

    plugins._default = None
    assert main(["--strict-plugins", "plugins"]) == 0
