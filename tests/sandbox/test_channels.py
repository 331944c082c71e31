"""Programs running at the same time cannot talk: pairs of programs (Python and C) in different slots of one
pool, on every profile this machine offers, try each channel of kernel state that needs no file of one's own;
the receiver must not get the sender's token. Each pair is first run outside the sandbox, where the channel
works: the receiver gets the token there (so a pass here is the sandbox's doing, not a broken program).
Through the command line too: two ``grpo sandbox run`` at once (two pools)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile

import pytest

from grpo_rewards.sandbox.pool import LocalSandbox, compilers
from grpo_rewards.sandbox.program import Limits, Program

from . import hostile_channels as H
from .conftest import PROFILE_OPTIONS, needs_default

pytestmark = needs_default

PAIR_LIMITS = Limits(cpu_seconds=5.0, wall_seconds=8.0, memory_mb=512, output_bytes=1 << 16, file_size_mb=8)
PROFILES = list(PROFILE_OPTIONS) or ["auto"]


@pytest.fixture(scope="module", params=PROFILES)
def pair_pool(request):
    with LocalSandbox(slots=2, limits=PAIR_LIMITS, **PROFILE_OPTIONS.get(request.param, {})) as pool:
        yield pool


def _window(stdout: str) -> tuple[float, float]:
    line = next(x for x in stdout.splitlines() if x.startswith("window "))
    return float(line.split()[1]), float(line.split()[2])


def _got(stdout: str) -> str:
    line = next((x for x in stdout.splitlines() if x.startswith("got ")), "got ?")
    return line.split(None, 1)[1]


def run_pair(pool: LocalSandbox, sender: str, receiver: str, language: str = "python") -> tuple[str, str]:
    """Run both at once in the pool; check they overlapped in time; (receiver's "got", sender's stdout)."""
    s, r = pool.run([Program(sender, "", language), Program(receiver, "", language)])
    assert s.status == "ok" and r.status == "ok", (s.status, s.error, s.stderr[-500:], r.status, r.error,
                                                   r.stderr[-500:])
    (s0, s1), (r0, r1) = _window(s.stdout), _window(r.stdout)
    assert max(s0, r0) < min(s1, r1), ("the pair did not run at the same time", s0, s1, r0, r1)
    return _got(r.stdout), s.stdout


def _outside(sender: str, receiver: str) -> str:
    """The pair run as two plain processes: the receiver's "got"."""
    with tempfile.TemporaryDirectory() as tmp:
        procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=tmp)
                 for code in (sender, receiver)]
        outs = [p.communicate(timeout=30)[0] for p in procs]
    return _got(outs[1])


def _outside_c(sender: str, receiver: str) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        for name, src in (("s", sender), ("r", receiver)):
            with open(os.path.join(tmp, f"{name}.c"), "w") as fh:
                fh.write(src)
            subprocess.run(["gcc", "-O2", "-o", os.path.join(tmp, name), os.path.join(tmp, f"{name}.c")], check=True)
        procs = [subprocess.Popen([os.path.join(tmp, n)], stdout=subprocess.PIPE, text=True, cwd=tmp) for n in "sr"]
        outs = [p.communicate(timeout=30)[0] for p in procs]
    return _got(outs[1])


@pytest.mark.parametrize("kind", ["posix_lock", "ofd_lock", "devnull_lock", "flock"])
def test_the_channel_works_outside(kind):
    tok = H.token()
    assert _outside(*H.python_pair(kind, tok, hold=1.5)) == str(tok)


@pytest.mark.parametrize("kind", H.PY_KINDS)
def test_python_pair_cannot_talk(pair_pool, kind):
    tok = H.token()
    got, sent = run_pair(pair_pool, *H.python_pair(kind, tok))
    assert got != str(tok) and got == "none", (kind, got, sent)


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the programs name x86_64 numbers")
def test_queued_signal_count_says_nothing(pair_pool):
    """The uid's count of queued signals: the receiver sees the same whether the sender filled it or not."""
    seen = [run_pair(pair_pool, *H.python_pair("sigqueue", tok))[0] for tok in (H.token() | 1, H.token() & ~1)]
    assert seen[0] == seen[1], seen


@pytest.mark.skipif("c" not in compilers(), reason="needs gcc")
@pytest.mark.parametrize("ofd", [False, True], ids=["posix", "ofd"])
def test_c_pair_cannot_talk(pair_pool, ofd):
    tok = H.token()
    assert _outside_c(*H.c_pair(tok, ofd, hold=1.5)) == str(tok)
    got, sent = run_pair(pair_pool, *H.c_pair(tok, ofd), language="c")
    assert got == "none", (got, sent)


def test_two_command_line_runs_cannot_talk(tmp_path):
    """``grpo sandbox run`` twice at once (two pools, as two trainers on one machine would have)."""
    tok = H.token()
    procs = []
    for name, code in zip(("sender", "receiver"), H.python_pair("posix_lock", tok, hold=4.0), strict=True):
        path = tmp_path / f"{name}.py"
        path.write_text(code)
        procs.append(subprocess.Popen([sys.executable, "-m", "grpo_rewards", "sandbox", "run", str(path),
                                       "--wall-seconds", "10", "--cpu-seconds", "5"], stdout=subprocess.PIPE,
                                      text=True))
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert all("status: ok" in out for out in outs), outs
    (s0, s1), (r0, r1) = _window(outs[0]), _window(outs[1])
    assert max(s0, r0) < min(s1, r1), ("the two runs did not overlap", outs)
    got = re.search(r"^got (\S+)", outs[1], re.M)
    assert got and got.group(1) == "none", outs[1]
