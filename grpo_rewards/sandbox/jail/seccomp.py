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

File metadata, which Landlock does not mediate: the extended attribute calls (get, set,
list, remove, every variant: ``EOPNOTSUPP``, as on a file system without them, so
``shutil.copy2`` still works), file times (``utime``, ``utimes``, ``futimesat``,
``utimensat``: they report success and change nothing, so ``touch`` and ``copy2`` in the
scratch folder go on), ownership (``chown`` and variants), inotify, fanotify and
``fcntl`` ``F_NOTIFY`` (watching how the host uses its files), ``F_SETLEASE`` (holding
the next open of a file its uid owns), the ``ioctl`` calls ``FS_IOC_SETFLAGS`` and
``FS_IOC_FSSETXATTR`` (file attribute flags), and ``fallocate`` (``EOPNOTSUPP``: it reserves disk past the
file-size limit with ``FALLOC_FL_KEEP_SIZE``, and ``posix_fallocate`` falls back to
writing). Other processes' memory: ``migrate_pages``, ``move_pages``,
``process_madvise``, ``process_mrelease``, ``get_robust_list``.

Other processes: the scheduling, priority and limit calls (``setpriority``/``getpriority``,
``sched_*``, ``ioprio_*``, ``prlimit64``) are refused unless their pid argument is 0 or the
caller's own pid (and never for a whole user): each child installs a copy of the filter
with its pid patched in (:meth:`Filter.for_pid`). Without a slot uid the program shares
its uid with other slots, or with the pool's owner: there only signal scoping and these
rules keep it from renicing, pinning or reading the limits of their processes.

``shared_uid`` also makes ``chmod`` and variants a no-op that reports success (the
program could change the mode of its owner's files; ``shutil.copy`` in the scratch
folder goes on; the compiler keeps them). ``deny_memfd``: no ``memfd_create``
(where no memory cgroup accounts its pages: a memfd's unmapped pages are outside
RLIMIT_AS).

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
# file metadata Landlock does not mediate, and other processes' memory
X86_64_DENY_METADATA: dict[str, int] = {
    "chown": 92, "fchown": 93, "lchown": 94, "fchownat": 260,
    "inotify_init": 253, "inotify_init1": 294, "inotify_add_watch": 254, "fanotify_mark": 301,
    "migrate_pages": 256, "move_pages": 279, "process_madvise": 440, "process_mrelease": 448,
    "get_robust_list": 274,
}
# refused with EOPNOTSUPP: what a file system without them answers, which programs handle
X86_64_UNSUPPORTED: dict[str, int] = {
    "setxattr": 188, "lsetxattr": 189, "fsetxattr": 190, "getxattr": 191, "lgetxattr": 192, "fgetxattr": 193,
    "listxattr": 194, "llistxattr": 195, "flistxattr": 196, "removexattr": 197, "lremovexattr": 198,
    "fremovexattr": 199, "setxattrat": 463, "getxattrat": 464, "listxattrat": 465, "removexattrat": 466,
    "fallocate": 285,
}
# file times: a no-op that reports success (no host file's times change; programs that set the times of their
# own files, shutil.copy2 say, go on)
X86_64_NOOP: dict[str, int] = {"utime": 132, "utimes": 235, "futimesat": 261, "utimensat": 280}
# a shared uid: the mode of the owner's files (a no-op too)
X86_64_CHMOD: dict[str, int] = {"chmod": 90, "fchmod": 91, "fchmodat": 268, "fchmodat2": 452}
SYS_MEMFD_CREATE = 319
# (nr, pid argument, (argument, value) that names a whole user or None): only for the caller itself
PRIO_USER, IOPRIO_WHO_USER = 2, 3
X86_64_SELF_ONLY: dict[str, tuple[int, int, tuple[int, int] | None]] = {
    "getpriority": (140, 1, (0, PRIO_USER)), "setpriority": (141, 1, (0, PRIO_USER)),
    "sched_setparam": (142, 0, None), "sched_getparam": (143, 0, None), "sched_setscheduler": (144, 0, None),
    "sched_getscheduler": (145, 0, None), "sched_rr_get_interval": (148, 0, None),
    "sched_setaffinity": (203, 0, None), "sched_getaffinity": (204, 0, None), "sched_setattr": (314, 0, None),
    "sched_getattr": (315, 0, None), "ioprio_set": (251, 1, (0, IOPRIO_WHO_USER)),
    "ioprio_get": (252, 1, (0, IOPRIO_WHO_USER)),
}
SYS_CLONE, SYS_CLONE3, SYS_SOCKET, SYS_SOCKETPAIR = 56, 435, 41, 53
SYS_SENDTO, SYS_PRLIMIT64, SYS_IOCTL, SYS_FCNTL = 44, 302, 16, 72
SYS_FORK, SYS_VFORK, SYS_EXECVE, SYS_EXECVEAT = 57, 58, 59, 322
AT_EMPTY_PATH = 0x1000
F_SETOWN, F_SETSIG, F_SETOWN_EX = 8, 10, 15  # aim SIGIO (or any signal) at a pid or process group
# a lease on a file its uid owns (holds the owner's next open up to 45 s), directory change notification
F_SETLEASE, F_NOTIFY = 1024, 1026
# file attribute flags (noatime, nodump, ...) and extended attributes (project id) through an open fd
FS_IOC_SETFLAGS, FS_IOC32_SETFLAGS, FS_IOC_FSSETXATTR = 0x40086602, 0x40046602, 0x401C5820
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


def _null_arg(arg: int) -> list[bytes]:
    """Allow when the 64-bit argument ``arg`` is 0 (a NULL pointer), else EPERM."""
    return [_ins(LD_W_ABS, _arg_lo(arg)), _ins(JEQ_K, 0, 0, 3), _ins(LD_W_ABS, _arg_lo(arg) + 4),
            _ins(JEQ_K, 0, 0, 1), _ret(RET_ALLOW), _ret(RET_ERRNO | errno.EPERM)]


def _null_arg_or_deny(nr: int, arg: int) -> list[bytes]:
    return _only_if(nr, _null_arg(arg))


def _self_only(nr: int, pid_arg: int, own_pid: int, whole_user: tuple[int, int] | None = None,
               then: list[bytes] | None = None) -> list[bytes]:
    """``if nr == NR``: EPERM unless the pid argument is 0 or ``own_pid`` (and, with ``whole_user``, the
    argument that would name a whole user does not); then ``then`` (default: allow). Pids are ``pid_t``:
    the kernel reads the low 32 bits only."""
    then = then or [_ret(RET_ALLOW)]
    body = []
    if whole_user is not None:
        body += [_ins(LD_W_ABS, _arg_lo(whole_user[0])), _ins(JEQ_K, whole_user[1], 3, 0)]  # to the deny
    body += [_ins(LD_W_ABS, _arg_lo(pid_arg)), _ins(JEQ_K, 0, 2, 0), _ins(JEQ_K, own_pid & 0xFFFFFFFF, 1, 0),
             _ret(RET_ERRNO | errno.EPERM), *then]
    return _only_if(nr, body)


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


OWN_PID_MARK = 0x5EC0DE01  # stands for the child's pid in the filter built once; patched per child


def build_filter(deny_signals: bool = False, mode: str = "python", *, own_pid: int = OWN_PID_MARK,
                 shared_uid: bool = False, deny_memfd: bool = False) -> bytes:
    """The BPF program as bytes (``struct sock_filter[]``); ``mode`` of :data:`MODES`. Scheduling and limit
    calls reach only pid 0 and ``own_pid``; ``shared_uid``: no chmod either."""
    if not available():
        raise OSError(errno.ENOSYS, f"no seccomp syscall table for {MACHINE}")
    if mode not in MODES:
        raise ValueError(f"unknown seccomp mode {mode!r}")
    eperm = RET_ERRNO | errno.EPERM
    prog = [
        _ins(LD_W_ABS, OFF_ARCH), _ins(JEQ_K, AUDIT_ARCH_X86_64, 1, 0), _ret(RET_KILL_PROCESS),
        _ins(LD_W_ABS, OFF_NR), _ins(JGE_K, X32_BIT, 0, 1), _ret(RET_KILL_PROCESS),
    ]
    denied = {**X86_64_DENY, **X86_64_DENY_METADATA, **(X86_64_SIGNALS if deny_signals else {})}
    noop = dict(X86_64_NOOP)
    if shared_uid and mode != "compile":  # the linker sets the mode of its output
        noop.update(X86_64_CHMOD)
    if deny_memfd:
        denied["memfd_create"] = SYS_MEMFD_CREATE
    if mode == "compile":
        allowed = {SYS_FORK, SYS_VFORK, SYS_EXECVE, SYS_EXECVEAT}
        denied = {k: v for k, v in denied.items() if v not in allowed}
        prog += [_ins(JEQ_K, SYS_CLONE, 0, 1), _ret(RET_ALLOW)]
    elif mode == "exec":
        prog += _only_if(SYS_EXECVEAT, [_ins(LD_W_ABS, _arg_lo(4)), _ins(JEQ_K, AT_EMPTY_PATH, 0, 1),
                                        _ret(RET_ALLOW), _ret(eperm)])
    for nr in sorted(denied.values()):
        prog += [_ins(JEQ_K, nr, 0, 1), _ret(eperm)]
    for nr in sorted(X86_64_UNSUPPORTED.values()):
        prog += [_ins(JEQ_K, nr, 0, 1), _ret(RET_ERRNO | errno.EOPNOTSUPP)]
    for nr in sorted(noop.values()):
        prog += [_ins(JEQ_K, nr, 0, 1), _ret(RET_ERRNO | 0)]
    for nr, pid_arg, whole_user in X86_64_SELF_ONLY.values():
        prog += _self_only(nr, pid_arg, own_pid, whole_user)
    prog += _self_only(SYS_PRLIMIT64, 0, own_pid, then=_null_arg(2))
    prog += [_ins(JEQ_K, SYS_CLONE3, 0, 1), _ret(RET_ERRNO | errno.ENOSYS)]
    prog += _only_if(SYS_CLONE, [_ins(LD_W_ABS, _arg_lo(0)), _ins(JSET_K, CLONE_THREAD, 0, 1),
                                 _ret(RET_ALLOW), _ret(eperm)])
    for nr in (SYS_SOCKET, SYS_SOCKETPAIR):
        prog += _only_if(nr, [_ins(LD_W_ABS, _arg_lo(0)), _ins(JEQ_K, AF_UNIX, 0, 1),
                              _ret(RET_ALLOW), _ret(RET_ERRNO | errno.EAFNOSUPPORT)])
    prog += _deny_arg_values(SYS_IOCTL, 1, (TIOCSTI, FIOSETOWN, SIOCSPGRP, TIOCSPGRP, FS_IOC_SETFLAGS,
                                            FS_IOC32_SETFLAGS, FS_IOC_FSSETXATTR))
    prog += _deny_arg_values(SYS_FCNTL, 1, (F_SETOWN, F_SETSIG, F_SETOWN_EX, F_SETLEASE, F_NOTIFY))
    prog += _null_arg_or_deny(SYS_SENDTO, 4)
    prog.append(_ret(RET_ALLOW))
    return b"".join(prog)


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class Filter:
    """A compiled filter kept in memory: built once in the zygote, and copied by each child with its own
    pid patched in (:meth:`for_pid`) before it installs it."""

    def __init__(self, deny_signals: bool = False, mode: str = "python", *, shared_uid: bool = False,
                 deny_memfd: bool = False) -> None:
        self.deny_signals = deny_signals
        self.mode = mode
        self.shared_uid = shared_uid
        self.deny_memfd = deny_memfd
        self.code = build_filter(deny_signals, mode, shared_uid=shared_uid, deny_memfd=deny_memfd)
        # offsets of the ``k`` fields that hold the pid mark (``struct sock_filter``: code, jt, jf, k)
        self._pid_at = [i + 4 for i in range(0, len(self.code), 8)
                        if struct.unpack_from("<I", self.code, i + 4)[0] == OWN_PID_MARK]
        self._load(self.code)

    def _load(self, code: bytes) -> None:
        self._buf = ctypes.create_string_buffer(code, len(code))
        self._prog = _Fprog(len(code) // 8, ctypes.addressof(self._buf))

    def for_pid(self, pid: int) -> Filter:
        """This filter with ``pid`` as the caller's own (a copy: a few microseconds)."""
        code = bytearray(self.code)
        for offset in self._pid_at:
            struct.pack_into("<I", code, offset, pid & 0xFFFFFFFF)
        copy = object.__new__(Filter)
        copy.__dict__.update(self.__dict__)
        copy._load(bytes(code))
        return copy

    def install(self) -> None:
        """Set no_new_privs and load the filter into this (single-threaded) process."""
        prctl(PR_SET_NO_NEW_PRIVS, 1)
        check(libc.syscall(SYS_SECCOMP, ctypes.c_uint(SECCOMP_SET_MODE_FILTER), ctypes.c_uint(0),
                           ctypes.byref(self._prog)), "seccomp")
