"""A pool started by an unprivileged user: the ``default`` profile as a non-root trainer really gets it
(no slot uid, no namespaces, no tmpfs, no cgroup), against the hole programs: signals through files,
uncleanable trees, disk floods, host file metadata, the scheduling and limits of the pool's own processes
(which share the program's uid), threads past the task limit, fallocate, memory held in memfds. Needs root
to become that user."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from . import hostile_more as H
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
    victim, folder = sys.argv[2], os.path.dirname(sys.argv[2])
    more = {"metadata": H.metadata_program(victim, folder), "shared_uid": H.shared_uid_program({"owner": os.getpid()}),
            "memfd_hoard": H.MEMFD_HOARD, "shm_hoard": H.SHM_HOARD}
    hoard = limits.__class__(**{**limits.as_dict(), "memory_mb": 256})
    for name, code in more.items():
        r = box.run_one(Program(code, "", "python", hoard if name.endswith("hoard") else None))
        out[name] = [r.status, r.stdout[-4000:], r.error + " " + r.stderr[-300:]]
    out["owner_after"] = [os.getpriority(os.PRIO_PROCESS, 0), sorted(os.sched_getaffinity(0)), os.sched_getscheduler(0)]
    if "cpp" in compilers():
        r = box.run_one(Program("#include <cstdio>\nint main(){ puts(\"hi\"); }", "", "cpp"))
        out["cpp"] = [r.status, r.stdout, r.error]
        for name, code in H.c_metadata_programs(os.getpid(), victim).items():
            r = box.run_one(Program(code, "", "c"))
            out[name] = [r.status, r.stdout, r.error]
        r = box.run_one(Program(H.C_MEMFD_HOARD, "", "c", hoard))
        out["c_memfd_hoard"] = [r.status, r.stdout, r.error]
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


@contextlib.contextmanager
def unprivileged_workspace(prefix: str, script_text: str) -> Iterator[tuple[str, list[str], dict[str, str], str]]:
    """A temporary folder the unprivileged user can enter, an interpreter that user can run with this checkout
    (skips without one), and ``script_text`` written to ``run.py`` in it: ``(folder, exe, env, script)``; the
    folder is removed afterwards."""
    tmp = tempfile.mkdtemp(prefix=prefix)
    os.chmod(tmp, 0o755)
    try:
        found = _interpreter(tmp)
        if found is None:
            pytest.skip("no interpreter with this checkout that an unprivileged user can run")
        exe, env = found
        script = os.path.join(tmp, "run.py")
        with open(script, "w") as fh:
            fh.write(script_text)
        yield tmp, exe, env, script
    finally:
        subprocess.run(["rm", "-rf", tmp], check=False)


def run_as_unprivileged(exe: list[str], args: list[str], *, env: dict[str, str], cwd: str, timeout: int) -> dict:
    """Run ``exe args`` as :data:`UID` (setpriv) and return the JSON its ``RESULT `` line carries."""
    import json

    out = subprocess.run(["setpriv", f"--reuid={UID}", f"--regid={UID}", "--clear-groups", *exe, *args],
                         env=env, capture_output=True, text=True, cwd=cwd, timeout=timeout)
    line = next((x for x in out.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert line, out.stderr[-3000:]
    return json.loads(line[7:])


def test_a_non_root_pool_contains_the_hole_programs():

    with unprivileged_workspace("grpo-nonroot-", SCRIPT) as (tmp, exe, env, script):
        os.chmod(tmp, 0o777)
        # a file of the pool's own user, with a user extended attribute and an old time, in a sticky folder
        folder = os.path.join(tmp, "host")
        os.mkdir(folder, 0o1777)
        os.chmod(folder, 0o1777)
        victim = os.path.join(folder, "victim")
        with open(victim, "w") as fh:
            fh.write("intact")
        os.chown(victim, UID, UID)
        os.chmod(victim, 0o644)
        os.setxattr(victim, "user.grpo", b"host-secret")
        for path in (victim, folder):
            os.utime(path, (1_000_000_000, 1_000_000_000))
        res = run_as_unprivileged(exe, [script, REPO, victim], env=env, cwd=tmp, timeout=300)
        host = (os.listxattr(victim), os.getxattr(victim, "user.grpo"), os.stat(victim).st_mtime,
                os.stat(folder).st_mtime, os.stat(victim).st_mode & 0o777, Path(victim).read_text())
    assert res["profile"] == "default" and "uid" not in res["layers"] and "tmpfs-scratch" not in res["layers"]
    status, stdout, _ = res["signals"]
    assert status == "ok" and all(x.split()[-1].startswith("refused") for x in stdout.splitlines() if x != "done")
    assert res["deep_tree"][0] in ("ok", "output_limit") and res["closed_tree"][0] == "ok", res
    assert res["disk_fill"][0] == "output_limit" and res["inode_fill"][0] == "output_limit", res
    assert res["euid"][1].strip() == str(UID)
    if "cpp" in res:
        assert res["cpp"][:2] == ["ok", "hi\n"], res["cpp"]
    assert res["left"] == [] and res["zygote_deaths"] == 0
    # host file metadata: refused (times and modes: a no-op), nothing changed on the pool owner's file
    status, stdout, why = res["metadata"]
    assert status == "ok", why
    got = {line.split()[0]: line.split()[1] for line in stdout.splitlines() if line.strip()}
    assert all(got[name].startswith("refused") for name in H.METADATA_REFUSED), stdout
    assert host == (["user.grpo"], b"host-secret", 1_000_000_000, 1_000_000_000, 0o644, "intact"), host
    # the pool's owner and the zygote share the program's uid: not reniced, pinned or limit-read
    status, stdout, why = res["shared_uid"]
    assert status == "ok", why
    got = H.shared_uid_results(stdout)
    others = {k: v for k, v in got.items() if ":" in k and not k.startswith("self:")}
    assert len(others) == 25 and all(v.startswith("refused") for v in others.values()), others
    assert all(v == "done" for k, v in got.items() if k.startswith("self:")), got
    assert res["owner_after"][0] == 0 and res["owner_after"][2] == os.SCHED_OTHER, res["owner_after"]
    assert len(res["owner_after"][1]) == len(os.sched_getaffinity(0))
    assert int(got["threads"]) <= 64 and int(got["reserved"]) <= 1 << 17, got  # RLIMIT_NPROC; no fallocate
    # no memory cgroup without root: memfd_create is refused, /dev/shm is outside Landlock's rules
    assert "cgroup" not in res["layers"]
    for name in ("memfd_hoard", "shm_hoard"):
        assert res[name][0] == "runtime_error" and "PermissionError" in res[name][2], res[name]
    if "cpp" in res:
        for name in ("c_metadata", "c_shared_uid"):
            status, stdout, why = res[name]
            assert status == "ok" and stdout and all(line.split()[1] == "-1" for line in stdout.splitlines()), res[name]
        assert res["c_memfd_hoard"][:2] == ["ok", "refused 0\n"], res["c_memfd_hoard"]
