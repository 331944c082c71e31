"""The conformance suites: loading ``cases/*.json`` and scoring their cases with our built-ins.

Each suite file transcribes one peer's own tests (see docs/conformance.md): its
``source`` (repository, commit, files), the ``deliberate`` differences (each with the
reason and where our documentation states it), the peer tests ``not_covered`` (peer
functions we have no built-in for) and the ``cases``. A case names the peer test it
came from, the built-in reward that reproduces the peer function (``reward`` and its
``config``), the completion, the dataset ``columns`` and the peer's ``expected`` score.
A case is one of:

* agreeing (neither ``deliberate`` nor ``xfail``): our score equals ``expected``;
* ``deliberate``: ours differs on purpose (``reason``); our score is ``ours`` (not ``expected``);
* ``xfail``: a known bug in our reward (the reason says which); run as a strict xfail.

All cases of one reward configuration are scored in one batch (one call of the
reward), so the process pool of ``math_equivalence`` starts once per suite.
:func:`report` writes the generated part of docs/conformance.md from the files.
"""

from __future__ import annotations

import importlib.util
import json
import threading
from collections import Counter
from functools import cache
from pathlib import Path
from typing import Any

import pytest

import grpo_rewards

CASES_DIR = Path(__file__).parent / "cases"
SUITES = ("math_verify", "open_r1", "trl", "unsloth", "verifiers", "lm_eval", "simple_evals", "qwen_math")
TOLERANCE = 1e-9


def module_at(path: str) -> Any:
    """The Python module at ``path`` (relative to the repository root), imported by its file."""
    spec = importlib.util.spec_from_file_location(Path(path).stem, CASES_DIR.parents[2] / path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@cache
def load(name: str) -> dict[str, Any]:
    """The suite ``cases/<name>.json``."""
    return json.loads((CASES_DIR / f"{name}.json").read_text(encoding="utf-8"))


def kind(case: dict[str, Any]) -> str:
    """``agree``, ``deliberate`` or ``xfail``."""
    return "xfail" if "xfail" in case else "deliberate" if "deliberate" in case else "agree"


def counts(suite: dict[str, Any]) -> dict[str, int]:
    """cases / agree / deliberate / known bug (xfail) / not covered of one suite."""
    by_kind = Counter(kind(c) for c in suite["cases"])
    return {"cases": len(suite["cases"]), "agree": by_kind["agree"], "deliberate": by_kind["deliberate"],
            "known bug": by_kind["xfail"], "not covered": len(suite["not_covered"])}


def params(suite: dict[str, Any]) -> list[Any]:
    """One ``pytest.param`` per case, id = the case id; known bugs are strict xfails."""
    out = []
    for case in suite["cases"]:
        marks = [pytest.mark.xfail(strict=True, reason=case["xfail"])] if "xfail" in case else []
        out.append(pytest.param(case, id=case["id"], marks=marks))
    return out


def _completion(case: dict[str, Any]) -> Any:
    text = case["completion"]
    return [{"role": "assistant", "content": text}] if case.get("chat") else text


def _group_key(case: dict[str, Any]) -> str:
    return json.dumps([case["reward"], case.get("config", {}), sorted(case.get("columns", {})),
                       bool(case.get("thread"))], sort_keys=True)


def _call(reward: Any, completions: list[Any], columns: dict[str, list[Any]], in_thread: bool) -> list[Any]:
    if not in_thread:
        return list(reward(completions, **columns))
    result: list[Any] = []
    errors: list[BaseException] = []

    def target() -> None:
        try:
            result.extend(reward(completions, **columns))
        except BaseException as exc:  # reported in the calling thread
            errors.append(exc)

    worker = threading.Thread(target=target)
    worker.start()
    worker.join()
    if errors:
        raise errors[0]
    return result


@cache
def scores(name: str) -> dict[str, Any]:
    """Our score of every case of suite ``name``, by case id (one reward call per configuration)."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for case in load(name)["cases"]:
        groups.setdefault(_group_key(case), []).append(case)
    out: dict[str, Any] = {}
    for cases in groups.values():
        first = cases[0]
        reward = grpo_rewards.reward(first["reward"], **first.get("config", {}))
        columns = {col: [c["columns"][col] for c in cases] for col in first.get("columns", {})}
        got = _call(reward, [_completion(c) for c in cases], columns, bool(first.get("thread")))
        out.update(zip((c["id"] for c in cases), got, strict=True))
    return out


def same(a: Any, b: Any, tolerance: float = TOLERANCE) -> bool:
    """Scores equal: ``None`` only equals ``None``; numbers within ``tolerance``."""
    if a is None or b is None:
        return a is b
    return abs(float(a) - float(b)) <= tolerance


def check(name: str, case: dict[str, Any]) -> None:
    """Assert that our score of ``case`` is what the case says (module docs)."""
    got = scores(name)[case["id"]]
    tolerance = case.get("abs", TOLERANCE)
    if "deliberate" in case:
        reason = load(name)["deliberate"][case["deliberate"]]["reason"]
        assert same(got, case["ours"], tolerance), (
            f"deliberate difference ({reason}): ours should be {case['ours']!r}, got {got!r}")
        assert not same(got, case["expected"], tolerance), f"ours now agrees with the peer: {case['id']} is not deliberate"
        return
    assert same(got, case["expected"], tolerance), f"the peer expects {case['expected']!r}, ours is {got!r}"


def _source(data: dict[str, Any]) -> str:
    src = data["source"]
    files = ", ".join(f"`{f}`" for f in src["files"])
    return f"[{src['repo'].removeprefix('https://github.com/')}]({src['repo']}) at `{src['commit']}`: {files}"


def report() -> str:
    """The generated part of docs/conformance.md: counts, sources, mappings and differences of every suite."""
    lines = [GENERATED_BEGIN, "", "| suite | cases | agree | deliberate | known bug (strict xfail) | not covered |",
             "|---|---|---|---|---|---|"]
    for name in SUITES:
        data, n = load(name), counts(load(name))
        lines.append(f"| {data['suite']} | {n['cases']} | {n['agree']} | {n['deliberate']} | {n['known bug']} "
                     f"| {n['not covered']} |")
    for name in SUITES:
        data = load(name)
        lines += ["", f"### {data['suite']}", "", f"Source: {_source(data)}.", "", "Peer function → our built-in:", ""]
        mapping = Counter((c["peer"], c["reward"], json.dumps(c.get("config", {}), sort_keys=True)) for c in data["cases"])
        lines += [f"- `{peer}` → `{reward}` {config} ({n} cases)" for (peer, reward, config), n in mapping.items()]
        used = Counter(c["deliberate"] for c in data["cases"] if "deliberate" in c)
        if used:
            lines += ["", "Deliberate differences:", ""]
            for key, n in used.items():
                entry = data["deliberate"][key]
                lines.append(f"- `{key}` ({entry['reward']}, {n} case{'s' if n > 1 else ''}): {entry['reason']}. "
                             f"Stated in `{entry['documented_in']}`.")
        bugs = Counter(c["xfail"] for c in data["cases"] if "xfail" in c)
        if bugs:
            lines += ["", "Known bugs (strict xfails; fixing one turns its cases into failures until the mark goes):",
                      ""]
            lines += [f"- {reason} ({n} case{'s' if n > 1 else ''})" for reason, n in bugs.items()]
        uncovered = Counter(entry["reason"] for entry in data["not_covered"])
        if uncovered:
            unit = "notebook function" if all(".ipynb::" in e["test"] for e in data["not_covered"]) else "test"
            lines += ["", f"Not covered (peer {unit}s not run):", ""]
            lines += [f"- {reason} ({n} {unit}{'s' if n > 1 else ''})" for reason, n in uncovered.items()]
    return "\n".join([*lines, "", GENERATED_END])


GENERATED_BEGIN = "<!-- generated from tests/conformance/cases/*.json by: python -m tests.conformance.suite -->"
GENERATED_END = "<!-- end of the generated part -->"

if __name__ == "__main__":
    print(report())
