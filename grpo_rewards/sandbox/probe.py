"""Which isolation layers this machine offers, which profile that makes, and the fail-closed rule.

Layers: ``rlimits``, ``setsid``, ``subreaper`` (always on Linux), ``uid`` (we may
switch uid: root), ``landlock-fs`` / ``landlock-net`` / ``landlock-scope`` (by
Landlock ABI), ``seccomp`` (our filter has a syscall table for this machine),
``mountns`` / ``netns`` / ``ipcns`` / ``utsns``, ``tmpfs-scratch`` and ``pidns`` (root: a pid
namespace per slot, its counter set back before every program), and ``bwrap`` (bubblewrap installed: the
zygote runs inside it, ``strict`` profile).

Profiles, weakest to strongest: ``unsafe`` (rlimits only), ``default`` (plus
Landlock file system and seccomp), ``hardened`` (plus slot uid, Landlock network and
scopes, namespaces, a pid namespace per slot and a capped tmpfs scratch), ``strict`` (hardened, inside
bubblewrap). With fewer layers than ``default``, untrusted code is refused unless
``allow_unsafe_execution = true``.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from dataclasses import dataclass, field

from grpo_rewards.sandbox.jail import landlock, pidns, seccomp

BASE_LAYERS = ("rlimits", "setsid", "subreaper")
NAMESPACE_LAYERS = ("mountns", "netns", "ipcns", "utsns", "tmpfs-scratch", "pidns")
PROFILES: dict[str, tuple[str, ...]] = {
    "unsafe": ("rlimits", "setsid"),
    "default": ("rlimits", "setsid", "landlock-fs", "seccomp"),
    "hardened": ("rlimits", "setsid", "subreaper", "landlock-fs", "seccomp", "uid", "landlock-net",
                 "landlock-scope", "mountns", "netns", "ipcns", "tmpfs-scratch", "pidns"),
}
PROFILES["strict"] = (*PROFILES["hardened"], "bwrap")
ORDER = ("unsafe", "default", "hardened", "strict")

SYSTEM_READ_ONLY = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/etc/ld.so.cache", "/etc/localtime",
                    "/etc/alternatives", "/dev/urandom", "/dev/random", "/dev/zero")
RW_FILES = ("/dev/null",)


class UnsafeSandboxError(ValueError):
    """The kernel lacks layers of the default profile and unsafe execution was not allowed (a config problem)."""


class SandboxStartError(RuntimeError):
    """The sandbox could not start on this machine although its layers were found (an infrastructure failure)."""


@dataclass(frozen=True)
class Probe:
    layers: tuple[str, ...]
    landlock_abi: int
    notes: tuple[str, ...] = field(default=())
    bwrap: str = ""  # absolute path of bubblewrap: the zygote starts with an empty environment (no PATH)

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
    counter = os.path.exists("/proc/" + pidns.COUNTER)  # ns_last_pid: a kernel with CONFIG_CHECKPOINT_RESTORE
    if not counter:
        notes.append("no /proc/sys/kernel/ns_last_pid (a kernel without CONFIG_CHECKPOINT_RESTORE): no pidns")
    if os.geteuid() == 0:
        layers += ["uid", *(n for n in NAMESPACE_LAYERS if n != "pidns" or counter)]
    elif counter and pidns.user_namespaces_possible():
        layers.append("pidns")  # in a user namespace of the zygote's own
        notes.append("not root: no slot uids, no namespaces but a pid namespace per slot")
    else:
        notes.append("not root: no slot uids, no namespaces")
    bwrap = bwrap_path()
    if bwrap and os.geteuid() == 0:
        layers.append("bwrap")
    return Probe(tuple(layers), abi, tuple(notes), bwrap)


def bwrap_path() -> str:
    """bubblewrap's absolute path, found through ``PATH`` now (the zygote's environment is empty), or ""."""
    found = shutil.which("bwrap")
    return os.path.abspath(found) if found else ""


def select_layers(profile: str, found: Probe, disable: tuple[str, ...] | list[str] = ()) -> set[str]:
    """The layers a pool asked for ``profile`` puts on: every layer found, less ``disable``.

    A named profile is a floor, never silently lowered: when this machine lacks one of
    its layers, :class:`UnsafeSandboxError` names them. ``bwrap`` is used by ``strict``
    and ``auto`` only. ``disable`` drops layers for diagnosis and tests.
    """
    if profile not in ("auto", *PROFILES):
        raise ValueError(f"unknown sandbox profile {profile!r}; choose auto, {', '.join(ORDER)}")
    wanted = set(found.layers) - set(disable)
    if "mountns" not in wanted:
        wanted -= set(NAMESPACE_LAYERS) - ({"pidns"} if os.geteuid() != 0 else set())
    if profile not in ("auto", "strict"):
        wanted -= {"bwrap"}
    if profile != "auto":
        missing = [layer for layer in PROFILES[profile] if layer not in wanted]
        if missing:
            hint = " (install bubblewrap: apt-get install bubblewrap)" if "bwrap" in missing else ""
            raise UnsafeSandboxError(f"sandbox profile {profile!r} needs {', '.join(missing)}, which this machine "
                                     f"does not offer{hint}; refusing to run it weaker. Use profile = \"auto\" for "
                                     "the strongest available.")
    return wanted


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
    """The interpreter's standard library (what imports need), deduplicated: never a site-packages folder
    (programs get only the packages of their allow-list, :mod:`grpo_rewards.sandbox.packages`)."""
    paths = []
    base = sysconfig.get_paths(vars={"base": sys.base_prefix, "platbase": sys.base_exec_prefix})  # not a venv's
    for key in ("stdlib", "platstdlib"):
        path = base.get(key)
        if path and os.path.isdir(path) and path not in paths:
            paths.append(path)
    for entry in sys.path:
        if entry.endswith("lib-dynload") and os.path.isdir(entry) and entry not in paths:
            paths.append(entry)
    return paths


def read_only_paths(extra: list[str] | tuple[str, ...] = ()) -> list[str]:
    return [p for p in (*SYSTEM_READ_ONLY, *python_read_only_paths(), *extra) if os.path.exists(p)]
