"""The thread-id pairs (:mod:`hostile_counters`) in a pool an unprivileged user starts: the ``default`` profile
with a pid namespace per slot, made in a user namespace of the zygote's own where the kernel allows one. The
receiver finds no thread id skipped while the sender, in the other slot, creates thousands of threads; a
thread pidfd is refused; one slot's runs see the same pid and thread id before and after a sender; a program
holds no capability of that user namespace; no process of another slot, nor of the host, exists for it. Through the API and as two ``grpo sandbox run`` at once."""

from __future__ import annotations

import errno
import os
import shutil

import pytest

from grpo_rewards.sandbox.jail import pidns

from . import hostile_counters as H
from .conftest import needs_default
from .test_nonroot import REPO, run_as_unprivileged, unprivileged_workspace

pytestmark = [needs_default, pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                                                reason="needs root and setpriv to run as an unprivileged user"),
              pytest.mark.skipif(not pidns.user_namespaces_possible(),
                                 reason="this kernel refuses unprivileged user namespaces")]

SCRIPT = r"""
import json, os, subprocess, sys
sys.path.insert(0, sys.argv[1])
from grpo_rewards.sandbox.pool import LocalSandbox, compilers
from grpo_rewards.sandbox.program import Limits, Program
from tests.sandbox import hostile_counters as H
limits = Limits(cpu_seconds=5.0, wall_seconds=8.0, memory_mb=512, output_bytes=1 << 16, file_size_mb=8)
CAPS = ("import ctypes\nh = (ctypes.c_uint32 * 2)(0x20080522, 0)\nd = (ctypes.c_uint32 * 6)()\n"
        "print('caps', ctypes.CDLL(None).capget(h, d), *d)")
out = {"pairs": {}}
tok = int(sys.argv[2])
languages = ["python"] + (["c"] if "c" in compilers() else [])
with LocalSandbox(slots=2, limits=limits) as box:
    out["profile"], out["layers"] = box.profile, box.layers
    for language in languages:
        pair = (H.python_pair if language == "python" else H.c_pair)(tok)
        s, r = box.run([Program(p, "", language) for p in pair])
        out["pairs"][language] = [s.status, r.status, s.stdout, r.stdout, r.stderr[-300:]]
    out["caps"] = box.run_one(Program(CAPS)).stdout
    holder, scanner = box.run([Program(p) for p in H.scan_pair()])
    out["scan"] = [holder.status, scanner.status, scanner.stdout]
with LocalSandbox(slots=1, limits=limits) as box:
    for language in languages:
        probe = H.PY_TID_PROBE if language == "python" else H.C_TID_PROBE
        sender = (H.python_pair if language == "python" else H.c_pair)(tok, hold=0.5)[0]
        runs = [box.run_one(Program(code, "", language)) for code in (probe, sender, probe)]
        out[f"next_run_{language}"] = [[r.status, r.stdout] for r in runs]
paths = []
for name, code in zip(("sender", "receiver"), H.python_pair(tok, hold=4.0)):
    paths.append(os.path.join(os.getcwd(), name + ".py"))
    with open(paths[-1], "w") as fh:
        fh.write(code)
env = dict(os.environ)
import importlib.metadata
if not list(importlib.metadata.entry_points(group="grpo")):  # an interpreter this checkout is not installed in
    info = os.path.join(os.getcwd(), "meta", "grpo_toolkit-0.0.dist-info")
    os.makedirs(info)
    with open(os.path.join(info, "METADATA"), "w") as fh:
        fh.write("Metadata-Version: 2.1\nName: grpo-toolkit\nVersion: 0.0\n")
    with open(os.path.join(info, "entry_points.txt"), "w") as fh:
        fh.write("[grpo]\nbuiltin_sandbox = grpo_rewards.sandbox.plugin\nbuiltin_sandbox_cli = grpo_rewards.sandbox.cli\n")
    env["PYTHONPATH"] = os.path.dirname(info) + os.pathsep + env.get("PYTHONPATH", "")
CLI = "import sys\nsys.path.insert(0, sys.argv[1])\nfrom grpo_rewards.command_line import main\nsys.exit(main(sys.argv[2:]))"
procs = [subprocess.Popen([sys.executable, "-c", CLI, sys.argv[1], "sandbox", "run", p, "--wall-seconds", "10",
                           "--cpu-seconds", "5"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
         for p in paths]  # two `grpo sandbox run` at once
out["cli"] = [p.communicate(timeout=120)[0] for p in procs]
print("RESULT " + json.dumps(out))
"""


def _window(stdout: str) -> tuple[float, float]:
    start, end = H.field(stdout, "window").split()
    return float(start), float(end)


def _overlap(a: str, b: str) -> bool:
    (a0, a1), (b0, b1) = _window(a), _window(b)
    return max(a0, b0) < min(a1, b1)


def test_a_non_root_pool_gives_each_slot_its_own_pids():
    from . import hostile_channels

    tok = hostile_channels.token()
    with unprivileged_workspace("grpo-nonroot-pid-", SCRIPT) as (tmp, exe, env, script):
        os.chmod(tmp, 0o777)
        res = run_as_unprivileged(exe, [script, REPO, str(tok)], env={**env, "PYTHONPATH": REPO + os.pathsep +
                                                                         env.get("PYTHONPATH", "")},
                                  cwd=tmp, timeout=400)
    assert res["profile"] == "default" and "uid" not in res["layers"] and "pidns" in res["layers"], res["layers"]
    for language, (s_status, r_status, s_out, r_out, r_err) in res["pairs"].items():
        assert (s_status, r_status) == ("ok", "ok"), (language, r_err)
        assert _overlap(s_out, r_out), (language, "the pair did not overlap")
        assert H.field(s_out, "sent") == str(tok), s_out
        assert H.field(r_out, "got") == "0", (language, tok, r_out)
        if language == "c":
            assert H.field(r_out, "pidfd") == f"refused:{errno.EINVAL}", r_out
    assert res["caps"].split() == ["caps", "0", "0", "0", "0", "0", "0", "0"], res["caps"]
    h_status, s_status, scan = res["scan"]  # the other slot's threads (and every host process) do not exist
    seen, own = [int(x) for x in H.field(scan, "seen").split()], int(H.field(scan, "own"))
    assert (h_status, s_status) == ("ok", "ok") and seen[0] <= 3 and all(p <= own for p in seen[1:]), scan
    for language in res["pairs"]:
        (s0, o0), (s1, _), (s2, o2) = res[f"next_run_{language}"]
        assert (s0, s1, s2) == ("ok", "ok", "ok") and H.field(o0, "first") == H.field(o2, "first") != "?", (o0, o2)
    sender, receiver = res["cli"]
    assert "status: ok" in sender and "status: ok" in receiver, res["cli"]
    assert _overlap(sender, receiver), res["cli"]
    assert H.field(receiver, "got") == "0", receiver
