"""A pool started by an unprivileged user: the ``default`` profile as a non-root trainer really gets it
(no slot uid, no namespaces, no tmpfs), against the hole programs. Needs root to become that user."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

import pytest

from .conftest import needs_default

pytestmark = [needs_default, pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                                                reason="needs root and setpriv to run as an unprivileged user")]

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
UID = 65533

SCRIPT = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1])
from grpo_rewards.sandbox.pool import LocalSandbox, compilers
from grpo_rewards.sandbox.program import Limits, Program
from tests.sandbox import hostile_more as H
limits = Limits(cpu_seconds=20.0, wall_seconds=30.0, memory_mb=512, output_bytes=1 << 20, file_size_mb=8)
out = {}
with LocalSandbox(slots=1, limits=limits) as box:
    out["profile"], out["layers"] = box.profile, box.layers
    progs = {"signals": H.signal_program(os.getppid(), os.getpid()), "deep_tree": H.DEEP_TREE,
             "closed_tree": H.CLOSED_TREE, "disk_fill": H.DISK_FILL, "inode_fill": H.INODE_FILL,
             "euid": "import os\nprint(os.geteuid())"}
    for name, code in progs.items():
        r = box.run_one(Program(code))
        out[name] = [r.status, r.stdout[-2000:], r.error]
    if "cpp" in compilers():
        r = box.run_one(Program("#include <cstdio>\nint main(){ puts(\"hi\"); }", "", "cpp"))
        out["cpp"] = [r.status, r.stdout, r.error]
    out["left"] = box.scratch_entries()
    out["zygote_deaths"] = box.metrics()["zygote_deaths"]
print("RESULT " + json.dumps(out))
"""


def _interpreter(tmp: str) -> tuple[list[str], dict[str, str]] | None:
    """An interpreter the unprivileged user can run with this checkout importable, or None."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": tmp, "LANG": "C.UTF-8"}
    candidates = [(sys.executable, REPO + os.pathsep + os.pathsep.join(p for p in sys.path if "site-packages" in p))]
    system = shutil.which("python3", path="/usr/bin:/bin")
    if system:  # the system interpreter, with a copy of pluggy (pure Python) beside the checkout
        import pluggy

        site = os.path.join(tmp, "site")
        shutil.copytree(os.path.dirname(pluggy.__file__), os.path.join(site, "pluggy"))
        candidates.append((system, REPO + os.pathsep + site))
    for exe, path in candidates:
        probe = subprocess.run(["setpriv", f"--reuid={UID}", f"--regid={UID}", "--clear-groups", exe, "-c",
                                "from grpo_rewards.sandbox.pool import LocalSandbox\nLocalSandbox(slots=1).close()"],
                               env={**env, "PYTHONPATH": path},
                               capture_output=True, cwd=tmp)
        if probe.returncode == 0:
            return [exe], {**env, "PYTHONPATH": path}
    return None


def test_a_non_root_pool_contains_the_hole_programs():
    import json

    tmp = tempfile.mkdtemp(prefix="grpo-nonroot-")
    os.chmod(tmp, 0o755)
    try:
        found = _interpreter(tmp)
        if found is None:
            pytest.skip("no interpreter with this checkout that an unprivileged user can run")
        exe, env = found
        script = os.path.join(tmp, "run.py")
        with open(script, "w") as fh:
            fh.write(SCRIPT)
        os.chmod(tmp, 0o777)
        out = subprocess.run(["setpriv", f"--reuid={UID}", f"--regid={UID}", "--clear-groups", *exe, script, REPO],
                             env=env, capture_output=True, text=True, cwd=tmp, timeout=300)
        line = next((x for x in out.stdout.splitlines() if x.startswith("RESULT ")), None)
        assert line, out.stderr[-3000:]
        res = json.loads(line[7:])
    finally:
        subprocess.run(["rm", "-rf", tmp], check=False)
    assert res["profile"] == "default" and "uid" not in res["layers"] and "tmpfs-scratch" not in res["layers"]
    status, stdout, _ = res["signals"]
    assert status == "ok" and all(x.split()[-1].startswith("refused") for x in stdout.splitlines() if x != "done")
    assert res["deep_tree"][0] in ("ok", "output_limit") and res["closed_tree"][0] == "ok", res
    assert res["disk_fill"][0] == "output_limit" and res["inode_fill"][0] == "output_limit", res
    assert res["euid"][1].strip() == str(UID)
    if "cpp" in res:
        assert res["cpp"][:2] == ["ok", "hi\n"], res["cpp"]
    assert res["left"] == [] and res["zygote_deaths"] == 0
