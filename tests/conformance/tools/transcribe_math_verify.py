"""Transcribe Math-Verify's own tests into ``cases/math_verify.json``.

Reads the test files of a Math-Verify checkout at a commit (``git show``), takes every
``@pytest.mark.parametrize`` table whose test compares a gold and a prediction
(``compare_strings`` or ``verify(parse(gold), parse(pred))``) and writes one case per
row: the gold (our ``answer`` column), the prediction (the completion, read whole:
``math_equivalence`` with ``extract = "none"``), the expected verdict (1.0 / 0.0),
the options the peer test passed (``peer_options``) and the test it came from. A
prediction with a ``\\boxed{}`` also gives a second case (id ``...@auto``) scored with
``math_equivalence``'s default extraction, which takes the boxed answer. Every
other test function of those files is listed under ``not_covered`` with the reason
(the tool fails on a test function it does not know, so a new upstream test is seen).

Our verdicts that differ from the peer's are annotated here (:data:`ANNOTATIONS`):
a deliberate difference (:data:`DELIBERATE`, each stated in our documentation) or a
known bug (strict xfail).

Usage: python tests/conformance/tools/transcribe_math_verify.py GIT_DIR COMMIT > tests/conformance/cases/math_verify.json
"""

from __future__ import annotations

import ast
import json
import math
import subprocess
import sys

from _peer_tests import with_reasons, with_sources

REPO = "https://github.com/huggingface/Math-Verify"
FILES = ("tests/test_all.py", "tests/test_boxed.py", "tests/test_numina_cases.py", "tests/test_open_thoughts.py",
         "tests/test_strict.py", "tests/test_yujianll.py", "tests/test_string_extraction.py",
         "tests/test_configs.py", "tests/test_timeout.py", "tests/test_raise_on_error.py")
DEFAULTS = {"match_types": ["latex", "expr"], "precision": 6, "strict": True, "allow_set_relation_comp": False}
# wall-clock limits loose enough for a loaded 2-core CI machine (the slowest case needs ~5 s of CPU)
SLACK = {"timeout_seconds": 60.0, "batch_timeout_seconds": 600.0}
REWARD, CONFIG = "math_equivalence", {"extract": "none", "workers": 2, **SLACK}
AUTO_CONFIG = {"workers": 2, **SLACK}  # the default extraction: the last \boxed{} of the prediction
ME = "grpo_rewards/builtins/math_equivalence.py"

DELIBERATE = {
    "false_relation": {
        "reward": REWARD, "documented_in": ME, "phrase": "a link of a chain of relations",
        "reason": "a relation between numbers that is false is wrong, also as a link of a chain: x = 5+5+1 = 7 = 11 "
                  "states 7 = 11 (math-verify reads the chain's last side, 11)",
    },
    "require_literal": {
        "reward": REWARD, "documented_in": ME, "phrase": "``require_literal`` (on by default) makes any other answer wrong",
        "reason": "against a reference that is a plain number only a number literal or a simplest exact form "
                  "counts (require_literal, on by default): arithmetic left undone, such as (9+1), 28 pct or an "
                  "equation with a dollar sign inside, is not the answer",
    },
}
ANNOTATIONS: dict[str, dict[str, object]] = {
    **{f"test_all.py::test_relations_math[{i}]": {"deliberate": "false_relation", "ours": 0.0}
       for i in (10, 12, 13, 26, 27)},
    "test_all.py::test_latex_notation[4]": {"deliberate": "require_literal", "ours": 0.0},
    "test_all.py::test_latex_notation[9]": {"deliberate": "require_literal", "ours": 0.0},
    "test_all.py::test_relations_math[16]": {"deliberate": "require_literal", "ours": 0.0},
}
ANNOTATIONS.update({
    **{f"test_all.py::test_percent_notation[{i}]@auto": {"deliberate": "require_literal", "ours": 0.0}
       for i in (6, 8)},  # [7], "28 percent", is a percentage in the number grammar, as in math-verify
})
NOT_COVERED = {
    "tests/test_string_extraction.py::test_string_extraction": "parse() with StringExtractionConfig (multiple-choice "
                                                               "letters): no built-in scores letter answers",
    "tests/test_configs.py::test_boxed_match_priority": "parse() options (boxed_match_priority, fallback_mode): "
                                                        "math-verify internals, not a comparison",
    "tests/test_configs.py::test_normalization_config": "parse() with a NormalizationConfig: math-verify internals",
    **{f"tests/test_timeout.py::test_timeout_{part}": "math-verify's own signal timeouts (ours are the worker "
                                                     "pool's, tests/rewards/test_timeout_pool.py)"
       for part in ("expr", "latex", "verify")},
    "tests/test_raise_on_error.py::test_verify_raise_on_error": "verify(raise_on_error=...): math-verify internals",
}


# Tests without a table whose asserts each compare one gold and one prediction: every assert is a case.
# ``sympy_expr_eq(a, b, float_rounding=n, ...)`` compares sympy objects: they are written as the LaTeX
# they print as (``sympy.latex``: Rational(1, 3) is \frac{1}{3}, Float(0.333) is 0.333).
ASSERTED = {"tests/test_all.py::test_precision"}


def _asserted(func: ast.FunctionDef) -> list[tuple[dict[str, object], dict[str, object]]]:
    import sympy

    rows = []
    for node in ast.walk(func):
        if not isinstance(node, ast.Assert):
            continue
        test, expected = node.test, 1
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            test, expected = test.operand, 0
        if isinstance(test, ast.Compare):
            expected = int(_value(test.comparators[0]))
            test = test.left
        call = test
        kwargs = {kw.arg: _value(kw.value) for kw in call.keywords}
        if call.func.id == "sympy_expr_eq":
            gold, pred = (eval(compile(ast.Expression(a), "<case>", "eval"), {"sympy": sympy}) for a in call.args)
            values = {"gold": f"${sympy.latex(gold)}$", "pred": f"${sympy.latex(pred)}$", "expected": expected}
            opts = {**DEFAULTS, "precision": kwargs["float_rounding"]}
        else:
            gold, pred = (_value(a) for a in call.args)
            values = {"gold": gold, "pred": pred, "expected": expected}
            opts = {**DEFAULTS, **kwargs}
        rows.append((values, opts))
    return rows


def _value(node: ast.expr) -> object:
    return eval(compile(ast.Expression(node), "<case>", "eval"), {"math": math})  # f-strings use math.sqrt


def _options(func: ast.FunctionDef) -> dict[str, object] | None:
    """The comparison options of the test body: literal keywords, or the name of a parameter."""
    for node in ast.walk(func):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id == "compare_strings":
                opts: dict[str, object] = dict(DEFAULTS)
                for kw in node.keywords:
                    opts[kw.arg] = kw.value.id if isinstance(kw.value, ast.Name) else _value(kw.value)
                return opts
            if node.func.id == "verify" and node.args and isinstance(node.args[0], ast.Call):
                return dict(DEFAULTS)
    return None


def _case(path: str, func: str, index: int, values: dict[str, object], opts: dict[str, object],
          auto: bool = False) -> dict[str, object]:
    case_id = f"{path.rsplit('/', 1)[1]}::{func}[{index}]" + ("@auto" if auto else "")
    expected = values.get("expected", values.get("result"))
    config = dict(AUTO_CONFIG if auto else CONFIG)
    config.update({k: v for k, v in opts.items() if v != DEFAULTS[k]})  # the peer's options, as our parameters
    case: dict[str, object] = {
        "id": case_id, "test": f"{path}::{func}", "row": index, "peer": "verify(parse(gold), parse(pred))",
        "reward": REWARD, "config": config, "completion": values["pred"],
        "columns": {"answer": values["gold"]},
        "expected": float(expected), "peer_options": opts,
    }
    case.update(ANNOTATIONS.get(case_id, {}))
    return case


def cases(git_dir: str, commit: str) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for path in FILES:
        source = subprocess.run(["git", "--git-dir", git_dir, "show", f"{commit}:{path}"], check=True,
                                capture_output=True, text=True).stdout
        for func in ast.parse(source).body:
            if not isinstance(func, ast.FunctionDef) or not func.name.startswith("test"):
                continue
            options = _options(func)
            table = next((d for d in func.decorator_list if isinstance(d, ast.Call)
                          and ast.unparse(d.func).endswith("parametrize")), None)
            if table is None and f"{path}::{func.name}" in ASSERTED:
                for index, (values, opts) in enumerate(_asserted(func)):
                    out.append(_case(path, func.name, index, values, opts))
                continue
            if options is None or table is None:
                if f"{path}::{func.name}" not in NOT_COVERED:
                    raise SystemExit(f"{path}::{func.name} is neither a comparison table nor listed in NOT_COVERED")
                continue
            names = [n.strip() for n in _value(table.args[0]).split(",")]
            for index, row in enumerate(table.args[1].elts):
                values = dict(zip(names, _value(row), strict=True))
                opts = {k: values[v] if isinstance(v, str) and v in values else v for k, v in options.items()}
                out.append(_case(path, func.name, index, values, opts))
                if "\\boxed" in str(values["pred"]):
                    out.append(_case(path, func.name, index, values, opts, auto=True))
    unknown = set(ANNOTATIONS) - {c["id"] for c in out}
    if unknown:
        raise SystemExit(f"annotations for cases that do not exist: {sorted(unknown)}")
    return out


def main() -> None:
    git_dir, commit = sys.argv[1], sys.argv[2]
    full = subprocess.run(["git", "--git-dir", git_dir, "rev-parse", commit], check=True, capture_output=True,
                          text=True).stdout.strip()
    doc = {
        "suite": "Math-Verify",
        "source": {"repo": REPO, "commit": full, "files": list(FILES),
                   "transcribed_by": "tests/conformance/tools/transcribe_math_verify.py"},
        "deliberate": DELIBERATE,
        "not_covered": [{"test": test, "reason": why} for test, why in NOT_COVERED.items()],
        "cases": with_reasons(with_sources(cases(git_dir, full), REPO, full), DELIBERATE),
    }
    json.dump(doc, sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
