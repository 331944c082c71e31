"""The code rewards end to end: dataset formats in, pass fractions out, through the real sandbox pool."""

from __future__ import annotations

import json

import pytest

from grpo_rewards import reward
from grpo_rewards.plugins import get_registry
from grpo_rewards.reward_config import rewards_from_doc
from grpo_rewards.sandbox import probe
from grpo_rewards.sandbox.program import RunResult
from grpo_rewards.tomlfile import parse_toml

from .conftest import needs_default

pytestmark = needs_default

ADD_TESTS = json.dumps({"language": "python", "test_cases": [
    {"input": "1 2\n", "output": "3\n"}, {"input": "10 -4\n", "output": "6\n"}, {"input": "0 0\n", "output": "0\n"}]})


def fenced(code: str) -> str:
    return f"Here is my solution.\n```python\n{code}\n```\n"


@pytest.fixture(scope="module")
def code_reward():
    return reward("code_execution", cpu_seconds=2.0, wall_seconds=4.0, memory_mb=512)


def test_registered_with_toml_parameters():
    spec = get_registry().reward("code_execution")
    for name in ("cpu_seconds", "wall_seconds", "memory_mb", "language", "backend", "allow_unsafe_execution",
                 "tests_column"):
        assert name in spec.params
    assert "binary" not in spec.params
    assert "code_execution_binary" in get_registry().rewards
    assert {"local", "sandboxfusion", "piston"} <= set(get_registry().sandbox_backends)


def test_pass_fraction_stdio(code_reward):
    completions = [
        fenced("a, b = map(int, input().split())\nprint(a + b)"),
        fenced("a, b = map(int, input().split())\nprint(abs(a + b))"),  # different code, same answers
        fenced("a, b = map(int, input().split())\nprint(a + b if a else 1)"),  # 2 of 3
        fenced("print(3)"),  # 1 of 3
        "no code here, the answer is print(3)",
        [{"role": "assistant", "content": fenced("a, b = map(int, input().split())\nprint(a + b)")}],
        fenced("a, b = map(int, input().split())\nprint(a + b)\nprint('extra')"),  # an extra line fails
    ]
    scores = code_reward(completions, verification_info=[ADD_TESTS] * len(completions))
    assert scores == [1.0, 1.0, pytest.approx(2 / 3), pytest.approx(1 / 3), 0.0, 1.0, 0.0]
    assert "no fenced" in code_reward.last_details[4]["reason"]


def test_float_tolerance_parameter(code_reward):
    tests = json.dumps({"language": "python", "test_cases": [{"input": "3\n", "output": "0.333333\n"}]})
    program = [fenced("print(1 / int(input()))")]  # prints 0.3333333333333333
    assert code_reward(program, verification_info=[tests]) == [0.0]
    tolerant = reward("code_execution", cpu_seconds=2.0, wall_seconds=4.0, memory_mb=512, float_tolerance=1e-5)
    assert tolerant(program, verification_info=[tests]) == [1.0]
    with pytest.raises(ValueError, match="float_tolerance must be in"):
        reward("code_execution", float_tolerance=-1)


def test_binary_variant():
    binary = reward("code_execution_binary", cpu_seconds=2.0, wall_seconds=4.0)
    scores = binary([fenced("a, b = map(int, input().split())\nprint(a + b)"), fenced("print(3)")],
                    verification_info=[ADD_TESTS] * 2)
    assert scores == [1.0, 0.0]


def test_function_calls_judged_outside(code_reward):
    tests = json.dumps({"fn_name": "add", "inputs": [[1, 2], [2, 2]], "outputs": [3, 4]})
    completions = [
        fenced("def add(a, b):\n    return a + b"),
        fenced("def add(a, b):\n    return str(a + b)"),  # right digits, wrong type
        fenced("import os\nos._exit(0)"),  # exits 0 before any test runs
        fenced("print('passed')\nprint('All tests passed')\nimport sys\nsys.exit(0)"),
        fenced("import json\njson.dumps = lambda *a, **k: '{\"value\": 3}'\ndef add(a, b):\n    return 0"),
        fenced("class Solution:\n    def add(self, a, b):\n        return a + b"),
        fenced("def add(a, b):\n    return True if a == 1 else a + b"),  # True is not 3
    ]
    scores = code_reward(completions, verification_info=[tests] * len(completions))
    assert scores[0] == 1.0 and scores[5] == 1.0
    assert scores[1] == scores[2] == scores[3] == 0.0
    assert scores[4] <= 0.5  # the forged "3" can only match where 3 is the truth
    assert scores[6] == 0.5


def test_assert_style_tests():
    mbpp = {"test_list": ["assert square(3) == 9", "assert square(-2) == 4", "assert square(0) >= 0"]}
    he = {"test": "def check(candidate):\n    assert candidate(3) == 9\n", "entry_point": "square"}
    good = fenced("def square(x):\n    return x * x")
    bad = fenced("def square(x):\n    return x + x")
    r = reward("code_execution", tests_column="tests", cpu_seconds=2.0, wall_seconds=4.0, weak_tests="include")
    scores = r([good, bad, good], tests=[mbpp, mbpp, he])
    assert scores == [1.0, pytest.approx(1 / 3), 1.0]  # x + x fails both == checks; the weak >= 0 passes
    assert r.last_details[0]["weak"] == 1
    assert r.metrics()["counts"]["weak_tests"] >= 2
    strict = reward("code_execution", tests_column="tests", cpu_seconds=2.0, wall_seconds=4.0)  # the default
    assert strict([good, bad, good], tests=[mbpp, mbpp, he]) == [1.0, 0.0, 1.0]  # the weak >= 0 is not run
    assert strict.last_details[1]["total"] == 2 and strict.metrics()["counts"].get("weak_tests", 0) == 0


# reads the report nonce from the runner's own code constants, prints a forged pass, leaves before the check
FORGE_WEAK = """import os, re
def square(x):
    for const in globals()["_grpo_emit"].__code__.co_consts:
        for nonce in re.findall("[0-9a-f]{24}", const if isinstance(const, str) else ""):
            os.write(1, ("\\n" + nonce + ' {"passed": true}\\n').encode())
    os._exit(0)
"""


def test_weak_asserts_are_forgeable_so_excluded_by_default():
    """A program can forge a weak assert's pass (it runs in the same interpreter as the check); so by
    default weak tests are not run, and a row with nothing else to check scores None, never a pass."""
    weak_only = {"test_list": ["assert square(3) > 0"]}
    forged = fenced(FORGE_WEAK)
    trusting = reward("code_execution", tests_column="tests", cpu_seconds=2.0, wall_seconds=4.0,
                      weak_tests="include")
    assert trusting([forged], tests=[weak_only]) == [1.0]  # the hole: a forged pass
    default = reward("code_execution", tests_column="tests", cpu_seconds=2.0, wall_seconds=4.0)
    assert default([forged], tests=[weak_only]) == [None]
    assert "weak" in default.last_details[0]["reason"]
    assert default.metrics()["counts"]["only_weak_tests"] == 1
    with pytest.raises(ValueError, match="weak_tests"):
        reward("code_execution", weak_tests="sometimes")


class _FlakyBackend:
    name = "fake"

    def run(self, programs):
        return [RunResult("sandbox_error", error="injected") if "BROKEN" in p.code else RunResult("ok", stdout="3\n")
                for p in programs]

    def metrics(self):
        return {"backend": "fake"}


def test_sandbox_error_scores_none_not_zero():
    r = reward("code_execution", cpu_seconds=1.0)
    r._backend = _FlakyBackend()
    scores = r([fenced("print(3)  # BROKEN"), fenced("print(3)")],
               verification_info=[json.dumps({"inputs": ["", ""], "outputs": ["3", "3"]})] * 2)
    assert scores == [None, 1.0]
    assert r.metrics()["sandbox_error_rate"] == pytest.approx(0.5)


def test_missing_column_and_bad_cells(code_reward):
    with pytest.raises(KeyError, match="verification_info"):
        code_reward([fenced("print(1)")], answer=["1"])
    scores = code_reward([fenced("print(1)"), fenced("print(1)")],
                         verification_info=[{"nonsense": 1}, {"inputs": [""], "outputs": ["1"]}])
    assert scores == [None, 1.0]
    assert "unknown tests format" in code_reward.last_details[0]["reason"]


def test_a_whole_batch_in_parallel(code_reward):
    completions = [fenced("a, b = map(int, input().split())\nprint(a + b)")] * 48
    scores = code_reward(completions, verification_info=[ADD_TESTS] * 48)
    assert scores == [1.0] * 48


def test_toml_config_builds_and_validates():
    doc = parse_toml('[rewards.code]\nuse = "code_execution"\ncpu_seconds = 2.0\nmemory_mb = 256\nweight = 2.0\n',
                     "run.toml")
    composed = rewards_from_doc(doc)
    assert not doc.problems and composed is not None
    assert composed([fenced("print(3)")], verification_info=[{"inputs": [""], "outputs": ["3"]}]) == [2.0]
    bad = parse_toml('[rewards.code]\nuse = "code_execution"\ncpu_seconds = "fast"\nbackend = "nope"\n', "bad.toml")
    rewards_from_doc(bad)
    text = "\n".join(str(p) for p in bad.problems)
    assert "bad.toml:3: rewards.code.cpu_seconds" in text
    bad2 = parse_toml('[rewards.code]\nuse = "code_execution"\nbackend = "nope"\n', "bad2.toml")
    rewards_from_doc(bad2)
    assert "unknown sandbox backend 'nope'" in str(bad2.problems[0])
    bad3 = parse_toml('[rewards.code]\nuse = "code_execution"\nbackend = "piston"\n', "bad3.toml")
    rewards_from_doc(bad3)
    assert "needs url" in str(bad3.problems[0])


def test_fail_closed_without_the_default_layers(monkeypatch):
    weak = probe.Probe(("rlimits", "setsid", "subreaper"), 0, ("no landlock",))
    monkeypatch.setattr(probe, "probe", lambda: weak)
    doc = parse_toml('[rewards.code]\nuse = "code_execution"\n', "run.toml")
    rewards_from_doc(doc)
    assert doc.problems and "allow_unsafe_execution" in str(doc.problems[0]) and "seccomp" in str(doc.problems[0])
    ok = parse_toml('[rewards.code]\nuse = "code_execution"\nallow_unsafe_execution = true\n', "run.toml")
    assert rewards_from_doc(ok) is not None and not ok.problems


def test_rewards_share_one_pool_across_limits():
    a = reward("code_execution", cpu_seconds=1.0, wall_seconds=2.0)
    b = reward("code_execution_binary", cpu_seconds=3.0, wall_seconds=5.0)
    cell = [{"inputs": ["2\n"], "outputs": ["4\n"]}]
    assert a([fenced("print(int(input()) ** 2)")], verification_info=cell) == [1.0]
    assert b([fenced("import time\ntime.sleep(3)\nprint(4)")], verification_info=cell) == [1.0]  # its own 5 s
    assert a([fenced("import time\ntime.sleep(3)\nprint(4)")], verification_info=cell) == [0.0]  # 2 s: timeout
    assert a.backend is b.backend
    assert a.last_details[0]["statuses"] == ["timeout"]


def test_cpp_and_c_rewards():
    from grpo_rewards.sandbox.pool import compilers

    if not {"c", "cpp"} <= compilers().keys():
        pytest.skip("gcc/g++ not installed")
    tests = json.dumps({"language": "cpp", "test_cases": [{"input": "1 2\n", "output": "3\n"},
                                                          {"input": "10 -4\n", "output": "6\n"}]})
    right = "#include <bits/stdc++.h>\nint main(){long long a,b;std::cin>>a>>b;std::cout<<a+b<<\"\\n\";}"
    half = "#include <stdio.h>\nint main(){int a,b;scanf(\"%d %d\",&a,&b);printf(\"%d\\n\", a > 5 ? 0 : a+b);}"
    r = reward("code_execution", language="cpp", cpu_seconds=20.0, wall_seconds=60.0)  # compiles under these too
    completions = [f"```cpp\n{right}\n```", f"```c++\n{half}\n```", "```cpp\nint main( {\n```", "no code"]
    assert r(completions, verification_info=[tests] * 4) == [1.0, 0.5, 0.0, 0.0]
    assert r.last_details[2]["statuses"] == ["compile_error", "compile_error"]
    c = reward("code_execution", language="c", cpu_seconds=2.0, wall_seconds=4.0)
    c_tests = json.dumps({"inputs": ["1 2\n"], "outputs": ["3\n"]})
    assert c([f"```c\n{half}\n```"], verification_info=[c_tests]) == [1.0]
    fn_tests = json.dumps({"fn_name": "add", "inputs": [[1, 2]], "outputs": [3]})
    assert c([f"```c\n{half}\n```"], verification_info=[fn_tests]) == [None]  # stdin/stdout only: a data problem
