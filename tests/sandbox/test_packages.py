"""Programs get the standard library and an allow-list of packages, never the trainer's site-packages: an
installed package carrying a problem's expected outputs can be neither imported nor read, in every profile,
from Python and C, through the pool, the code reward and the command line; a package on the allow-list can."""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile

import pytest

from grpo_rewards import reward
from grpo_rewards.command_line import main
from grpo_rewards.sandbox.pool import LocalSandbox, compilers
from grpo_rewards.sandbox.program import Program

from .conftest import FAST, PROFILE_OPTIONS, needs_default
from .hostile_state import ANSWER, C_THIEF, outcome, thief

pytestmark = needs_default

@pytest.fixture(scope="module")
def answers_site():
    """A site-packages folder on this process's sys.path holding a dataset package with the expected outputs
    (a package folder with a data file) and a single-module one; readable by every uid."""
    top = tempfile.mkdtemp(prefix="grpo-site-")
    os.chmod(top, 0o755)
    site = os.path.join(top, "site-packages")
    os.makedirs(os.path.join(site, "answers_pkg"))
    with open(os.path.join(site, "answers_pkg", "__init__.py"), "w") as fh:
        fh.write(f"EXPECTED = {ANSWER!r}\n")
    with open(os.path.join(site, "answers_pkg", "expected.json"), "w") as fh:
        json.dump({"outputs": [ANSWER]}, fh)
    with open(os.path.join(site, "answers_mod.py"), "w") as fh:
        fh.write(f"EXPECTED = {ANSWER!r}\n")
    for root, dirs, files in os.walk(top):
        for name in dirs:
            os.chmod(os.path.join(root, name), 0o755)
        for name in files:
            os.chmod(os.path.join(root, name), 0o644)
    sys.path.append(site)
    try:
        yield site
    finally:
        sys.path.remove(site)
        for name in ("answers_pkg", "answers_mod"):
            sys.modules.pop(name, None)
        shutil.rmtree(top)


@pytest.fixture(scope="module", params=list(PROFILE_OPTIONS))
def profile(request):
    return request.param


def test_no_program_reaches_a_package_off_the_allow_list(answers_site, profile):
    with LocalSandbox(slots=1, limits=FAST, **PROFILE_OPTIONS[profile]) as box:
        r = box.run_one(Program(thief(answers_site)))
        assert r.status == "ok", r.stderr[-500:]
        got = outcome(r.stdout)
        assert ANSWER not in r.stdout, r.stdout
        assert got.pop("stdlib") == "reached"
        assert len(got) == 8 and set(got.values()) == {"refused"}, got
        if "c" in compilers():
            path = os.path.join(answers_site, "answers_pkg", "expected.json")
            c = box.run_one(Program(C_THIEF.replace("__PATH__", path), "", "c", FAST.with_(cpu_seconds=10.0,
                                                                                              wall_seconds=30.0)))
            assert (c.status, c.stdout) == ("ok", "refused\n"), (c.status, c.stdout, c.error)


def test_a_package_on_the_allow_list_is_importable_and_nothing_beside_it(answers_site, profile):
    with LocalSandbox(slots=1, limits=FAST, packages=["answers_pkg"], **PROFILE_OPTIONS[profile]) as box:
        r = box.run_one(Program(thief(answers_site)))
        assert r.status == "ok", r.stderr[-500:]
        got = outcome(r.stdout)
        assert got["import_pkg"] == "reached" and got["stdlib"] == "reached", got
        others = {k: v for k, v in got.items() if k not in ("import_pkg", "stdlib", "path_append", "read_data")}
        assert set(others.values()) == {"refused"}, got


def test_an_unknown_package_is_a_clear_error():
    from grpo_rewards.sandbox.packages import PackageError

    with pytest.raises(PackageError, match="no_such_package_q"):
        LocalSandbox(slots=1, packages=["no_such_package_q"])
    with pytest.raises(ValueError, match="no_such_package_q"):
        reward("code_execution", packages=["no_such_package_q"])


def test_the_code_reward_cannot_score_from_a_dataset_package(answers_site):
    tests = json.dumps({"language": "python", "test_cases": [{"input": "", "output": ANSWER + "\n"}]})
    cheat = "```python\nimport answers_pkg\nprint(answers_pkg.EXPECTED)\n```"
    reader = ("```python\nimport json\nprint(json.load(open(" + repr(os.path.join(answers_site, "answers_pkg",
                                                                                 "expected.json")) +
              "))['outputs'][0])\n```")
    honest = f"```python\nprint({ANSWER!r})\n```"
    scores = reward("code_execution", cpu_seconds=2.0, wall_seconds=4.0)([cheat, reader, honest],
                                                                         verification_info=[tests] * 3)
    assert scores == [0.0, 0.0, 1.0]
    allowed = reward("code_execution", cpu_seconds=2.0, wall_seconds=4.0, packages=["answers_pkg"])
    assert allowed([cheat], verification_info=[tests]) == [1.0]  # what the allow-list names, programs get


def test_the_command_line_runs_programs_without_the_packages(answers_site, tmp_path, capsys):
    prog = tmp_path / "p.py"
    prog.write_text("import answers_pkg\nprint(answers_pkg.EXPECTED)\n")
    assert main(["sandbox", "run", str(prog), "--json"]) == 1
    result = json.loads(capsys.readouterr().out)
    assert result["status"] == "runtime_error" and "ModuleNotFoundError" in result["stderr"], result
    assert main(["sandbox", "run", str(prog), "--json", "--package", "answers_pkg"]) == 0
    assert json.loads(capsys.readouterr().out)["stdout"] == ANSWER + "\n"
    assert main(["sandbox", "run", str(prog), "--package", "no_such_package_q"]) == 2
    assert "no_such_package_q" in capsys.readouterr().err
    config = tmp_path / "rewards.toml"
    config.write_text('[rewards.tests]\nuse = "code_execution"\ncpu_seconds = 2.0\nwall_seconds = 4.0\n')
    tests = {"language": "python", "test_cases": [{"input": "", "output": ANSWER + "\n"}]}
    data = tmp_path / "rows.jsonl"
    data.write_text(json.dumps({"completion": "```python\nimport answers_pkg\nprint(answers_pkg.EXPECTED)\n```",
                                "verification_info": tests}) + "\n")
    out = tmp_path / "scored.jsonl"
    assert main(["rewards", "score", str(config), "--input", str(data), "--output", str(out)]) == 0
    assert json.loads(out.read_text())["tests"] == 0.0
