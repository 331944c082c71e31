"""Which isolation layers this machine offers, which profile that makes, and the fail-closed rule.

Layers: ``rlimits``, ``setsid``, ``subreaper`` (always on Linux), ``uid`` (we may
switch uid: root), ``landlock-fs`` / ``landlock-net`` / ``landlock-scope`` (by
Landlock ABI), ``seccomp`` (our filter has a syscall table for this machine),
``mountns`` / ``netns`` / ``ipcns`` / ``utsns`` and ``tmpfs-scratch`` (root), and
``bwrap`` / ``pidns`` (bubblewrap installed: the zygote runs inside it, ``strict`` profile).

Profiles, weakest to strongest: ``unsafe`` (rlimits only), ``default`` (plus
Landlock file system and seccomp), ``hardened`` (plus slot uid, Landlock network and
scopes, namespaces and a capped tmpfs scratch), ``strict`` (hardened, inside
bubblewrap). With fewer layers than ``default``, untrusted code is refused unless
``allow_unsafe_execution = true``.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from dataclasses import dataclass, field

BASE_LAYERS = ("rlimits", "setsid", "subreaper")
NAMESPACE_LAYERS = ("mountns", "netns", "ipcns", "utsns", "tmpfs-scratch")
PROFILES: dict[str, tuple[str, ...]] = {
    "unsafe": ("rlimits", "setsid"),
    "default": ("rlimits", "setsid", "landlock-fs", "seccomp"),
    "hardened": ("rlimits", "setsid", "subreaper", "landlock-fs", "seccomp", "uid", "landlock-net",
                 "landlock-scope", "mountns", "netns", "ipcns", "tmpfs-scratch"),
}
PROFILES["strict"] = (*PROFILES["hardened"], "bwrap", "pidns")
ORDER = ("unsafe", "default", "hardened", "strict")

SYSTEM_READ_ONLY = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/etc/ld.so.cache", "/etc/localtime",
                    "/etc/alternatives", "/dev/urandom", "/dev/random", "/dev/zero")
RW_FILES = ("/dev/null",)


class UnsafeSandboxError(ValueError):
    """The kernel lacks layers of the default profile and unsafe execution was not allowed (a config problem)."""


@dataclass(frozen=True)
class Probe:
    layers: tuple[str, ...]
    landlock_abi: int
    notes: tuple[str, ...] = field(default=())

    @property
    def profile(self) -> str:
        return profile_of(self.layers)


def profile_of(layers: tuple[str, ...] | list[str]) -> str:
    """The strongest profile whose layers are all in ``layers``."""
    have = set(layers)
    best = "none"
    for name in ORDER:
        if set(PROFILES[name]) <= have:
            best = name
    return best


def probe() -> Probe:
    """What this kernel and process offer (the zygote confirms what it actually got)."""
    from grpo_rewards.sandbox.jail import landlock, seccomp

    layers = list(BASE_LAYERS)
    notes = []
    abi = landlock.abi_version()
    layers += landlock.features(abi)
    if not abi:
        notes.append("landlock unavailable (kernel < 5.13 or disabled)")
    if seccomp.available():
        layers.append("seccomp")
    else:
        notes.append(f"no seccomp syscall table for {seccomp.MACHINE}")
    if os.geteuid() == 0:
        layers += ["uid", *NAMESPACE_LAYERS]
    else:
        notes.append("not root: no slot uids, no namespaces")
    if shutil.which("bwrap") and os.geteuid() == 0:
        layers += ["bwrap", "pidns"]
    return Probe(tuple(layers), abi, tuple(notes))


def check_profile(layers: tuple[str, ...] | list[str], allow_unsafe: bool) -> str:
    """The active profile; raises :class:`UnsafeSandboxError` when below ``default`` and not allowed."""
    profile = profile_of(layers)
    if profile not in ORDER or ORDER.index(profile) < ORDER.index("default"):
        missing = sorted(set(PROFILES["default"]) - set(layers))
        if not allow_unsafe:
            raise UnsafeSandboxError(
                f"sandbox: this machine lacks {', '.join(missing)} (needed by the default profile); refusing to run "
                "untrusted code. Set allow_unsafe_execution = true only for trusted programs.")
    return profile


def python_read_only_paths() -> list[str]:
    """The interpreter's standard library and site-packages (what imports need), deduplicated."""
    paths = []
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path and os.path.isdir(path) and path not in paths:
            paths.append(path)
    for entry in sys.path:
        if entry.endswith(("site-packages", "dist-packages", "lib-dynload")) and os.path.isdir(entry) and entry not in paths:
            paths.append(entry)
    return paths


def read_only_paths(extra: list[str] | tuple[str, ...] = ()) -> list[str]:
    return [p for p in (*SYSTEM_READ_ONLY, *python_read_only_paths(), *extra) if os.path.exists(p)]
