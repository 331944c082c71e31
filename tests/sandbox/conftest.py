"""Fixtures for the sandbox tests: one shared pool, and helpers that check nothing was left behind."""

from __future__ import annotations

import os

import pytest

from grpo_rewards.sandbox import probe
from grpo_rewards.sandbox.program import Limits

FOUND = probe.probe()
needs_default = pytest.mark.skipif(FOUND.profile not in ("default", "hardened", "strict"),
                                   reason=f"this kernel lacks the default sandbox profile ({FOUND.layers})")
needs_root = pytest.mark.skipif("uid" not in FOUND.layers, reason="slot uids need root")

FAST = Limits(cpu_seconds=1.0, wall_seconds=2.0, memory_mb=512, output_bytes=1 << 20, file_size_mb=8)


@pytest.fixture(scope="session")
def box():
    if FOUND.profile not in ("default", "hardened", "strict"):
        pytest.skip("no default sandbox profile on this machine")
    from grpo_rewards.sandbox.pool import LocalSandbox

    os.environ["GRPO_SANDBOX_TEST_SECRET"] = "hunter2-secret-value"  # must never reach a sandboxed program
    with LocalSandbox(slots=2, limits=FAST) as pool:
        yield pool


def processes_of(uids: list[int]) -> list[int]:
    """Pids of live processes (not zombies) owned by ``uids``."""
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status") as fh:
                status = fh.read()
        except OSError:
            continue
        uid = int(status.split("\nUid:\t", 1)[1].split("\t", 1)[0])
        if uid in uids:
            pids.append(int(name))
    return pids


def zombies_under(ancestors: set[int]) -> list[int]:
    """Zombie processes anywhere below ``ancestors`` (a bwrap-wrapped zygote sits one level down)."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        table[int(name)] = (fields[0], int(fields[1]))
    def below(pid: int) -> bool:
        seen = 0
        while pid in table and seen < 64:
            pid = table[pid][1]
            if pid in ancestors:
                return True
            seen += 1
        return False
    return [pid for pid, (state, _) in table.items() if state == "Z" and below(pid)]


def zygote_pids(pool) -> set[int]:
    return {s.proc.pid for s in pool._slots if s.proc is not None}


# Every profile this machine offers, as LocalSandbox options. As root, "default" is reached by dropping the
# layers above it, but keeps the mount namespace: programs without a slot uid run as nobody, who needs the
# interpreter exposed (a non-root user's default profile has neither and runs programs as that user).
DEFAULT_AS_ROOT = ("uid", "bwrap", "netns", "ipcns", "utsns", "tmpfs-scratch")


def profile_options() -> dict[str, dict]:
    out: dict[str, dict] = {}
    if FOUND.profile in ("default", "hardened", "strict"):
        out["default"] = {"disable": DEFAULT_AS_ROOT} if "uid" in FOUND.layers else {"profile": "default"}
    for name in ("hardened", "strict"):
        if set(probe.PROFILES[name]) <= set(FOUND.layers):
            out[name] = {"profile": name}
    return out


PROFILE_OPTIONS = profile_options()
