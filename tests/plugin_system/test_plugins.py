"""Plugin discovery through entry points: isolation of broken plugins, conflicts, listing."""

from __future__ import annotations

import pytest

from grpo_rewards import PluginError, load_registry
from grpo_rewards.command_line import main

GOOD = """
from grpo_rewards import hookimpl, RewardSpec

def make_shout(bonus: float = 1.0):
    '''Rewards completions written in capitals.'''
    def shout(completions, **kw):
        return [bonus if c.isupper() else 0.0 for c in completions]
    return shout

@hookimpl
def grpo_register_rewards(register):
    register(RewardSpec(name="shout", factory=make_shout))
"""


def test_builtins_are_found_through_the_entry_point_group():
    registry = load_registry()
    builtin = next(p for p in registry.plugins if p.name == "builtin_rewards")
    assert builtin.distribution == "grpo-toolkit"
    assert builtin.error is None
    assert "grpo_register_rewards" in builtin.hooks


def test_a_third_party_plugin_registers_a_reward(install_plugin):
    install_plugin("grpo-shout", "1.2.3", "grpo_shout_plugin", GOOD)
    registry = load_registry()
    spec = registry.reward("shout")
    assert spec.plugin == "grpo_shout_plugin"
    assert spec.build(bonus=2.0)(["HI", "hi"]) == [2.0, 0.0]
    info = next(p for p in registry.plugins if p.name == "grpo_shout_plugin")
    assert (info.distribution, info.version, info.registers) == ("grpo-shout", "1.2.3", {"rewards": ["shout"]})


def test_a_broken_plugin_is_reported_and_the_rest_still_load(install_plugin):
    install_plugin("grpo-broken", "0.1", "grpo_broken_plugin", "raise ImportError('no module named fancylib')")
    install_plugin("grpo-shout", "1.2.3", "grpo_shout_plugin", GOOD)
    registry = load_registry(strict=False)
    broken = next(p for p in registry.plugins if p.name == "grpo_broken_plugin")
    assert "fancylib" in broken.error
    assert any("grpo-broken 0.1" in problem and "fancylib" in problem for problem in registry.problems)
    assert "shout" in registry.rewards


def test_strict_mode_makes_a_broken_plugin_fatal(install_plugin):
    install_plugin("grpo-broken", "0.1", "grpo_broken_plugin", "raise RuntimeError('boom')")
    with pytest.raises(PluginError, match=r"grpo-broken 0\.1.*boom"):
        load_registry(strict=True)


def test_a_misspelled_hook_is_caught(install_plugin):
    install_plugin(
        "grpo-typo",
        "2.0",
        "grpo_typo_plugin",
        """
        from grpo_rewards import hookimpl

        @hookimpl
        def grpo_register_reward(register):  # missing the final 's'
            pass
        """,
    )
    registry = load_registry()
    typo = next(p for p in registry.plugins if p.name == "grpo_typo_plugin")
    assert "grpo_register_reward" in typo.error
    assert "unknown hook" in typo.error
    with pytest.raises(PluginError, match="unknown hook"):
        load_registry(strict=True)


def test_a_plugin_whose_registration_raises_is_reported(install_plugin):
    install_plugin("grpo-shout", "1.2.3", "grpo_shout_plugin", GOOD)
    install_plugin(
        "grpo-raiser",
        "0.9",
        "grpo_raiser_plugin",
        """
        from grpo_rewards import hookimpl

        @hookimpl
        def grpo_register_rewards(register):
            raise ValueError("registration went wrong")
        """,
    )
    registry = load_registry()
    assert any("grpo-raiser 0.9" in p and "registration went wrong" in p for p in registry.problems)
    assert "shout" in registry.rewards  # the other plugins still register


def test_two_plugins_registering_one_name_is_an_error_naming_both(install_plugin):
    install_plugin("grpo-shout", "1.2.3", "grpo_shout_plugin", GOOD)
    install_plugin("grpo-shout-fork", "9.9", "grpo_shout_fork", GOOD)
    registry = load_registry()
    with pytest.raises(PluginError) as err:
        registry.reward("shout")
    assert "grpo-shout 1.2.3" in str(err.value) and "grpo-shout-fork 9.9" in str(err.value)
    with pytest.raises(PluginError, match="registered by both"):
        load_registry(strict=True)


def test_unknown_reward_name_suggests_the_closest(install_plugin):
    install_plugin("grpo-shout", "1.2.3", "grpo_shout_plugin", GOOD)
    with pytest.raises(PluginError, match="did you mean 'shout'"):
        load_registry().reward("shoutt")


def test_grpo_plugins_lists_versions_and_registrations(install_plugin, capsys, monkeypatch):
    import grpo_rewards.plugins as plugins

    install_plugin("grpo-shout", "1.2.3", "grpo_shout_plugin", GOOD)
    monkeypatch.setattr(plugins, "_default", None)
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["plugins"]) == 0
    out = capsys.readouterr().out
    assert "grpo_shout_plugin" in out and "1.2.3" in out and "rewards: shout" in out
    assert "builtin_rewards" in out and "grpo-toolkit" in out


def test_strict_plugins_flag_exits_2_with_one_line(install_plugin, capsys, monkeypatch):
    import grpo_rewards.plugins as plugins

    install_plugin("grpo-broken", "0.1", "grpo_broken_plugin", "raise RuntimeError('boom')")
    monkeypatch.setattr(plugins, "_default", None)
    assert main(["--strict-plugins", "plugins"]) == 2
    err = capsys.readouterr().err
    assert "grpo-broken 0.1" in err and "Traceback" not in err
    monkeypatch.setattr(plugins, "_default", None)


def test_lifecycle_hooks_reach_every_plugin(install_plugin):
    install_plugin(
        "grpo-listener",
        "1.0",
        "grpo_listener_plugin",
        """
        from grpo_rewards import hookimpl
        seen = []

        @hookimpl
        def grpo_on_step_end(trainer, step, metrics):
            seen.append((step, metrics["reward"]))
        """,
    )
    registry = load_registry()
    registry.hook.grpo_on_step_end(trainer=None, step=3, metrics={"reward": 1.5})
    import grpo_listener_plugin

    assert grpo_listener_plugin.seen == [(3, 1.5)]
