"""The channel pairs and the system call probes in a pool an unprivileged user starts (the ``default`` profile
as a non-root trainer gets it: no slot uid, so every program shares that user's uid with the pool and with
each other; no namespaces, no tmpfs, no cgroup). The receiver must not get the token, the probes are refused,
and the user's own process can create a timer while a program holds every signal it could queue."""

from __future__ import annotations

import os
import shutil

import pytest

from .conftest import needs_default
from .test_nonroot import REPO, run_as_unprivileged, unprivileged_workspace
from .test_syscalls import EXPECTED

pytestmark = [needs_default, pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"),
                                                reason="needs root and setpriv to run as an unprivileged user"),
              pytest.mark.skipif(os.uname().machine != "x86_64", reason="the programs name x86_64 numbers")]

SCRIPT = r"""
import ctypes, json, os, sys, threading, time
sys.path.insert(0, sys.argv[1])
from grpo_rewards.sandbox.pool import LocalSandbox, compilers
from grpo_rewards.sandbox.program import Limits, Program
from tests.sandbox import hostile_channels as H
limits = Limits(cpu_seconds=5.0, wall_seconds=8.0, memory_mb=512, output_bytes=1 << 16, file_size_mb=8)
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def timer_ok():
    tid = ctypes.c_int(0)
    return libc.syscall(ctypes.c_long(222), ctypes.c_long(1), None, ctypes.byref(tid)) == 0
out = {"pairs": {}}
with LocalSandbox(slots=2, limits=limits) as box:
    out["profile"], out["layers"] = box.profile, box.layers
    kinds = list(H.PY_KINDS) + ["sigqueue_1", "sigqueue_0"]
    for kind in kinds:
        tok = H.token()
        if kind.startswith("sigqueue"):
            tok = tok | 1 if kind.endswith("1") else tok & ~1
        s, r = box.run([Program(p) for p in H.python_pair(kind.split("_")[0] if kind.startswith("sig") else kind, tok)])
        out["pairs"][kind] = [tok, s.status, r.status, s.stdout, r.stdout, r.stderr[-300:]]
    r = box.run_one(Program(H.PY_PROBES))
    out["probes"] = [r.status, r.stdout]
    held = {}
    worker = threading.Thread(target=lambda: held.update(r=box.run_one(Program(H.SIGQUEUE_HOLD.replace("HOLD", "3.0")))))
    worker.start()
    time.sleep(1.8)
    out["timer_while_held"] = timer_ok()
    worker.join()
    out["held"] = [held["r"].status, held["r"].stdout]
    if "c" in compilers():
        tok = H.token()
        s, r = box.run([Program(p, "", "c") for p in H.c_pair(tok, False)])
        out["c_pair"] = [tok, s.status, r.status, s.stdout, r.stdout]
        r = box.run_one(Program(H.C_PROBES, "", "c"))
        out["c_probes"] = [r.status, r.stdout]
print("RESULT " + json.dumps(out))
"""


def _window(stdout: str) -> tuple[float, float]:
    line = next(x for x in stdout.splitlines() if x.startswith("window "))
    return float(line.split()[1]), float(line.split()[2])


def _got(stdout: str) -> str:
    return next((x for x in stdout.splitlines() if x.startswith("got ")), "got ?").split(None, 1)[1]


def test_a_non_root_pool_keeps_programs_apart():
    from . import hostile_channels as H

    with unprivileged_workspace("grpo-nonroot-ch-", SCRIPT) as (tmp, exe, env, script):
        os.chmod(tmp, 0o777)
        res = run_as_unprivileged(exe, [script, REPO], env=env, cwd=tmp, timeout=400)
    assert res["profile"] == "default" and "uid" not in res["layers"] and "tmpfs-scratch" not in res["layers"]
    for kind, (tok, s_status, r_status, s_out, r_out, r_err) in res["pairs"].items():
        assert (s_status, r_status) == ("ok", "ok"), (kind, r_err)
        (s0, s1), (r0, r1) = _window(s_out), _window(r_out)
        assert max(s0, r0) < min(s1, r1), (kind, "the pair did not overlap")
        if not kind.startswith("sigqueue"):
            assert _got(r_out) == "none", (kind, tok, r_out)
    assert _got(res["pairs"]["sigqueue_1"][4]) == _got(res["pairs"]["sigqueue_0"][4]), res["pairs"]
    status, stdout = res["probes"]
    assert status == "ok" and "done" in stdout
    got = {x.split()[0]: x.split()[1] for x in stdout.splitlines() if len(x.split()) == 2}
    assert all(got[n] == f"refused:{EXPECTED[n]}" for n in H.PROBE_NAMES), got
    assert res["held"][0] == "ok" and res["held"][1].split()[:2] == ["queued", "0"], res["held"]
    assert res["timer_while_held"] is True
    if "c_pair" in res:
        tok, s_status, r_status, s_out, r_out = res["c_pair"]
        assert (s_status, r_status) == ("ok", "ok") and _got(r_out) == "none", res["c_pair"]
        status, stdout = res["c_probes"]
        got = {x.split()[0]: x.split()[1] for x in stdout.splitlines() if len(x.split()) == 2}
        assert status == "ok" and all(got[n] == f"refused:{EXPECTED[n]}" for n in H.C_PROBE_NAMES), got
