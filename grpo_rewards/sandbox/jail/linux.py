"""Raw Linux calls the jail needs (prctl, unshare, mount, syscall) through ctypes, and their numbers."""

from __future__ import annotations

import ctypes
import os
import platform

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.prctl.restype = ctypes.c_int
libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
libc.unshare.argtypes = [ctypes.c_int]

MACHINE = platform.machine()

PR_SET_PDEATHSIG = 1
PR_GET_SECCOMP = 21
PR_SET_SECCOMP = 22
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MNT_DETACH = 2


class JailError(OSError):
    """A jail layer could not be set up."""


def check(ret: int, what: str) -> int:
    if ret < 0:
        err = ctypes.get_errno()
        raise JailError(err, f"{what}: {os.strerror(err)}")
    return ret


def prctl(option: int, a: int = 0, b: int = 0, c: int = 0, d: int = 0) -> int:
    return check(libc.prctl(option, a, b, c, d), f"prctl({option})")


def unshare(flags: int) -> None:
    check(libc.unshare(flags), "unshare")


def drop_capabilities() -> None:
    """Clear every capability set of this thread (capset to nothing): what a process forked in a user
    namespace of its own holds there."""
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this thread
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable, twice (64 bits)
    check(libc.capset(ctypes.byref(header), ctypes.byref(data)), "capset")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    def enc(s):
        return (None if s is None else s.encode())
    check(libc.mount(enc(source), target.encode(), enc(fstype), flags, enc(data)), f"mount {target}")


def umount(target: str, flags: int = MNT_DETACH) -> None:
    check(libc.umount2(target.encode(), flags), f"umount {target}")
