"""Reading a peer's unittest/pytest test file at a commit: its test methods and the literals they assign."""

from __future__ import annotations

import ast
import subprocess


def git(git_dir: str, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", git_dir, *args], check=True, capture_output=True, text=True).stdout


class PeerTests:
    """The test functions of ``path`` at ``commit`` (``Class::name``, in file order) and their assignments."""

    def __init__(self, git_dir: str, commit: str, path: str) -> None:
        self.commit = git(git_dir, "rev-parse", commit).strip()
        self.path = path
        self.tests: dict[str, ast.FunctionDef] = {}
        for node in ast.parse(git(git_dir, "show", f"{self.commit}:{path}")).body:
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and item.name.startswith("test"):
                        self.tests[f"{node.name}::{item.name}"] = item

    def full(self, test: str) -> str:
        """``Class::name`` of the test named ``test`` (or already ``Class::name``)."""
        matches = [t for t in self.tests if t == test or t.endswith(f"::{test}")]
        if len(matches) != 1:
            raise KeyError(f"{test!r} names {len(matches)} tests of {self.path}")
        return matches[0]

    def literal(self, test: str, name: str) -> object:
        """The literal value assigned to ``name`` in ``test`` (the first assignment)."""
        for node in ast.walk(self.tests[self.full(test)]):
            if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) and node.targets[0].id == name:
                return ast.literal_eval(node.value)
        raise KeyError(f"{test} assigns no {name!r}")

    def contents(self, test: str, name: str) -> list[str]:
        """The message contents of the chat completions ``[[{"content": ...}], ...]`` assigned to ``name``."""
        return [c["content"] if isinstance(c, dict) else c[0]["content"] for c in self.literal(test, name)]


def with_sources(cases: list[dict[str, object]], repo: str, commit: str) -> list[dict[str, object]]:
    """Each case with ``source``: the URL of its peer file at ``commit`` (the file is ``test`` up to ``::``)."""
    for case in cases:
        path = str(case["test"]).split("::", 1)[0]
        case["source"] = f"{repo}/blob/{commit}/{path}"
    return cases


def with_reasons(cases: list[dict[str, object]], deliberate: dict[str, dict[str, str]]) -> list[dict[str, object]]:
    """Each deliberate case with its ``reason`` (the text of its entry in the suite's ``deliberate``)."""
    for case in cases:
        if "deliberate" in case:
            case["reason"] = deliberate[str(case["deliberate"])]["reason"]
    return cases
