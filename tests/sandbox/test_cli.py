"""``grpo sandbox probe|run|serve``."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys

import pytest

from grpo_rewards.command_line import main
from grpo_rewards.sandbox.backends.sandboxfusion import SandboxFusionBackend
from grpo_rewards.sandbox.program import Program

from .conftest import FOUND, needs_default

pytestmark = needs_default


def test_probe_prints_layers(capsys):
    assert main(["sandbox", "probe"]) == 0
    out = capsys.readouterr().out
    assert f"profile: {FOUND.profile}" in out and "seccomp" in out


def test_run_prints_status_output_and_layers(tmp_path, capsys):
    prog = tmp_path / "p.py"
    prog.write_text("import sys\nprint(sys.stdin.read().strip().upper())\n")
    stdin = tmp_path / "in.txt"
    stdin.write_text("hello sandbox\n")
    assert main(["sandbox", "run", str(prog), "--stdin", str(stdin)]) == 0
    out = capsys.readouterr().out
    assert "status: ok" in out and "HELLO SANDBOX" in out and "layers: " in out and "landlock-fs" in out


def test_run_reports_failures_and_json(tmp_path, capsys):
    prog = tmp_path / "loop.py"
    prog.write_text("while True:\n    pass\n")
    assert main(["sandbox", "run", str(prog), "--cpu-seconds", "1", "--wall-seconds", "2", "--json"]) == 1
    result = json.loads(capsys.readouterr().out)
    assert result["status"] == "timeout" and "seccomp" in result["layers"]
    assert main(["sandbox", "run", str(tmp_path / "missing.py")]) == 2
    assert "missing.py" in capsys.readouterr().err


def test_serve_over_http():
    env = {**os.environ, "GRPO_TEST_TOKEN": "tok"}
    proc = subprocess.Popen([sys.executable, "-m", "grpo_rewards", "sandbox", "serve", "--port", "0", "--slots", "1",
                             "--token-env", "GRPO_TEST_TOKEN"], stdout=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline()
        url = re.search(r"http://\S+", line).group(0)
        assert "layers=" in line
        with SandboxFusionBackend(url, retries=0, api_key="tok") as client:
            assert client.run_one(Program("print(6 * 7)")).stdout == "42\n"
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0


def test_registering_the_plugin_stays_light():
    """Listing plugins must not start a pool or load ctypes: heavy modules load on first use."""
    code = ("import sys\nfrom grpo_rewards.plugins import load_registry\nload_registry()\n"
            "heavy = [m for m in ('ctypes', 'grpo_rewards.sandbox.pool', 'grpo_rewards.sandbox.jail.zygote') "
            "if m in sys.modules]\nprint(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_rewards_score_with_the_code_reward(tmp_path, capsys):
    """The user's workflow: a TOML with the code reward, a JSONL of completions, `grpo rewards score`."""
    config = tmp_path / "rewards.toml"
    config.write_text('[rewards.tests]\nuse = "code_execution"\ncpu_seconds = 2.0\nwall_seconds = 4.0\n')
    tests = {"language": "python", "test_cases": [{"input": "2\n", "output": "4\n"}, {"input": "5\n", "output": "25\n"}]}
    rows = [{"completion": "```python\nn = int(input())\nprint(n * n)\n```", "verification_info": tests},
            {"completion": "```python\nprint(4)\n```", "verification_info": tests},
            {"completion": "I do not know.", "verification_info": tests}]
    data = tmp_path / "rows.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    out = tmp_path / "scored.jsonl"
    assert main(["rewards", "score", str(config), "--input", str(data), "--output", str(out)]) == 0
    scored = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["tests"] for r in scored] == [1.0, 0.5, 0.0]


def test_run_takes_a_profile_and_a_cpp_file(tmp_path, capsys, monkeypatch):
    from grpo_rewards.sandbox import probe
    from grpo_rewards.sandbox.pool import compilers

    prog = tmp_path / "p.py"
    prog.write_text("print(1)\n")
    profile = "hardened" if "uid" in FOUND.layers else "default"
    assert main(["sandbox", "run", str(prog), "--profile", profile, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["profile"] in (profile, "strict")
    if "cpp" in compilers():
        cpp = tmp_path / "p.cpp"
        cpp.write_text("#include <iostream>\nint main(){ std::cout << 6 * 7 << std::endl; }\n")
        assert main(["sandbox", "run", str(cpp), "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["stdout"] == "42\n"
    lacking = probe.Probe(tuple(x for x in FOUND.layers if x != "bwrap"), FOUND.landlock_abi)
    monkeypatch.setattr(probe, "probe", lambda: lacking)
    assert main(["sandbox", "run", str(prog), "--profile", "strict"]) == 2
    assert "bubblewrap" in capsys.readouterr().err


def test_the_sandbox_fusion_client_runs_python_and_cpp_against_serve():
    """SandboxFusion's own client (the ``sandbox-fusion`` package) against ``grpo sandbox serve``."""
    sf = pytest.importorskip("sandbox_fusion")
    from grpo_rewards.sandbox.pool import compilers

    proc = subprocess.Popen([sys.executable, "-m", "grpo_rewards", "sandbox", "serve", "--port", "0", "--slots", "2"],
                            stdout=subprocess.PIPE, text=True)
    try:
        url = re.search(r"http://\S+", proc.stdout.readline()).group(0)
        py = sf.run_code(sf.RunCodeRequest(code="print(input()[::-1])", stdin="abc\n", language="python"),
                         endpoint=url, max_attempts=1)
        assert py.status == sf.RunStatus.Success and py.run_result.stdout == "cba\n"
        failed = sf.run_code(sf.RunCodeRequest(code="raise SystemExit(3)", language="python"), endpoint=url,
                             max_attempts=1)
        assert failed.status == sf.RunStatus.Failed and failed.run_result.return_code == 3
        if "cpp" not in compilers():
            pytest.skip("g++ not installed: the C++ half needs it")
        cpp = sf.run_code(sf.RunCodeRequest(
            code="#include <iostream>\nint main(){int a,b;std::cin>>a>>b;std::cout<<a*b<<'\\n';}",
            stdin="6 7\n", language="cpp"), endpoint=url, max_attempts=1)
        assert cpp.status == sf.RunStatus.Success and cpp.run_result.stdout == "42\n"
        assert cpp.compile_result is not None and cpp.compile_result.return_code == 0
        broken = sf.run_code(sf.RunCodeRequest(code="int main( {", language="cpp"), endpoint=url, max_attempts=1)
        assert broken.status == sf.RunStatus.Failed and broken.run_result is None
        assert broken.compile_result.return_code != 0 and "error" in broken.compile_result.stderr
        assert sf.summary_run_code_result(broken, sf.SummaryMapping()) == "Failed"
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
