"""Each profile this machine offers contains the same core attacks (default, hardened, strict)."""

from __future__ import annotations

import os

import pytest

from grpo_rewards.sandbox.pool import LocalSandbox
from grpo_rewards.sandbox.program import Program

from .conftest import DEFAULT_AS_ROOT, FAST, FOUND, needs_default

pytestmark = needs_default

PROFILES = {
    "default": DEFAULT_AS_ROOT,
    "hardened": ("bwrap",),
    "strict": (),
}
ATTACKS = {
    "write_tmp": "open('/tmp/grpo-profile-pwned', 'w').write('x')",
    "read_shadow": "print(open('/etc/shadow').read())",
    "list_proc": "import os\nprint(os.listdir('/proc'))",
    "tcp": "import socket\nsocket.create_connection(('127.0.0.1', 22), timeout=1)",
    "fork": "import os\nos.fork()",
    "exec": "import os\nos.execv('/bin/true', ['true'])",
    "signal_init": "import os\nos.kill(1, 0)",
    "mount": "import ctypes\nassert ctypes.CDLL(None).mount(b'none', b'/mnt', b'tmpfs', 0, None) == 0",
}


def _available(name: str) -> bool:
    need = set(__import__("grpo_rewards.sandbox.probe", fromlist=["PROFILES"]).PROFILES[name])
    return need <= set(FOUND.layers)


@pytest.mark.parametrize("profile", list(PROFILES))
def test_profile_contains_core_attacks(profile):
    if not _available(profile):
        pytest.skip(f"profile {profile} is not available here ({', '.join(FOUND.layers)})")
    disable = PROFILES[profile]
    with LocalSandbox(slots=2, limits=FAST, disable=disable, allow_unsafe=False) as box:
        assert box.profile == profile
        names = [n for n in ATTACKS if n != "signal_init" or "uid" in box.layers or "landlock-scope" in box.layers]
        results = box.run([Program(ATTACKS[n]) for n in names])
        for name, r in zip(names, results, strict=True):
            assert r.status == "runtime_error", (profile, name, r.status, r.error)
        ok = box.run_one(Program("print(sum(range(10)))"))
        assert (ok.status, ok.stdout) == ("ok", "45\n")
    assert not os.path.exists("/tmp/grpo-profile-pwned")


def test_strict_needs_bwrap(monkeypatch):
    from grpo_rewards.sandbox import probe

    monkeypatch.setattr(probe, "probe", lambda: probe.Probe(tuple(set(FOUND.layers) - {"bwrap"}), 7))
    with pytest.raises(probe.UnsafeSandboxError, match="bubblewrap"):
        LocalSandbox(slots=1, profile="strict")


def test_below_default_is_refused_unless_allowed():
    from grpo_rewards.sandbox.probe import UnsafeSandboxError

    with pytest.raises(UnsafeSandboxError, match="seccomp"):
        LocalSandbox(slots=1, disable=("seccomp",))
    with LocalSandbox(slots=1, limits=FAST, disable=("seccomp",), allow_unsafe=True) as box:
        assert "seccomp" not in box.layers and box.profile == "unsafe"


@pytest.mark.parametrize("profile", list(PROFILES))
def test_profile_runs_honest_threads(profile):
    """Threads work in every profile (RLIMIT_NPROC is only set with a slot uid: it counts a whole uid)."""
    if not _available(profile):
        pytest.skip(f"profile {profile} is not available here")
    code = ("import threading\nout = []\nts = [threading.Thread(target=out.append, args=(i,)) for i in range(32)]\n"
            "[t.start() for t in ts]\n[t.join() for t in ts]\nprint(len(out))")
    with LocalSandbox(slots=1, limits=FAST, disable=PROFILES[profile]) as box:
        r = box.run_one(Program(code))
    assert (r.status, r.stdout) == ("ok", "32\n"), r.stderr[-300:]


def test_signals_denied_when_nothing_else_confines_them():
    """No slot uid and no Landlock scope (a non-root user on Linux < 6.12): seccomp refuses kill()."""
    if not _available("default"):
        pytest.skip("no default profile here")
    with LocalSandbox(slots=1, limits=FAST, disable=(*DEFAULT_AS_ROOT, "landlock-scope")) as box:
        assert "landlock-scope" not in box.layers and "uid" not in box.layers
        r = box.run_one(Program("import os, signal\nos.kill(os.getppid(), 0)"))
        assert r.status == "runtime_error" and "PermissionError" in r.stderr
        own = box.run_one(Program("import threading\nt = threading.Thread(target=print, args=('ok',))\n"
                                  "t.start()\nt.join()"))
        assert (own.status, own.stdout) == ("ok", "ok\n")
