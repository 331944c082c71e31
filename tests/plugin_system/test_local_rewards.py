"""use = "path/to/file.py:name" and "package.module:name": one-off rewards without a package, validated like
registered ones, running in a worker process like any other."""

from __future__ import annotations

import sys
import textwrap
import types

import pytest

from grpo_rewards import ConfigError, SafeReward, load_rewards

SOURCE = '''
def has_cat(completions, **columns):
    """1 when the completion mentions a cat."""
    return [1.0 if "cat" in c else 0.0 for c in completions]


class Short:
    def __init__(self, max_chars):
        self.max_chars = max_chars

    def __call__(self, completions, **columns):
        return [1.0 if len(c) <= self.max_chars else 0.0 for c in completions]


def make_short(max_chars: int = 5):
    """1 for completions of at most max_chars characters."""
    return Short(max_chars)


def make_bad(weight: float = 1.0):
    return Short(weight)
'''


@pytest.fixture
def local_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "my_local_rewards", raising=False)
    (tmp_path / "my_local_rewards.py").write_text(textwrap.dedent(SOURCE))
    yield tmp_path
    sys.modules.pop("my_local_rewards", None)


def write(folder, text):
    path = folder / "rewards.toml"
    path.write_text(text)
    return str(path)


def close(composed):
    for e in composed.entries:
        e.fn.close()


def test_a_reward_function_in_a_file_next_to_the_config(local_dir, monkeypatch):
    monkeypatch.chdir("/")  # the path is found next to the config file, not in the current folder
    path = write(local_dir, '[rewards.cat]\nuse = "my_local_rewards.py:has_cat"\n\n'
                            '[rewards.short]\nuse = "my_local_rewards.py:make_short"\nmax_chars = 3\n')
    composed = load_rewards(path)
    assert composed.score(["a cat", "dog"]).columns == {"cat": [1.0, 0.0], "short": [0.0, 1.0]}
    assert [e.fn.isolation for e in composed.entries] == ["process", "process"]  # it pickles: a killable worker
    assert composed.entries[0].fn.plugin == "local my_local_rewards.py"
    close(composed)


def test_a_module_path_names_a_factory(tmp_path):
    from grpo_rewards.builtins.xml_count import xml_count

    composed = load_rewards(write(tmp_path, '[rewards.x]\nuse = "grpo_rewards.builtins.xml_count:xml_count"\n'
                                            'mode = "lenient"\n'))
    text = "<reasoning>a</reasoning><answer>4</answer>"
    assert composed.score([text]).columns["x"] == xml_count(mode="lenient")([text])
    close(composed)


@pytest.mark.parametrize("table, message", [
    ('use = "my_local_rewards.py:make_short"\nmax_char = 3', "rewards.a.max_char: unknown parameter of "
                                                              "'my_local_rewards.py:make_short'; did you mean 'max_chars'?"),
    ('use = "my_local_rewards.py:has_cat"\nword = "x"', "rewards.a.word: unknown parameter"),
    ('use = "my_local_rewards.py:has_kat"', "rewards.a.use: my_local_rewards.py has no 'has_kat'; did you mean 'has_cat'?"),
    ('use = "nowhere/missing.py:f"', "rewards.a.use: nowhere/missing.py: no such file"),
    ('use = "my_local_rewards.py:make_bad"', "rewards.a.use: my_local_rewards.py:make_bad has parameter(s) weight, "
                                             "reserved for the config's own keys"),
    ('use = "no_such_package_xyz.mod:f"', "rewards.a.use: cannot import module 'no_such_package_xyz.mod'"),
])
def test_local_rewards_are_validated_like_registered_ones(local_dir, table, message):
    path = write(local_dir, f"[rewards.a]\n{table}\n")
    with pytest.raises(ConfigError) as err:
        load_rewards(path)
    (line,) = str(err.value).splitlines()
    assert line.startswith(f"{path}:") and message in line


def test_a_syntax_error_in_the_file_names_its_line(local_dir):
    (local_dir / "broken_rewards.py").write_text("def f(completions):\n    return [\n")
    path = write(local_dir, '[rewards.a]\nuse = "broken_rewards.py:f"\n')
    with pytest.raises(ConfigError, match=r"broken_rewards.py:\d+: "):
        load_rewards(path)
    sys.modules.pop("broken_rewards", None)


def ghost_reward(completions, **kw):
    return [2.0] * len(completions)


def test_a_reward_its_worker_cannot_load_falls_back_to_a_thread(monkeypatch, caplog):
    ghost = types.ModuleType("ghost_module_only_here")
    fn = types.FunctionType(ghost_reward.__code__, {}, "ghost_reward")
    fn.__module__, fn.__qualname__ = ghost.__name__, "ghost_reward"
    ghost.ghost_reward = fn
    monkeypatch.setitem(sys.modules, ghost.__name__, ghost)  # pickles here; a spawned child cannot import it
    safe = SafeReward(fn, "ghost")
    assert safe.isolation == "process"
    assert safe(["a", "b"]) == [2.0, 2.0]
    assert safe.isolation == "thread" and "could not be loaded in a worker process" in caplog.text
