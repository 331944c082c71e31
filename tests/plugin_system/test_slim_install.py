"""The slim install: the base distribution needs no torch and none of the heavy verifier libraries; listing and
showing rewards imports none of them; a reward whose extra is missing fails when it is built, in one line
naming the extra, while every other reward still works (the missing libraries are blocked in a subprocess)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

from grpo_rewards.extras import EXTRAS

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "transformers", "math_verify", "sympy", "latex2sympy2_extended", "phonenumbers")

LIST_AND_SHOW = f"""
import contextlib, io, json, sys
from grpo_rewards.command_line import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    codes = [main(["rewards", "list"]), main(["rewards", "show", "math_equivalence"]),
             main(["rewards", "show", "email_rules"]), main(["rewards", "show", "verify:math"])]
print(json.dumps({{"codes": codes, "listed": out.getvalue(), "heavy": [m for m in {HEAVY!r} if m in sys.modules]}}))
"""

BLOCKED = """
import sys

class Blocker:  # as if math-verify, sympy and phonenumbers were not installed
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("math_verify", "sympy", "phonenumbers"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Blocker())
"""

MISSING = BLOCKED + """
import json
from grpo_rewards import reward
from grpo_rewards.extras import MissingExtra

errors = {}
for name in ("math_equivalence", "verify:math", "email_rules"):
    try:
        reward(name)
    except MissingExtra as exc:
        errors[name] = str(exc)
exact = reward("exact_match")(["<answer>4</answer>"], answer=["4"])
print(json.dumps({"errors": errors, "exact": exact}))
"""

SCORE = BLOCKED + """
import sys
from grpo_rewards.command_line import main
raise SystemExit(main(sys.argv[1:]))
"""


def run(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120,
                          env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})


def test_listing_and_showing_rewards_imports_no_heavy_library():
    proc = run(LIST_AND_SHOW)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.splitlines()[-1])
    assert result["codes"] == [0, 0, 0, 0]
    assert "math_equivalence" in result["listed"] and "email_rules" in result["listed"]
    assert result["heavy"] == []


def test_a_reward_whose_extra_is_missing_fails_in_one_line_naming_the_extra():
    proc = run(MISSING)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.splitlines()[-1])
    assert result["errors"] == {
        "math_equivalence": "math_equivalence needs math-verify and sympy, which are not installed: "
                            "pip install 'grpo-toolkit[math]'",
        "verify:math": "verify:math needs math-verify and sympy, which are not installed: "
                       "pip install 'grpo-toolkit[math]'",
        "email_rules": "email_rules needs phonenumbers, which is not installed: pip install 'grpo-toolkit[email]'",
    }
    assert result["exact"] == [2.0]  # the rewards that need nothing still work


def test_a_config_using_a_reward_whose_extra_is_missing_is_one_line_at_its_use_key(tmp_path):
    config = tmp_path / "r.toml"
    config.write_text('[rewards.fmt]\nuse = "xml_count"\n\n[rewards.correct]\nuse = "math_equivalence"\n'
                      'timeout_seconds = 2.0\n')
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"completion": "<answer>4</answer>", "answer": "4"}\n')
    proc = run(SCORE, "rewards", "score", str(config), "-i", str(rows))
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [f"{config}:5: rewards.correct.use: math_equivalence needs math-verify and "
                                        "sympy, which are not installed: pip install 'grpo-toolkit[math]'"]
    proc = run(SCORE, "rewards", "check", "email_rules")
    assert (proc.returncode, proc.stderr.splitlines()[-1]) == (
        2, "error: email_rules needs phonenumbers, which is not installed: pip install 'grpo-toolkit[email]'")


def test_the_base_install_leaves_torch_and_the_verifier_libraries_to_extras():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    base = {re.split(r"[<>=!~\[ ;]", d, maxsplit=1)[0].lower() for d in project["dependencies"]}
    assert not base & {"torch", "transformers", "math-verify", "sympy", "phonenumbers"}, base
    extras = project["optional-dependencies"]
    for extra, modules in EXTRAS.items():
        listed = {re.split(r"[<>=!~\[ ;]", d, maxsplit=1)[0].lower() for d in extras[extra]}
        assert set(modules.values()) <= listed, (extra, listed)
    assert "torch" in {re.split(r"[<>=!~\[ ;]", d, maxsplit=1)[0] for d in extras["train"]}
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    installed = re.search(r'-e "\.\[([a-z,]+)\]"', setup)
    assert installed and set(EXTRAS) | {"train", "dev"} <= set(installed.group(1).split(","))
