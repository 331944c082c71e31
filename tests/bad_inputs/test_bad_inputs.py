"""The bad-input corpus: every case in ``cases/*.toml`` runs the real ``grpo`` command line on files a user
might get wrong and checks the promise of the README: the expected exit status, the expected words in the
message, no traceback, a ``file:line:`` that points at the line holding the key it names, and no file that
existed before changed (a failing command creates nothing either).

A case (one ``[[case]]`` table)::

    name = "grpo-learning-rate-nan"        # unique
    base = "run"                           # optional: write run.toml from TEMPLATE below, and rows.jsonl
    model = "dtype = 'x'"                  # base "run" only: lines added to [model], [data], [rewards.fmt],
    data = "..."                           #   and after everything (extra = "[grpo]\\nbeta = nan")
    files = {"rows.jsonl" = "..."}         # more files (text); raw_files: text written as latin-1 bytes;
    dirs = ["a"]; links = {"b" = "a"}      #   folders; symbolic links (name = target)
    argv = ["config", "validate", "run.toml"]
    exit = 2                               # default 2
    expect = ["run.toml:", "grpo.beta: must be a finite number"]   # each must appear in stderr (+ stdout)
    absent = ["warning:"]                  # optional: none may appear in stderr (+ stdout)
    env = {HF_HUB_OFFLINE = "1"}           # optional environment

``{tiny}`` in a file or argument is a tiny saved Llama (built once, only when a case uses it).
Commands run in the case's folder, so paths in messages are the relative paths given.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest

from grpo_rewards.command_line import main

HERE = Path(__file__).parent
TEMPLATE = """\
[model]
name_or_path = "org/tiny-model"
{model}
[data]
source = "rows.jsonl"
{data}
[rewards.fmt]
use = "xml_count"
{rewards}
{extra}
"""
ROWS = "".join(f'{{"prompt": "What is {i} + {i}?", "answer": "{2 * i}"}}\n' for i in range(1, 9))


def _cases() -> list[dict[str, Any]]:
    cases = []
    for path in sorted((HERE / "cases").glob("*.toml")):
        for case in tomllib.loads(path.read_text(encoding="utf-8"))["case"]:
            cases.append({**case, "_file": path.name})
    names = [c["name"] for c in cases]
    assert len(names) == len(set(names)), sorted({n for n in names if names.count(n) > 1})
    return cases


CASES = _cases()


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import importlib.util

    spec = importlib.util.spec_from_file_location("_core_conftest", HERE.parent / "core" / "conftest.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = tmp_path_factory.mktemp("tiny_llama")
    return module.build_tiny_model(out, module.build_tokenizer())


def _snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            + (f" -> {p.readlink()}" if p.is_symlink() else "") for p in sorted(folder.rglob("*")) if p.is_file()}


_WHERE = re.compile(r"^([^\s:]+\.toml):(\d+): ([A-Za-z0-9_.\-\"']+): ")


def _check_lines_point_at_keys(folder: Path, err: str) -> None:
    """``file.toml:N: a.b.c: ...`` -> line N of the file names ``c`` (or, for a table, its header)."""
    for line in err.splitlines():
        m = _WHERE.match(line)
        if not m or not (folder / m.group(1)).is_file():
            continue
        text = (folder / m.group(1)).read_text(encoding="utf-8", errors="replace").splitlines()
        number, key = int(m.group(2)), m.group(3)
        assert 1 <= number <= len(text), line
        last = key.split(".")[-1]
        assert last in text[number - 1] or key in text[number - 1], f"{line!r} -> line {number}: {text[number - 1]!r}"


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_bad_input(case: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                   capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest) -> None:
    folder = tmp_path / "case"
    folder.mkdir()
    subs: dict[str, str] = {}
    text = repr(case)
    if "{tiny}" in text:
        subs["tiny"] = str(request.getfixturevalue("tiny_model"))

    def fill(s: str) -> str:
        for k, v in subs.items():
            s = s.replace("{" + k + "}", v)
        return s

    files = dict(case.get("files", {}))
    if case.get("base") == "run":
        files.setdefault("run.toml", TEMPLATE.format(**{k: case.get(k, "") for k in ("model", "data", "rewards", "extra")}))
        files.setdefault("rows.jsonl", ROWS)
    for name, content in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(fill(content), encoding="utf-8")
    for name, content in case.get("raw_files", {}).items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(fill(content).encode("latin-1"))
    for name in case.get("dirs", []):
        (folder / name).mkdir(parents=True, exist_ok=True)
    for name, target in case.get("links", {}).items():
        (folder / name).symlink_to(target)
    for key, value in case.get("env", {}).items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(folder)
    before = _snapshot(folder)

    try:
        code = main([fill(a) for a in case["argv"]])
    except SystemExit as exc:  # argparse's own usage errors
        code = exc.code if isinstance(exc.code, int) else 2
    out, err = capsys.readouterr()

    assert code == case.get("exit", 2), f"exit {code}\nstderr:\n{err}\nstdout:\n{out[-2000:]}"
    assert "Traceback" not in err and "Traceback" not in out, err
    for fragment in case.get("expect", []):
        assert fill(fragment) in err + out, f"{fragment!r} not in:\n{err}"
    for fragment in case.get("absent", []):
        assert fill(fragment) not in err + out, f"{fragment!r} in:\n{err}"
    _check_lines_point_at_keys(folder, err)
    after = _snapshot(folder)
    if code == 0:
        changed = [f for f in before if after.get(f) != before[f]]
        assert not changed, f"pre-existing files changed or removed: {changed}"
    else:
        assert after == before, f"a failing command touched files: {sorted(set(after) ^ set(before))} " \
                                f"{[f for f in before if after.get(f) != before[f]]}"
