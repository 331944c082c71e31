"""The declared Python range is true: every standard-library module the packages import exists in its lowest
version (``tomllib`` is 3.11+)."""

from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path

from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parents[2]
ADDED_IN = {"tomllib": (3, 11), "wsgiref.types": (3, 11), "_tomllib": (3, 11)}  # stdlib modules newer than 3.9


def test_requires_python_admits_no_version_missing_a_stdlib_module_we_import():
    spec = SpecifierSet(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"])
    assert spec.contains(f"{sys.version_info.major}.{sys.version_info.minor}")
    imported: set[str] = set()
    for package in ("grpo_rewards", "grpo_core"):
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    imported |= {a.name for a in node.names}
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    imported.add(node.module)
    needed = max((ADDED_IN[m] for m in imported if m in ADDED_IN), default=(3, 9))
    too_old = [f"3.{minor}" for minor in range(8, needed[1]) if spec.contains(f"3.{minor}")]
    assert not too_old, f"requires-python {spec} admits {too_old}, which lack a module the code imports"
