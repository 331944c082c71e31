"""Pid numbers carry nothing between programs: a slot's pid namespace and its counter set back before every
child. Pairs of programs (Python and C, :mod:`hostile_counters`) in two slots at the same time, on every
profile this machine offers: the sender creates thousands of threads, the receiver finds no thread id
skipped between two of its own; a thread pidfd (numbered machine-wide) is refused. Each pair is first run
outside the sandbox, where the receiver sees every one of the sender's threads. One slot's runs, one after
another: a probe prints the same pid and thread id before and after a sender ran there. Through the command
line too (two ``grpo sandbox run`` at once). As an unprivileged user: ``test_nonroot_counters``."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import tempfile

import pytest

from grpo_rewards.sandbox.jail import pidns
from grpo_rewards.sandbox.pool import LocalSandbox, compilers
from grpo_rewards.sandbox.program import Limits, Program

from . import hostile_channels
from . import hostile_counters as H
from .conftest import PROFILE_OPTIONS, needs_default

pytestmark = [needs_default, pytest.mark.skipif(os.geteuid() != 0 and not pidns.user_namespaces_possible(),
                                                reason="not root, and this kernel refuses user namespaces: no pidns")]

LIMITS = Limits(cpu_seconds=5.0, wall_seconds=8.0, memory_mb=512, output_bytes=1 << 16, file_size_mb=8)
PROFILES = list(PROFILE_OPTIONS) or ["auto"]
needs_gcc = pytest.mark.skipif("c" not in compilers(), reason="needs gcc")


@pytest.fixture(scope="module", params=PROFILES)
def pool(request):
    with LocalSandbox(slots=2, limits=LIMITS, **PROFILE_OPTIONS.get(request.param, {})) as box:
        if "pidns" not in box.layers:
            pytest.skip(f"no pid namespace per slot here ({', '.join(box.layers)})")
        yield box


def _window(stdout: str) -> tuple[float, float]:
    start, end = H.field(stdout, "window").split()
    return float(start), float(end)


def run_pair(box: LocalSandbox, sender: str, receiver: str, language: str) -> str:
    """Both at once; checks they overlapped and the sender sent; the receiver's stdout."""
    s, r = box.run([Program(sender, "", language), Program(receiver, "", language)])
    assert s.status == "ok" and r.status == "ok", (s.status, s.error, s.stderr[-500:], r.status, r.error,
                                                   r.stderr[-500:])
    (s0, s1), (r0, r1) = _window(s.stdout), _window(r.stdout)
    assert max(s0, r0) < min(s1, r1), ("the pair did not run at the same time", s0, s1, r0, r1)
    assert H.field(s.stdout, "sent") != "?", s.stdout
    return r.stdout


def _outside(sender: str, receiver: str, language: str) -> str:
    """The pair as two plain processes: the receiver's stdout."""
    with tempfile.TemporaryDirectory() as tmp:
        commands = []
        for name, src in (("s", sender), ("r", receiver)):
            if language == "python":
                commands.append([sys.executable, "-c", src])
                continue
            path = os.path.join(tmp, name)
            with open(path + ".c", "w") as fh:
                fh.write(src)
            subprocess.run(["gcc", "-O2", "-pthread", "-o", path, path + ".c"], check=True)
            commands.append([path])
        procs = [subprocess.Popen(c, stdout=subprocess.PIPE, text=True, cwd=tmp) for c in commands]
        return [p.communicate(timeout=60)[0] for p in procs][1]


@pytest.mark.parametrize("language", ["python", pytest.param("c", marks=needs_gcc)])
def test_the_channel_works_outside(language):
    tok = hostile_channels.token()
    pair = H.python_pair(tok) if language == "python" else H.c_pair(tok)
    out = _outside(*pair, language)
    assert int(H.field(out, "got")) >= tok, (tok, out)
    if language == "c":
        assert int(H.field(out, "pidfd")) >= tok, (tok, out)  # a thread pidfd's inode: the machine's count


def test_python_pair_cannot_talk(pool):
    tok = hostile_channels.token()
    out = run_pair(pool, *H.python_pair(tok), "python")
    assert H.field(out, "got") == "0", (tok, out)


@needs_gcc
def test_c_pair_cannot_talk(pool):
    tok = hostile_channels.token()
    out = run_pair(pool, *H.c_pair(tok), "c")
    assert H.field(out, "got") == "0", (tok, out)
    assert H.field(out, "pidfd") == f"refused:{errno.EINVAL}", out


def test_another_slot_s_processes_do_not_exist(pool):
    """While a program in the other slot holds 8 threads, ``kill(pid, 0)`` over every pid below 32768 finds only
    the scanner's own slot: its zygote, its template (and in bubblewrap, bubblewrap's init) and itself. Outside the
    sandbox the same scan finds the holder's threads among the machine's processes."""
    holder, scanner = H.scan_pair()
    s, r = pool.run([Program(holder), Program(scanner)])
    assert s.status == "ok" and r.status == "ok", (s.stderr[-300:], r.stderr[-300:])
    assert H.field(s.stdout, "holding") == "8" and _window(s.stdout)[0] < _window(r.stdout)[1] - 0.5
    seen = [int(x) for x in H.field(r.stdout, "seen").split()]
    own = int(H.field(r.stdout, "own"))
    assert seen[0] <= 4 and all(p <= own for p in seen[1:]) and own <= 4, r.stdout
    with tempfile.TemporaryDirectory() as tmp:
        procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=tmp)
                 for code in (holder, scanner)]
        outside = [p.communicate(timeout=60)[0] for p in procs][1]
    assert int(H.field(outside, "seen").split()[0]) > 8, outside


@pytest.mark.parametrize("language", ["python", pytest.param("c", marks=needs_gcc)])
def test_a_slot_s_next_run_sees_the_same_pids(language):
    """One slot: a probe, a sender creating thousands of threads, the probe again: the same pid and thread id."""
    probe = H.PY_TID_PROBE if language == "python" else H.C_TID_PROBE
    sender = (H.python_pair if language == "python" else H.c_pair)(hostile_channels.token(), hold=0.5)[0]
    for name in PROFILES:
        with LocalSandbox(slots=1, limits=LIMITS, **PROFILE_OPTIONS.get(name, {})) as box:
            assert "pidns" in box.layers, (name, box.layers)
            before = box.run_one(Program(probe, "", language))
            sent = box.run_one(Program(sender, "", language))
            after = box.run_one(Program(probe, "", language))
        assert (before.status, sent.status, after.status) == ("ok", "ok", "ok"), (name, after.stderr[-300:])
        assert H.field(before.stdout, "first") == H.field(after.stdout, "first") != "?", (name, before.stdout,
                                                                                          after.stdout)


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("language", ["python", pytest.param("c", marks=needs_gcc)])
def test_two_command_line_runs_cannot_talk(tmp_path, profile, language):
    """``grpo sandbox run`` twice at once (two pools, as two trainers on one machine would have)."""
    tok = hostile_channels.token()
    pair = H.python_pair(tok, hold=4.0) if language == "python" else H.c_pair(tok, hold=4.0)
    procs = []
    for name, code in zip(("sender", "receiver"), pair, strict=True):
        path = tmp_path / f"{name}.{'py' if language == 'python' else 'c'}"
        path.write_text(code)
        procs.append(subprocess.Popen([sys.executable, "-m", "grpo_rewards", "sandbox", "run", str(path),
                                       "--wall-seconds", "20", "--cpu-seconds", "10", "--profile", profile],
                                      stdout=subprocess.PIPE, text=True))
    outs = [p.communicate(timeout=180)[0] for p in procs]
    assert all("status: ok" in out for out in outs), outs
    (s0, s1), (r0, r1) = _window(outs[0]), _window(outs[1])
    assert max(s0, r0) < min(s1, r1), ("the two runs did not overlap", outs)
    assert "pidns" in outs[1] and H.field(outs[1], "got") == "0", outs[1]
    if language == "c":
        assert H.field(outs[1], "pidfd") == f"refused:{errno.EINVAL}", outs[1]
