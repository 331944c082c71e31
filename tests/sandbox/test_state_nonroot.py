"""The earlier-result, test-data, compile and judging classes in a pool started by an unprivileged user
(the ``default`` profile as a non-root trainer gets it: no slot uid, no mount namespace, no cgroup), through
the pool, the code reward, ``grpo sandbox run`` and ``grpo sandbox serve``. Needs root to become that user."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from .conftest import needs_default
from .test_nonroot import REPO, UID, run_as_unprivileged, unprivileged_workspace

pytestmark = [needs_default, pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                                                reason="needs root and setpriv to run as an unprivileged user")]

SCRIPT = r"""
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
site = sys.argv[2]
sys.path.append(site)
from grpo_rewards import reward
from grpo_rewards.command_line import main
from grpo_rewards.sandbox.pool import LocalSandbox, compilers
from grpo_rewards.sandbox.program import Limits, Program
from tests.sandbox import hostile_state as H
limits = Limits(cpu_seconds=20.0, wall_seconds=60.0, memory_mb=1024, output_bytes=1 << 20, file_size_mb=8)
out = {"compilers": sorted(compilers())}
with LocalSandbox(slots=1, limits=limits, compile_cache_mb=48) as box:
    out["profile"], out["layers"] = box.profile, box.layers
    first = box.run_one(Program(H.FIRST))
    out["first"] = [first.status, first.exit_code, len(first.stdout)]
    probe = box.run_one(Program(H.PROBE))
    out["probe"] = [probe.status, H.found(probe.stdout) if probe.status == "ok" else probe.stderr[-500:]]
    if "c" in out["compilers"]:
        box.run_one(Program(H.FIRST_C, "", "c"))
        probe = box.run_one(Program(H.PROBE_C, "", "c"))
        out["probe_c"] = [probe.status, H.found(probe.stdout) if probe.status == "ok" else probe.error]
        for n in range(1, 5):
            box.run_one(Program(H.BIG.format(n=n), "", "c", H.BIG_LIMITS))
        out["cache_bytes"] = box.metrics()["compile_cache_bytes"]
    if "cpp" in out["compilers"]:
        t0 = time.monotonic()
        r = box.run_one(Program(H.BOMB, "", "cpp", H.BOMB_LIMITS))
        out["bomb"] = [r.status, time.monotonic() - t0]
    r = box.run_one(Program(H.thief(site)))
    out["thief"] = [r.status, H.outcome(r.stdout), H.ANSWER in r.stdout]
with LocalSandbox(slots=1, limits=limits, packages=["answers_pkg"]) as box:
    r = box.run_one(Program(H.thief(site)))
    out["allowed"] = [r.status, H.outcome(r.stdout)]
fence = "```python\n{}\n```"
completions = [fence.format(H.ORACLE_FIRST)] + [fence.format(H.ORACLE_SIBLING)] * 3
tests = [json.dumps(H.ORACLE_TESTS)] * 4
out["oracle"] = reward("code_execution", slots=1, cpu_seconds=5.0, wall_seconds=20.0)(completions,
                                                                                   verification_info=tests)
judged = json.dumps({"language": "python", "test_cases": [{"input": "", "output": "1000000007\n"}]})
out["integers"] = reward("code_execution", float_tolerance=1e-6, cpu_seconds=5.0, wall_seconds=20.0)(
    [fence.format("print(1000000008)"), fence.format("print(1000000007)")], verification_info=[judged] * 2)
tmp = sys.argv[3]
prog = os.path.join(tmp, "p.py")
with open(prog, "w") as fh:
    fh.write("import answers_pkg\nprint(answers_pkg.EXPECTED)\n")
out["cli_run"] = main(["sandbox", "run", prog])
import re, signal, subprocess
from grpo_rewards.sandbox.backends.sandboxfusion import SandboxFusionBackend
server = subprocess.Popen([sys.executable, "-m", "grpo_rewards", "sandbox", "serve", "--port", "0", "--slots", "1",
                           "--cpu-seconds", "20", "--wall-seconds", "60"], stdout=subprocess.PIPE, text=True)
try:
    url = re.search(r"http://\S+", server.stdout.readline()).group(0)
    with SandboxFusionBackend(url, retries=0) as client:
        client.run_one(Program(H.FIRST))
        probe = client.run_one(Program(H.PROBE))
        out["served_probe"] = [probe.status, H.found(probe.stdout) if probe.status == "ok" else probe.stderr[-500:]]
finally:
    server.send_signal(signal.SIGTERM)
    out["served_exit"] = server.wait(timeout=30)
print("RESULT " + json.dumps(out))
"""


def test_a_non_root_pool_keeps_results_packages_and_compiles_to_themselves():
    with unprivileged_workspace("grpo-nonroot-state-", SCRIPT) as (tmp, exe, env, script):
        # the entry points the rewards register through, for an interpreter that has this checkout on its path
        # but not installed (the system one)
        import importlib.metadata

        meta = os.path.join(tmp, "meta", "grpo_toolkit-0.1.0.dist-info")
        os.makedirs(meta)
        with open(os.path.join(meta, "METADATA"), "w") as fh:
            fh.write("Metadata-Version: 2.1\nName: grpo-toolkit\nVersion: 0.1.0\n")
        with open(os.path.join(meta, "entry_points.txt"), "w") as fh:
            fh.write(importlib.metadata.distribution("grpo-toolkit").read_text("entry_points.txt") or "")
        env = {**env, "PYTHONPATH": env["PYTHONPATH"] + os.pathsep + os.path.dirname(meta)}
        site = os.path.join(tmp, "site", "site-packages")
        os.makedirs(os.path.join(site, "answers_pkg"))
        from . import hostile_state as H

        with open(os.path.join(site, "answers_pkg", "__init__.py"), "w") as fh:
            fh.write(f"EXPECTED = {H.ANSWER!r}\n")
        with open(os.path.join(site, "answers_pkg", "expected.json"), "w") as fh:
            json.dump({"outputs": [H.ANSWER]}, fh)
        with open(os.path.join(site, "answers_mod.py"), "w") as fh:
            fh.write(f"EXPECTED = {H.ANSWER!r}\n")
        work = os.path.join(tmp, "work")
        os.mkdir(work)
        subprocess.run(["chmod", "-R", "a+rX", tmp], check=True)
        os.chown(work, UID, UID)
        res = run_as_unprivileged(exe, [script, REPO, site, work], env=env, cwd=tmp, timeout=600)
    assert res["profile"] == "default" and "uid" not in res["layers"] and "mountns" not in res["layers"], res
    # class 1: nothing of the earlier run in the next program
    assert res["first"] == ["runtime_error", 77, 40961], res["first"]
    status, got = res["probe"]
    assert status == "ok", got
    assert got["control"] and got["frame_results"] == got["gc_results"] == got["memory_results"] == [], got
    assert got["fds"] == [] and not [p for p, s in got["proc"].items() if s == "read"], got
    if "probe_c" in res:
        status, got = res["probe_c"]
        assert status == "ok" and set(got["fds"]) <= {5} and "read" not in got["proc"].values(), got
    assert res["oracle"] == [1.0, 0.0, 0.0, 0.0], res
    status, got = res["served_probe"]
    assert status == "ok" and res["served_exit"] == 0, got
    assert got["frame_results"] == got["gc_results"] == got["memory_results"] == [], got
    # class 3: the dataset package off the allow-list is neither importable nor readable; on it, importable
    status, got, leaked = res["thief"]
    assert status == "ok" and not leaked and got.pop("stdlib") == "reached", res["thief"]
    assert len(got) == 8 and set(got.values()) == {"refused"}, got
    assert res["cli_run"] == 1  # grpo sandbox run: ModuleNotFoundError, the program's failure
    status, got = res["allowed"]
    assert got["import_pkg"] == "reached" and got["import_mod"] == "refused", got
    # class 5: the cache is bounded; a template bomb stops at the program's limits
    if "cache_bytes" in res:
        assert 20 << 20 <= res["cache_bytes"] <= 48 << 20, res["cache_bytes"]
    if "bomb" in res:
        assert res["bomb"][0] == "compile_error" and res["bomb"][1] < 8.0, res["bomb"]
    # class 6: an integer compares exactly under a float tolerance
    assert res["integers"] == [0.0, 1.0], res["integers"]
