"""A seccomp-BPF filter written by hand (no libseccomp): what a sandboxed Python program may not call.

Denied (``EPERM`` unless noted): exec, fork/vfork and any ``clone`` that is not a
thread (``clone3`` gets ``ENOSYS`` so libc falls back to ``clone``), every socket
family but ``AF_UNIX``, ``connect``/``bind``/``listen``/``accept``/``sendmsg`` and
``sendto`` with an address (so a unix socket can only talk to its ``socketpair``
peer), ptrace and ``process_vm_*``, mount/unshare/setns/chroot and the new mount
API, bpf, io_uring, userfaultfd, perf events, keyrings, kernel modules, System V
IPC and POSIX message queues (they outlive a process: a stash between runs), raising
limits (``setrlimit``, ``prlimit64`` with a new limit), ``TIOCSTI``, and every way
to aim a signal through a file: ``fcntl`` ``F_SETOWN``/``F_SETOWN_EX``/``F_SETSIG``
and the ``ioctl`` calls ``FIOSETOWN``/``SIOCSPGRP``/``TIOCSPGRP`` (SIGIO to any pid, in
every profile). A foreign architecture or an x32 call kills the process.

Modes: ``python`` (the default: no exec at all); ``exec`` (a compiled program: the
child may ``execveat(fd, "", AT_EMPTY_PATH)`` its binary's memfd, nothing else: a
program that execs anything it can open gains nothing over its own native code under
no_new_privs, Landlock and this filter); ``compile`` (the compiler driver: fork,
vfork, clone and exec allowed, so ``g++`` can run ``cc1plus``, ``as`` and ``ld``;
Landlock still limits what it reads, writes and executes). Everything else is allowed: Python
and numpy need a wide surface, and the other layers (Landlock, rlimits, the slot
uid, namespaces) confine what those calls can reach.
"""

from __future__ import annotations

import ctypes
import errno
import struct

from .linux import MACHINE, PR_SET_NO_NEW_PRIVS, check, libc, prctl

SYS_SECCOMP = 317
SECCOMP_SET_MODE_FILTER = 1
AUDIT_ARCH_X86_64 = 0xC000003E
X32_BIT = 0x40000000

RET_KILL_PROCESS = 0x80000000
RET_ERRNO = 0x00050000
RET_ALLOW = 0x7FFF0000

LD_W_ABS, JEQ_K, JGE_K, JSET_K, RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
OFF_NR, OFF_ARCH = 0, 4
CLONE_THREAD = 0x00010000
AF_UNIX = 1
TIOCSTI = 0x5412

# x86_64 numbers, denied outright
X86_64_DENY: dict[str, int] = {
    "fork": 57, "vfork": 58, "execve": 59, "execveat": 322,
    "connect": 42, "accept": 43, "sendmsg": 46, "bind": 49, "listen": 50, "accept4": 288, "sendmmsg": 307,
    "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312, "pidfd_getfd": 438,
    "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161, "unshare": 272, "setns": 308,
    "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
    "mount_setattr": 442,
    "bpf": 321, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    "userfaultfd": 323, "perf_event_open": 298, "fanotify_init": 300,
    "add_key": 248, "request_key": 249, "keyctl": 250,
    "init_module": 175, "finit_module": 313, "delete_module": 176, "kexec_load": 246, "kexec_file_load": 320,
    "reboot": 169, "swapon": 167, "swapoff": 168, "acct": 163, "syslog": 103, "vhangup": 153,
    "settimeofday": 164, "clock_settime": 227, "clock_adjtime": 305, "adjtimex": 159,
    "sethostname": 170, "setdomainname": 171, "iopl": 172, "ioperm": 173, "quotactl": 179,
    "name_to_handle_at": 303, "open_by_handle_at": 304, "lookup_dcookie": 212, "personality": 135,
    "setrlimit": 160, "memfd_secret": 447, "uselib": 134, "modify_ldt": 154,
    # System V IPC and POSIX message queues outlive the process: a stash between runs
    "shmget": 29, "shmat": 30, "shmctl": 31, "shmdt": 67, "semget": 64, "semop": 65, "semctl": 66,
    "semtimedop": 220, "msgget": 68, "msgsnd": 69, "msgrcv": 70, "msgctl": 71,
    "mq_open": 240, "mq_unlink": 241, "mq_timedsend": 242, "mq_timedreceive": 243, "mq_notify": 244,
    "mq_getsetattr": 245,
}
SYS_CLONE, SYS_CLONE3, SYS_SOCKET, SYS_SOCKETPAIR = 56, 435, 41, 53
SYS_SENDTO, SYS_PRLIMIT64, SYS_IOCTL, SYS_FCNTL = 44, 302, 16, 72
SYS_FORK, SYS_VFORK, SYS_EXECVE, SYS_EXECVEAT = 57, 58, 59, 322
AT_EMPTY_PATH = 0x1000
F_SETOWN, F_SETSIG, F_SETOWN_EX = 8, 10, 15  # aim SIGIO (or any signal) at a pid or process group
FIOSETOWN, SIOCSPGRP, TIOCSPGRP = 0x8901, 0x8902, 0x5410
MODES = ("python", "exec", "compile")


def available() -> bool:
    """Whether this module has a syscall table for this machine (x86_64 only, for now)."""
    return MACHINE == "x86_64"


def _ins(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k)


def _arg_lo(i: int) -> int:
    return 16 + 8 * i


def _ret(value: int) -> bytes:
    return _ins(RET_K, value)


def _only_if(nr: int, body: list[bytes]) -> list[bytes]:
    """``if nr == NR: body`` (the body ends in a return); jumps stay short."""
    return [_ins(JEQ_K, nr, 0, len(body)), *body]


def _null_arg_or_deny(nr: int, arg: int) -> list[bytes]:
    deny = _ret(RET_ERRNO | errno.EPERM)
    return _only_if(nr, [
        _ins(LD_W_ABS, _arg_lo(arg)), _ins(JEQ_K, 0, 0, 3),
        _ins(LD_W_ABS, _arg_lo(arg) + 4), _ins(JEQ_K, 0, 0, 1),
        _ret(RET_ALLOW), deny,
    ])


# sending signals to other processes; denied only when nothing else confines it (no slot uid
# and no Landlock signal scope): then the program shares the trainer's uid and could kill it
X86_64_SIGNALS: dict[str, int] = {"kill": 62, "tkill": 200, "tgkill": 234, "rt_sigqueueinfo": 129,
                                  "rt_tgsigqueueinfo": 297, "pidfd_send_signal": 424}


def _deny_arg_values(nr: int, arg: int, values: tuple[int, ...]) -> list[bytes]:
    """``if nr == NR: deny when the low word of ``arg`` is one of ``values``, else allow``."""
    body = [_ins(LD_W_ABS, _arg_lo(arg))]
    for i, value in enumerate(values):
        body.append(_ins(JEQ_K, value, len(values) - i, 0))  # jump to the deny below
    body += [_ret(RET_ALLOW), _ret(RET_ERRNO | errno.EPERM)]
    return _only_if(nr, body)


def build_filter(deny_signals: bool = False, mode: str = "python") -> bytes:
    """The BPF program as bytes (``struct sock_filter[]``); ``mode`` of :data:`MODES`."""
    if not available():
        raise OSError(errno.ENOSYS, f"no seccomp syscall table for {MACHINE}")
    if mode not in MODES:
        raise ValueError(f"unknown seccomp mode {mode!r}")
    eperm = RET_ERRNO | errno.EPERM
    prog = [
        _ins(LD_W_ABS, OFF_ARCH), _ins(JEQ_K, AUDIT_ARCH_X86_64, 1, 0), _ret(RET_KILL_PROCESS),
        _ins(LD_W_ABS, OFF_NR), _ins(JGE_K, X32_BIT, 0, 1), _ret(RET_KILL_PROCESS),
    ]
    denied = {**X86_64_DENY, **(X86_64_SIGNALS if deny_signals else {})}
    if mode == "compile":
        allowed = {SYS_FORK, SYS_VFORK, SYS_EXECVE, SYS_EXECVEAT}
        denied = {k: v for k, v in denied.items() if v not in allowed}
        prog += [_ins(JEQ_K, SYS_CLONE, 0, 1), _ret(RET_ALLOW)]
    elif mode == "exec":
        prog += _only_if(SYS_EXECVEAT, [_ins(LD_W_ABS, _arg_lo(4)), _ins(JEQ_K, AT_EMPTY_PATH, 0, 1),
                                        _ret(RET_ALLOW), _ret(eperm)])
    for nr in sorted(denied.values()):
        prog += [_ins(JEQ_K, nr, 0, 1), _ret(eperm)]
    prog += [_ins(JEQ_K, SYS_CLONE3, 0, 1), _ret(RET_ERRNO | errno.ENOSYS)]
    prog += _only_if(SYS_CLONE, [_ins(LD_W_ABS, _arg_lo(0)), _ins(JSET_K, CLONE_THREAD, 0, 1),
                                 _ret(RET_ALLOW), _ret(eperm)])
    for nr in (SYS_SOCKET, SYS_SOCKETPAIR):
        prog += _only_if(nr, [_ins(LD_W_ABS, _arg_lo(0)), _ins(JEQ_K, AF_UNIX, 0, 1),
                              _ret(RET_ALLOW), _ret(RET_ERRNO | errno.EAFNOSUPPORT)])
    prog += _deny_arg_values(SYS_IOCTL, 1, (TIOCSTI, FIOSETOWN, SIOCSPGRP, TIOCSPGRP))
    prog += _deny_arg_values(SYS_FCNTL, 1, (F_SETOWN, F_SETSIG, F_SETOWN_EX))
    prog += _null_arg_or_deny(SYS_SENDTO, 4)
    prog += _null_arg_or_deny(SYS_PRLIMIT64, 2)
    prog.append(_ret(RET_ALLOW))
    return b"".join(prog)


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class Filter:
    """A compiled filter kept in memory (built once in the zygote, installed in each child)."""

    def __init__(self, deny_signals: bool = False, mode: str = "python") -> None:
        self.deny_signals = deny_signals
        self.mode = mode
        code = build_filter(deny_signals, mode)
        self._buf = ctypes.create_string_buffer(code, len(code))
        self._prog = _Fprog(len(code) // 8, ctypes.addressof(self._buf))

    def install(self) -> None:
        """Set no_new_privs and load the filter into this (single-threaded) process."""
        prctl(PR_SET_NO_NEW_PRIVS, 1)
        check(libc.syscall(SYS_SECCOMP, ctypes.c_uint(SECCOMP_SET_MODE_FILTER), ctypes.c_uint(0),
                           ctypes.byref(self._prog)), "seccomp")
