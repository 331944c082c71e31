"""``grpo new reward NAME``: the package it writes installs without network, its own tests pass as generated,
and ``grpo rewards list`` shows it next to the built-ins; bad names and existing folders are refused.

The package goes into a throwaway virtual environment that sees this one's packages (a ``.pth`` line), so
the project's environment is left as it was. The time from ``grpo new reward`` to passing tests is printed
and recorded as the test property ``new_to_passing_seconds``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest

from grpo_rewards.scaffold import new_reward_package, package_names, render


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "GRPO_"))}
    env["COLUMNS"] = "250"  # rich wraps tables at the terminal's width
    return env


def _run(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True, env=_env(), timeout=600)


def _throwaway_venv(path: Path) -> Path:
    """A virtual environment without pip that imports this environment's packages (pip and setuptools too)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    python = path / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    ours = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    Path(purelib, "_grpo_project.pth").write_text(
        "".join(f"import site; site.addsitedir({p!r})\n" for p in ours), encoding="utf-8")
    return python


@pytest.mark.slow
@pytest.mark.parametrize("group", [False, True], ids=["reward", "group_reward"])
def test_generate_install_offline_and_its_tests_pass(tmp_path: Path, record_property, group: bool) -> None:  # type: ignore[no-untyped-def]
    python = _throwaway_venv(tmp_path / "venv")
    start = time.monotonic()
    made = _run(python, "-m", "grpo_rewards", "new", "reward", "demo-reward", *(["--group"] if group else []),
                cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    pkg = tmp_path / "demo-reward"
    installed = _run(python, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-build-isolation",
                     pkg, cwd=tmp_path)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    tested = _run(python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "demo-reward", cwd=tmp_path)
    took = time.monotonic() - start
    assert tested.returncode == 0, tested.stdout[-4000:] + tested.stderr[-2000:]
    assert " passed" in tested.stdout and "skipped" not in tested.stdout, tested.stdout[-2000:]
    record_property("new_to_passing_seconds", round(took, 1))
    print(f"grpo new reward -> pip install -> passing tests: {took:.1f} s ({tested.stdout.strip().splitlines()[-1]})")

    listed = _run(python, "-m", "grpo_rewards", "rewards", "list", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    for name in ("demo_reward", "verify:demo_reward", "exact_match", "verify:math"):
        assert name in listed.stdout, name
    checked = _run(python, "-m", "grpo_rewards", "rewards", "check", "demo_reward", cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr

    # the project's own environment never saw the package
    assert _run(sys.executable, "-c", "import demo_reward", cwd=tmp_path).returncode != 0


def test_the_package_has_every_part(tmp_path: Path) -> None:
    target = new_reward_package("grpo-reward-units", tmp_path)
    files = {p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file()}
    assert files == {
        "pyproject.toml", "README.md", ".gitignore", ".github/workflows/test.yml",
        "grpo_reward_units/__init__.py", "grpo_reward_units/plugin.py", "grpo_reward_units/rewards.py",
        "grpo_reward_units/verifiers.py", "tests/test_grpo_reward_units.py",
    }
    import tomllib

    meta = tomllib.loads((target / "pyproject.toml").read_text())
    assert meta["project"]["name"] == "grpo-reward-units"
    assert meta["project"]["entry-points"]["grpo"] == {"grpo_reward_units": "grpo_reward_units.plugin"}
    assert meta["tool"]["pytest"]["ini_options"]["grpo_plugin"] == "grpo-reward-units"
    workflow = (target / ".github/workflows/test.yml").read_text()
    assert "${{ matrix.python-version }}" in workflow and "grpo rewards check grpo_reward_units" in workflow
    for path in target.rglob("*.py"):  # every rendered module is valid Python
        compile(path.read_text(), str(path), "exec")


def test_the_templates_ship_with_the_package() -> None:
    """pyproject.toml's package data covers every template file (a wheel without them cannot create packages)."""
    import fnmatch
    import tomllib

    root = Path(__file__).resolve().parents[2]
    globs = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["grpo_rewards"]
    templates = root / "grpo_rewards" / "templates"
    for path in templates.rglob("*.tmpl"):
        rel = path.relative_to(root / "grpo_rewards").as_posix()
        assert any(fnmatch.fnmatch(rel, g.replace("**/", "*")) for g in globs), rel
    assert len(render(package_names("x-y"))) == len(list((templates / "reward_package").rglob("*.tmpl")))
    group = render(package_names("x-y"), group=True)
    assert set(group) == set(render(package_names("x-y")))  # the group files replace files of the same path
    assert "GroupReward" in group["x_y/rewards.py"] and "GroupRewardConformance" in group["tests/test_x_y.py"]


@pytest.mark.parametrize(("name", "why"), [
    ("bad name", "not a valid distribution name"),
    ("demo-", "not a valid distribution name"),
    ("9lives", "Python cannot import"),
    ("json", "already importable"),
    ("grpo_rewards", "already importable"),
])
def test_unusable_names_are_refused_in_one_line(tmp_path: Path, name: str, why: str) -> None:
    run = _run(sys.executable, "-m", "grpo_rewards", "new", "reward", name, cwd=tmp_path)
    assert run.returncode == 2
    assert why in run.stderr and len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert list(tmp_path.iterdir()) == []


def test_an_existing_folder_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    target = new_reward_package("demo-reward", tmp_path)
    readme = target / "README.md"
    readme.write_text("my own notes\n")
    before = sorted(p.relative_to(target) for p in target.rglob("*"))
    run = _run(sys.executable, "-m", "grpo_rewards", "new", "reward", "demo-reward", cwd=tmp_path)
    assert run.returncode == 2
    assert run.stderr.strip() == "demo-reward: already exists; pick another NAME or folder (nothing was written)"
    assert readme.read_text() == "my own notes\n"
    assert sorted(p.relative_to(target) for p in target.rglob("*")) == before
    (tmp_path / "plain-file").write_text("x")
    run = _run(sys.executable, "-m", "grpo_rewards", "new", "reward", "plain-file", cwd=tmp_path)
    assert run.returncode == 2 and (tmp_path / "plain-file").read_text() == "x"
