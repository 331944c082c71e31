"""[rewards.<alias>] tables: every problem at once, file:line: key: message, did-you-mean, exit 2."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest

from grpo_rewards import ConfigError, RewardSpec, hookimpl, load_registry, load_rewards
from grpo_rewards.tomlfile import locate_keys


def make_contains(*, word: str, value: float = 1.0, ignore_case: bool = False):
    """Scores `value` when the completion contains `word`."""

    def contains(completions, **kw):
        if ignore_case:
            return [value if word.lower() in c.lower() else 0.0 for c in completions]
        return [value if word in c else 0.0 for c in completions]

    return contains


def make_length(*, max_chars: int = 10):
    def length(completions, **kw):
        return [1.0 if len(c) <= max_chars else 0.0 for c in completions]

    return length


@pytest.fixture
def registry():
    plugin = types.SimpleNamespace(
        grpo_register_rewards=hookimpl(
            lambda register: [
                register(RewardSpec(name="contains", factory=make_contains)),
                register(RewardSpec(name="length", factory=make_length)),
            ]
        )
    )
    return load_registry(entry_points=False, extra_plugins=[("testplugin", plugin)])


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "rewards.toml"
    path.write_text(text)
    return str(path)


def test_same_reward_twice_with_different_parameters(tmp_path, registry):
    path = write(
        tmp_path,
        """
[rewards]
on_error = "zero"

[rewards.has_cat]
use = "contains"
word = "cat"
weight = 2.0

[rewards.has_dog]
use = "contains"
word = "dog"
ignore_case = true
""",
    )
    composed = load_rewards(path, registry)
    assert composed.aliases == ["has_cat", "has_dog"]
    scores = composed.score(["a cat", "a DOG", "cat and dog"])
    assert scores.columns == {"has_cat": [1.0, 0.0, 1.0], "has_dog": [0.0, 1.0, 1.0]}
    assert scores.total == [2.0, 1.0, 3.0]
    assert composed.entries[0].fn.on_error == "zero"


def test_every_problem_is_reported_with_its_line(tmp_path, registry):
    path = write(
        tmp_path,
        """[rewards.a]
use = "contians"

[rewards.b]
use = "contains"
wrod = "x"

[rewards.c]
use = "length"
max_chars = "ten"
weight = "heavy"

[rewards.d]
use = "contains"
""",
    )
    with pytest.raises(ConfigError) as err:
        load_rewards(path, registry)
    lines = str(err.value).splitlines()
    assert f"{path}:2: rewards.a.use: unknown reward 'contians'; did you mean 'contains'?" in lines
    assert f"{path}:6: rewards.b.wrod: unknown parameter of 'contains'; did you mean 'word'?" in lines
    assert any(line.startswith(f"{path}:10: rewards.c.max_chars: expected int, got str") for line in lines)
    assert any(line.startswith(f"{path}:11: rewards.c.weight: must be a number") for line in lines)
    assert f"{path}:13: rewards.d: missing required parameter 'word' of 'contains'" in lines
    assert len(lines) == 6  # b is also missing 'word'


def test_toml_syntax_error_names_file_and_line(tmp_path, registry):
    path = write(tmp_path, '[rewards.a]\nuse = "contains\n')
    with pytest.raises(ConfigError, match=rf"{path}:2: invalid TOML"):
        load_rewards(path, registry)


def test_no_rewards_is_an_error(tmp_path, registry):
    path = write(tmp_path, "[model]\nname = 'x'\n")
    with pytest.raises(ConfigError, match="no rewards configured"):
        load_rewards(path, registry)


def test_locate_keys_handles_dotted_and_quoted_keys():
    lines = locate_keys('a = 1\n[rewards."my alias"]\nuse = "x"\ntext = """\nfoo = 1\n"""\nweight = 2\n')
    assert lines[("a",)] == 1
    assert lines[("rewards", "my alias")] == 2
    assert lines[("rewards", "my alias", "use")] == 3
    assert lines[("rewards", "my alias", "weight")] == 7
    assert ("rewards", "my alias", "foo") not in lines


def test_cli_exits_2_without_traceback(tmp_path):
    import subprocess

    path = write(tmp_path, '[rewards.a]\nuse = "no_such_reward"\n')
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"completion": "x"}) + "\n")
    proc = subprocess.run(
        [sys.executable, "-m", "grpo_rewards", "rewards", "score", path, "--input", str(rows)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert f"{path}:2: rewards.a.use: unknown reward 'no_such_reward'" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("weight", ["inf", "-inf", "nan"])
def test_non_finite_weights_are_refused_at_validation(tmp_path, registry, weight):
    path = write(tmp_path, f'[rewards.a]\nuse = "contains"\nword = "x"\nweight = {weight}\n')
    with pytest.raises(ConfigError) as err:
        load_rewards(path, registry)
    assert str(err.value).splitlines() == [f"{path}:4: rewards.a.weight: must be a finite number, got {float(weight)!r}"]


def test_an_alias_named_total_is_refused(tmp_path, registry):
    path = write(tmp_path, '[rewards.total]\nuse = "contains"\nword = "x"\n')
    with pytest.raises(ConfigError) as err:
        load_rewards(path, registry)
    assert str(err.value).splitlines() == [
        f"{path}:1: rewards.total: the alias 'total' is reserved for the weighted sum of the rewards; pick another name"]


def test_timeout_and_failure_limit_reach_the_wrapper_and_are_checked(tmp_path, registry):
    path = write(tmp_path, '[rewards]\ntimeout = 12\nmax_consecutive_failures = 0\n\n'
                           '[rewards.a]\nuse = "contains"\nword = "x"\n\n'
                           '[rewards.b]\nuse = "contains"\nword = "y"\nmax_consecutive_failures = 5\n')
    a, b = (e.fn for e in load_rewards(path, registry).entries)
    assert (a.timeout, a.max_consecutive_failures, b.max_consecutive_failures) == (12.0, 0, 5)
    bad = write(tmp_path, '[rewards.a]\nuse = "contains"\nword = "x"\ntimeout = inf\nmax_consecutive_failures = -1\n')
    with pytest.raises(ConfigError) as err:
        load_rewards(bad, registry)
    assert str(err.value).splitlines() == [
        f"{bad}:4: rewards.a.timeout: must be a positive, finite number of seconds, got inf",
        f"{bad}:5: rewards.a.max_consecutive_failures: must be a whole number >= 0 (0: never stop), got -1",
    ]
