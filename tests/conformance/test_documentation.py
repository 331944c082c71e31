"""Every deliberate difference is stated in our documentation; every case names its peer test and a built-in."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import grpo_rewards

from . import suite

ROOT = Path(__file__).resolve().parents[2]
PRESENT = [name for name in suite.SUITES if (suite.CASES_DIR / f"{name}.json").exists()]


def _documentation(path: str) -> str:
    """A module's docstring, or a docs/ page; whitespace collapsed."""
    text = (ROOT / path).read_text(encoding="utf-8")
    if path.endswith(".py"):
        text = ast.get_docstring(ast.parse(text)) or ""
    return " ".join(text.split())


@pytest.mark.parametrize("name", PRESENT)
def test_each_deliberate_difference_is_documented_where_it_says(name):
    for key, entry in suite.load(name)["deliberate"].items():
        assert " ".join(entry["phrase"].split()) in _documentation(entry["documented_in"]), (
            f"{name}: deliberate difference {key!r} is not stated in {entry['documented_in']}")


@pytest.mark.parametrize("name", PRESENT)
def test_cases_are_well_formed(name):
    data = suite.load(name)
    assert data["source"]["repo"].startswith("https://github.com/") and len(data["source"]["commit"]) == 40
    registry = grpo_rewards.get_registry()
    ids = [case["id"] for case in data["cases"]]
    assert len(ids) == len(set(ids)), "case ids repeat"
    for case in data["cases"]:
        path = case["test"].split("::", 1)[0]
        assert path in data["source"]["files"] and case["peer"], case["id"]
        assert case["source"] == f"{data['source']['repo']}/blob/{data['source']['commit']}/{path}", case["id"]
        assert case["reward"] in registry.rewards, f"{case['id']}: {case['reward']!r} is no registered reward"
        if "deliberate" in case:
            assert case["deliberate"] in data["deliberate"] and "ours" in case, case["id"]
            assert case["reason"] == data["deliberate"][case["deliberate"]]["reason"], case["id"]
        assert not ("deliberate" in case and "xfail" in case), case["id"]
    for entry in data["not_covered"]:
        assert entry["test"] and entry["reason"]


def test_docs_page_matches_the_case_files():
    page = (ROOT / "docs" / "conformance.md").read_text(encoding="utf-8")
    assert suite.report() in page, (
        "docs/conformance.md is stale: replace its generated part with `python -m tests.conformance.suite`")
