"""ARCHITECTURE.md stays true where a program can tell: its length, the folders it maps, and the invariants it
lists that are not checked elsewhere (run-folder names, module length, the import-linter contracts)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "ARCHITECTURE.md"
# a run folder's names (run_folder/layout.py): spelled nowhere else in the trainer's code
RUN_FOLDER_NAMES = {"metrics.jsonl", "samples.jsonl", "curves.png", "checkpoints"}
RUN_FOLDER_SUBDIRS = {"model", "merged"}  # as ``run_dir / "model"``
LONG = 600


def sources(package: str) -> list[Path]:
    return sorted(p for p in (ROOT / package).rglob("*.py"))


def test_the_document_is_short_and_names_only_paths_that_exist() -> None:
    text = DOC.read_text()
    assert len(text.splitlines()) < 200
    named = set(re.findall(r"`((?:grpo_core|grpo_rewards|tests|plugins)/[\w/.]*)`", text))
    named |= {m.group(1).replace(".", "/") for m in re.finditer(r"`(grpo_core\.[a-z_]+(?:\.[a-z_]+)*)`", text)}
    assert named, "no paths found: the pattern above is wrong"
    missing = [p for p in sorted(named)
               if not (ROOT / p).exists() and not (ROOT / p).with_suffix(".py").exists()]
    assert missing == []


def _strings_outside_docstrings(tree: ast.AST) -> list[ast.Constant]:
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [n for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and id(n) not in docstrings]


def run_folder_spellings(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    found = [f"{path.relative_to(ROOT)}:{n.lineno}: {n.value!r}" for n in _strings_outside_docstrings(tree)
             if n.value in RUN_FOLDER_NAMES]
    found += [f"{path.relative_to(ROOT)}:{n.lineno}: / {n.right.value!r}" for n in ast.walk(tree)
              if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Div) and isinstance(n.right, ast.Constant)
              and n.right.value in RUN_FOLDER_SUBDIRS]
    return found


def test_the_check_sees_a_run_folder_name_spelled_outside_its_owner(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    bad = tmp_path / "bad.py"
    bad.write_text('"""metrics.jsonl in a docstring is fine."""\nfrom pathlib import Path\n'
                   'out = Path("run") / "model"\nname = "samples.jsonl"\n')
    assert run_folder_spellings(bad) == ["bad.py:4: 'samples.jsonl'", "bad.py:3: / 'model'"]


def test_only_the_run_folder_owner_spells_its_names() -> None:
    found = [hit for p in sources("grpo_core") if "run_folder" not in p.parts for hit in run_folder_spellings(p)]
    assert found == []


def test_no_module_over_600_lines_without_a_reason_in_its_docstring() -> None:
    unexplained = []
    for path in [*sources("grpo_core"), *sources("grpo_rewards")]:
        text = path.read_text()
        if len(text.splitlines()) > LONG:
            doc = ast.get_docstring(ast.parse(text)) or ""
            if "Why this module is over 600 lines:" not in doc:
                unexplained.append(f"{path.relative_to(ROOT)} ({len(text.splitlines())} lines)")
    assert unexplained == []


def test_the_import_contracts_hold() -> None:
    pytest.importorskip("importlinter", reason="import-linter is in the dev extra")
    done = subprocess.run([sys.executable, "-c", "from importlinter.cli import lint_imports_command; "
                           "lint_imports_command()"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout
