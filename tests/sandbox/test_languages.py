"""The language registry: the built-ins as before, and a toy language registered from one file outside the
package runs in the local sandbox (compiled in the jail, executed under the same layers)."""

from __future__ import annotations

import importlib.util
import os
import shutil

import pytest

from grpo_rewards.sandbox import languages
from grpo_rewards.sandbox.extract import extract_code

from .conftest import FAST, needs_default

TOY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "toy_language", "c89_language.py")


def test_builtins_resolve_as_before():
    assert [languages.canonical(n) for n in ("py", "python3", "PYTHON", "c++", "cxx", "cc", "gcc", "c")] == [
        "python", "python", "python", "cpp", "cpp", "cpp", "c", "c"]
    assert languages.fence_tags("python") == ("python", "py", "python3", "py3")
    assert languages.fence_tags("c") == ("c",) and languages.fence_tags("js") == ("javascript", "js", "nodejs", "node")
    assert languages.by_suffix(".CPP").name == "cpp" and languages.by_suffix(".c").name == "c"
    assert languages.by_suffix(".rs") is None
    assert [lang.name for lang in languages.local_languages()][:3] == ["python", "c", "cpp"]
    assert languages.get("python").run_mode == "python" and languages.get("cpp").run_mode == "exec"
    assert languages.is_compiled("c++") and not languages.is_compiled("python") and not languages.get("bash").local


@pytest.fixture
def toy():
    spec = importlib.util.spec_from_file_location("c89_language", TOY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module.C89
    languages.unregister("c89")


def test_a_toy_language_from_outside_the_package(toy):
    assert languages.get("ANSI-C") is toy and languages.by_suffix(".c89") is toy
    assert extract_code("```ansi-c\nint main(void) { return 0; }\n```", "c89")[0] == "int main(void) { return 0; }\n"


@needs_default
@pytest.mark.skipif(not shutil.which("gcc"), reason="gcc not installed")
def test_a_toy_language_runs_in_the_local_sandbox(toy):
    from grpo_rewards.sandbox.pool import LocalSandbox
    from grpo_rewards.sandbox.program import Program

    ok = "#include <stdio.h>\nint main(void) { int a, b; scanf(\"%d %d\", &a, &b); printf(\"%d\\n\", a + b); return 0; }\n"
    not_c89 = "int main(void) { for (int i = 0; i < 3; i++) {} return 0; }\n"  # a C99 loop: its flags refuse it
    with LocalSandbox(slots=1, limits=FAST) as box:
        good, bad = box.run([Program(ok, "40 2\n", "c89"), Program(not_c89, "", "ansi-c")])
        fork = box.run_one(Program("#include <unistd.h>\nint main(void) { return fork() < 0 ? 3 : 0; }\n", "", "c89"))
    assert (good.status, good.stdout) == ("ok", "42\n"), (good.status, good.error, good.stderr[-300:])
    assert bad.status == "compile_error", (bad.status, bad.stderr[-300:])
    assert fork.status == "runtime_error" and fork.exit_code == 3  # the same seccomp filter: no fork
