"""Landlock through ctypes: read-only system paths, a read-write scratch folder, no TCP, scoped IPC.

What is enforced depends on the kernel's ABI: file system rights (ABI 1+, refer 2+,
truncate 3+, device ioctls 5+), TCP bind/connect (4+), abstract unix sockets and
signals scoped to the sandbox (6+). :func:`abi_version` says which.
"""

from __future__ import annotations

import ctypes
import os

from .linux import JailError, check, libc

SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446  # same numbers on x86_64 and aarch64
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH, RULE_NET_PORT = 1, 2

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1

FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
READ_ONLY = EXECUTE | READ_FILE | READ_DIR


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def abi_version() -> int:
    """The kernel's Landlock ABI version, 0 when Landlock is absent or disabled."""
    ret = libc.syscall(SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION))
    return max(int(ret), 0)


def fs_rights(abi: int) -> int:
    rights = (1 << 13) - 1
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


def features(abi: int) -> list[str]:
    """Names of the Landlock layers an ABI version enforces."""
    out = []
    if abi >= 1:
        out.append("landlock-fs")
    if abi >= 4:
        out.append("landlock-net")
    if abi >= 6:
        out.append("landlock-scope")
    return out


def open_rules(abi: int, read_only: list[str], read_write: list[str], rw_files: list[str]) -> list[tuple[int, int]]:
    """``(O_PATH fd, rights)`` per existing path: read-only beneath ``read_only``, everything beneath
    ``read_write``, read/write for the files ``rw_files``. The zygote opens them once and keeps them."""
    handled = fs_rights(abi)
    rules = []
    for paths, rights in ((read_only, READ_ONLY), (read_write, handled), (rw_files, READ_FILE | WRITE_FILE)):
        for path in paths:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except FileNotFoundError:
                continue
            rules.append((fd, (rights if os.path.isdir(path) else rights & FILE_RIGHTS) & handled))
    return rules


def build_ruleset(abi: int, rules: list[tuple[int, int]]) -> int:
    """A ruleset fd holding ``rules`` (from :func:`open_rules`); TCP bind/connect and IPC scopes are denied."""
    if abi < 1:
        raise JailError(0, "landlock is not available")
    attr = _RulesetAttr(fs_rights(abi), NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 else 0,
                        SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0)
    size = 8 if abi < 4 else 16 if abi < 6 else 24
    fd = check(libc.syscall(SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0)),
               "landlock_create_ruleset")
    try:
        for pfd, rights in rules:
            rule = _PathBeneath(rights, pfd)
            check(libc.syscall(SYS_ADD_RULE, ctypes.c_int(fd), ctypes.c_int(RULE_PATH_BENEATH),
                               ctypes.byref(rule), ctypes.c_uint32(0)), "landlock_add_rule")
    except BaseException:
        os.close(fd)
        raise
    return fd


def restrict_self(ruleset_fd: int) -> None:
    """Enforce the ruleset on this process (needs no_new_privs first); closes the fd."""
    try:
        check(libc.syscall(SYS_RESTRICT_SELF, ctypes.c_int(ruleset_fd), ctypes.c_uint32(0)), "landlock_restrict_self")
    finally:
        os.close(ruleset_fd)
