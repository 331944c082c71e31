"""A seccomp-BPF allow-list written by hand (no libseccomp): the system calls a sandboxed program may make.

Only the calls of :data:`ALLOWED` pass, each group with the reason a runtime needs it (measured from the
test suite's own Python, C and C++ programs and the compiler driving them: ``strace -f`` of the benign,
language and reward tests, every call made after the filter went on). Every other call gets ``ENOSYS``, as
on a kernel that does not have it, so a runtime that probes a newer call falls back; a system call added by
the next kernel release is refused the same way without anyone naming it (``listmount``, ``statmount``,
``file_setattr``, ``cachestat``... are not named anywhere: they are simply not allowed).

Some refusals answer otherwise, so programs meet the error they expect (each named in :data:`REFUSED`):
``EPERM`` for what a program is not allowed (exec, fork, every socket family but ``AF_UNIX``, the other
process, IPC and limit calls of :data:`REFUSED`), ``EOPNOTSUPP`` for extended attributes and ``fallocate``
(what a file system without them answers: ``shutil.copy2`` goes on), success that changes nothing for file
times (and, with a shared uid, modes), ``ENOLCK`` for file locks (``fcntl`` record and OFD locks: a lock on a
file every program can open, and the holder ``F_GETLK`` reports, would carry data between programs running
at the same time; ``flock`` is not allowed at all) and ``ENOTTY`` for every ``ioctl`` request but the few
that ask about a file descriptor itself (``prctl``: ``EINVAL`` for every option but naming and reading its own
flags).

Calls whose arguments decide: ``clone`` only for a thread and without a pidfd (``clone3`` gets ``ENOSYS`` so libc falls back to
``clone``); ``socket``/``socketpair`` only ``AF_UNIX``, and ``sendto`` only without an address (a unix
socket talks to its ``socketpair`` peer, nothing else: ``connect``/``bind``/``sendmsg`` are refused);
``fcntl`` no lock, no lease, no ``F_NOTIFY``, no pipe resize (pipe pages are a per-user budget) and no
way to aim a signal at a pid (``F_SETOWN``/``F_SETOWN_EX``/``F_SETSIG``); the scheduling, priority and limit
calls (``setpriority``/``getpriority``, ``sched_*``, ``ioprio_*``, ``prlimit64``) only on pid 0 or the
caller's own pid and never for a whole user (each child installs a copy of the filter with its pid patched
in: :meth:`Filter.for_pid`), ``prlimit64`` only to read.

``deny_signals`` (no slot uid and no Landlock signal scope): ``kill`` and friends are refused too.
``shared_uid``: ``chmod`` and variants are a no-op that reports success (the program shares its uid with
the pool's owner and could change the mode of their files; Landlock does not mediate it). ``deny_memfd``:
no ``memfd_create`` (where no memory cgroup accounts its pages).

Modes: ``python`` (the default: no exec at all); ``exec`` (a compiled program: the child may
``execveat(fd, "", AT_EMPTY_PATH)`` its binary's memfd, nothing else); ``compile`` (the compiler driver:
fork, vfork, any clone and exec, so ``g++`` can run ``cc1plus``, ``as`` and ``ld``; Landlock still limits
what it reads, writes and executes). A foreign architecture (a 32-bit call) or an x32 call kills the
process. The numbers are the machine's own: x86_64 and aarch64 (:mod:`syscalls`).
"""

from __future__ import annotations

import ctypes
import errno
import struct

from .linux import MACHINE, PR_SET_NO_NEW_PRIVS, check, libc, prctl
from .syscalls import AARCH64, X86_64

AUDIT_ARCH_X86_64 = 0xC000003E
AUDIT_ARCH_AARCH64 = 0xC00000B7
X32_BIT = 0x40000000
SECCOMP_SET_MODE_FILTER = 1

RET_KILL_PROCESS = 0x80000000
RET_ERRNO = 0x00050000
RET_ALLOW = 0x7FFF0000

LD_W_ABS, JA, JEQ_K, JGE_K, JSET_K, RET_K = 0x20, 0x05, 0x15, 0x35, 0x45, 0x06
OFF_NR, OFF_ARCH = 0, 4
CLONE_THREAD = 0x00010000
CLONE_PIDFD = 0x00001000
AF_UNIX = 1
AT_EMPTY_PATH = 0x1000
PRIO_USER, IOPRIO_WHO_USER = 2, 3
MODES = ("python", "exec", "compile")

# machine -> (audit architecture, numbers by name)
ARCHES: dict[str, tuple[int, dict[str, int]]] = {"x86_64": (AUDIT_ARCH_X86_64, X86_64),
                                                 "aarch64": (AUDIT_ARCH_AARCH64, AARCH64)}

# group -> (system calls, why the runtimes need them). Names one architecture lacks are skipped there.
ALLOWED: dict[str, tuple[tuple[str, ...], str]] = {
    "exit": (("exit", "exit_group", "restart_syscall", "rt_sigreturn"),
             "ending the program and its threads, resuming an interrupted call, returning from a handler"),
    "memory": (("brk", "mmap", "munmap", "mprotect", "mremap", "madvise", "msync", "mseal", "mbind",
                "get_mempolicy", "set_mempolicy"),
               "malloc, the loader mapping shared libraries and extension modules, the garbage collector; NUMA "
               "policy of its own pages (OpenBLAS); bounded by RLIMIT_AS and the memory cgroup"),
    "threads": (("set_tid_address", "set_robust_list", "rseq", "futex", "futex_waitv", "futex_wake", "futex_wait",
                 "futex_requeue", "gettid", "sched_yield", "getcpu", "arch_prctl", "prctl"),
                "threads (a thread is a clone with CLONE_THREAD and no pidfd, below), their locks and thread-local storage; "
                "prctl only to name a thread, name its own mappings and read its own flags (by option, below)"),
    "time": (("clock_gettime", "clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday", "time",
              "getitimer", "setitimer", "alarm", "timerfd_create", "timerfd_settime", "timerfd_gettime"),
             "clocks, sleeps, alarms and timers of the process itself (POSIX timers, which count against a "
             "per-user budget, are not allowed)"),
    "signals": (("rt_sigaction", "rt_sigprocmask", "rt_sigpending", "rt_sigtimedwait", "rt_sigsuspend",
                 "sigaltstack", "pause", "signalfd", "signalfd4"),
                "signal handlers and masks (Python's own, alarms, SIGPIPE)"),
    "descriptors": (("read", "write", "pread64", "pwrite64", "readv", "writev", "preadv", "pwritev", "preadv2",
                     "pwritev2", "lseek", "close", "close_range", "dup", "dup2", "dup3", "fstat", "ftruncate",
                     "fsync", "fdatasync", "fadvise64", "sendfile", "copy_file_range", "splice", "tee", "pipe",
                     "pipe2", "poll", "ppoll", "select", "pselect6", "epoll_create", "epoll_create1", "epoll_ctl",
                     "epoll_wait", "epoll_pwait", "epoll_pwait2", "eventfd", "eventfd2", "fcntl", "ioctl"),
                    "I/O on descriptors it holds (stdin, stdout, stderr, its own files, pipes and socketpairs), "
                    "asyncio's event loop; fcntl and ioctl by command, below"),
    "paths": (("open", "openat", "creat", "stat", "lstat", "newfstatat", "statx", "access", "faccessat",
               "faccessat2", "readlink", "readlinkat", "getdents64", "getcwd", "chdir", "fchdir", "mkdir", "mkdirat",
               "rmdir", "unlink", "unlinkat", "rename", "renameat", "renameat2", "link", "linkat", "symlink",
               "symlinkat", "truncate", "umask", "chmod", "fchmod", "fchmodat", "fchmodat2", "statfs", "fstatfs"),
              "imports, the loader and the compiler reading the system paths, programs using their scratch "
              "folder: Landlock decides which files (the system paths read-only, the scratch folder read-write); "
              "the modes of the linker's output; a file system's block size (posix_fallocate writes by it)"),
    "sockets": (("socket", "socketpair", "sendto", "recvfrom", "recvmsg", "shutdown", "getsockopt", "setsockopt",
                 "getsockname", "getpeername"),
                "a socketpair between threads (asyncio's self-pipe); only AF_UNIX and only to its peer"),
    "self": (("getpid", "getppid", "getuid", "geteuid", "getgid", "getegid", "getresuid", "getresgid", "getgroups",
              "getpgrp", "getpgid", "getsid", "uname", "getrusage", "times", "getrlimit", "getrandom", "capget",
              "wait4", "waitid"),
             "who and where it is (the uname of its own UTS namespace), its own usage and limits, random bytes, "
             "its own children (the compiler's)"),
    "signals to itself": (("kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo"),
                          "raise(), abort(), Python's signal.raise_signal; other processes are out of reach (slot "
                          "uid, Landlock signal scope, or refused outright where neither holds); queued signals "
                          "are capped at RLIMIT_SIGPENDING 0"),
}
SELF_ONLY_CALLS = ("getpriority", "setpriority", "sched_setparam", "sched_getparam", "sched_setscheduler",
                   "sched_getscheduler", "sched_rr_get_interval", "sched_setaffinity", "sched_getaffinity",
                   "sched_setattr", "sched_getattr", "ioprio_set", "ioprio_get", "prlimit64")
ALLOWED["scheduling of itself"] = (SELF_ONLY_CALLS, "CPU affinity (OpenMP, OpenBLAS, os.sched_getaffinity), nice "
                                                    "and limits read back: pid 0 or its own only")
ALLOWED["memfd"] = (("memfd_create",), "anonymous files (only where the slot's memory cgroup accounts them)")
ALLOWED["compile"] = (("fork", "vfork", "clone", "execve", "execveat"),
                      "the compiler driver running cc1plus, as and ld (compile mode only)")

# refused with EPERM (the rest of what is not allowed gets ENOSYS): what a program is not allowed to do
REFUSED: dict[str, tuple[str, ...]] = {
    "exec and processes": ("fork", "vfork", "execve", "execveat", "ptrace", "process_vm_readv", "process_vm_writev",
                           "kcmp", "pidfd_open", "pidfd_getfd", "pidfd_send_signal", "setsid", "setpgid"),
    "network": ("connect", "accept", "accept4", "sendmsg", "sendmmsg", "bind", "listen"),
    "mounts and namespaces": ("mount", "umount2", "pivot_root", "chroot", "unshare", "setns", "open_tree",
                              "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr"),
    "kernel": ("bpf", "io_uring_setup", "io_uring_enter", "io_uring_register", "userfaultfd", "perf_event_open",
               "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "reboot", "swapon",
               "swapoff", "acct", "syslog", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "iopl",
               "ioperm", "quotactl", "personality", "setrlimit", "memfd_secret", "modify_ldt", "add_key",
               "request_key", "keyctl", "io_setup", "lookup_dcookie", "name_to_handle_at", "open_by_handle_at"),
    "IPC that outlives a process": ("shmget", "shmat", "shmctl", "shmdt", "semget", "semop", "semctl", "semtimedop",
                                    "msgget", "msgsnd", "msgrcv", "msgctl", "mq_open", "mq_unlink", "mq_timedsend",
                                    "mq_timedreceive", "mq_notify", "mq_getsetattr"),
    "file metadata and notification": ("chown", "fchown", "lchown", "fchownat", "inotify_init", "inotify_init1",
                                       "inotify_add_watch", "fanotify_init", "fanotify_mark"),
    "other processes' memory": ("migrate_pages", "move_pages", "process_madvise", "process_mrelease",
                                "get_robust_list"),
}
# refused with EOPNOTSUPP: what a file system without them answers, which programs handle
UNSUPPORTED = ("setxattr", "lsetxattr", "fsetxattr", "getxattr", "lgetxattr", "fgetxattr", "listxattr", "llistxattr",
               "flistxattr", "removexattr", "lremovexattr", "fremovexattr", "setxattrat", "getxattrat", "listxattrat",
               "removexattrat", "fallocate")
# a no-op that reports success: file times (no host file's change; shutil.copy2 goes on); with a shared uid
# also the mode of a file
NOOP_TIMES = ("utime", "utimes", "futimesat", "utimensat")
CHMOD = ("chmod", "fchmod", "fchmodat", "fchmodat2")
SIGNAL_CALLS = ALLOWED["signals to itself"][0]
COMPILE_ONLY = ALLOWED["compile"][0]

# (pid argument, (argument, value) that names a whole user or None) of the calls that reach only the caller
SELF_ONLY_ARGS: dict[str, tuple[int, tuple[int, int] | None]] = {
    "getpriority": (1, (0, PRIO_USER)), "setpriority": (1, (0, PRIO_USER)), "ioprio_set": (1, (0, IOPRIO_WHO_USER)),
    "ioprio_get": (1, (0, IOPRIO_WHO_USER)),
}
F_GETLK, F_SETLK, F_SETLKW, F_OFD_GETLK, F_OFD_SETLK, F_OFD_SETLKW = 5, 6, 7, 36, 37, 38
FCNTL_LOCKS = (F_GETLK, F_SETLK, F_SETLKW, F_OFD_GETLK, F_OFD_SETLK, F_OFD_SETLKW)
# duplicate, close-on-exec, status flags, owner and lease read back, seals, pipe size read back
FCNTL_ALLOWED = (0, 1, 2, 3, 4, 9, 11, 16, 1025, 1027, 1030, 1032, 1033, 1034)
# isatty (TCGETS), terminal size, bytes readable, non-blocking, close-on-exec
TCGETS, TIOCGWINSZ, FIONREAD, FIONBIO, FIONCLEX, FIOCLEX = 0x5401, 0x5413, 0x541B, 0x5421, 0x5450, 0x5451
IOCTL_ALLOWED = (TCGETS, TIOCGWINSZ, FIONREAD, FIONBIO, FIONCLEX, FIOCLEX)
# prctl: read its dumpable flag, name (set and read), seccomp mode, no_new_privs (set and read), bounding set and
# THP flag; name an anonymous mapping. Any other option: EINVAL, as a kernel that does not know it answers
PRCTL_ALLOWED = (3, 15, 16, 21, 23, 38, 39, 42, 0x53564D41)


def available() -> bool:
    """Whether this module has a syscall table for this machine (x86_64 and aarch64)."""
    return MACHINE in ARCHES


def _ins(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k)


def _arg_lo(i: int) -> int:
    return 16 + 8 * i


def _ret(value: int) -> bytes:
    return _ins(RET_K, value)


def _null_arg(arg: int) -> list[bytes]:
    """Allow when the 64-bit argument ``arg`` is 0 (a NULL pointer), else EPERM."""
    return [_ins(LD_W_ABS, _arg_lo(arg)), _ins(JEQ_K, 0, 0, 3), _ins(LD_W_ABS, _arg_lo(arg) + 4),
            _ins(JEQ_K, 0, 0, 1), _ret(RET_ALLOW), _ret(RET_ERRNO | errno.EPERM)]


def _self_only(pid_arg: int, own_pid: int, whole_user: tuple[int, int] | None = None,
               then: list[bytes] | None = None) -> list[bytes]:
    """EPERM unless the pid argument is 0 or ``own_pid`` (and, with ``whole_user``, the
    argument that would name a whole user does not); then ``then`` (default: allow). Pids are ``pid_t``:
    the kernel reads the low 32 bits only."""
    then = then or [_ret(RET_ALLOW)]
    body = []
    if whole_user is not None:
        body += [_ins(LD_W_ABS, _arg_lo(whole_user[0])), _ins(JEQ_K, whole_user[1], 3, 0)]  # to the deny
    body += [_ins(LD_W_ABS, _arg_lo(pid_arg)), _ins(JEQ_K, 0, 2, 0), _ins(JEQ_K, own_pid & 0xFFFFFFFF, 1, 0),
             _ret(RET_ERRNO | errno.EPERM), *then]
    return body


def _by_value(arg: int, allowed: tuple[int, ...], refused: dict[int, int], otherwise: int) -> list[bytes]:
    """Allow when the low word of ``arg`` is one of ``allowed``; answer ``refused[value]`` for
    those values; ``otherwise`` for any other value."""
    body = [_ins(LD_W_ABS, _arg_lo(arg))]
    for value in allowed:
        body += [_ins(JEQ_K, value, 0, 1), _ret(RET_ALLOW)]
    for value, answer in refused.items():
        body += [_ins(JEQ_K, value, 0, 1), _ret(answer)]
    body.append(_ret(otherwise))
    return body


OWN_PID_MARK = 0x5EC0DE01  # stands for the child's pid in the filter built once; patched per child


def allowed_names(mode: str = "python", *, deny_signals: bool = False, deny_memfd: bool = False) -> set[str]:
    """The names the filter of ``mode`` lets through (some by argument): the groups of :data:`ALLOWED`."""
    names = {name for calls, _ in ALLOWED.values() for name in calls}
    if mode != "compile":
        names -= set(COMPILE_ONLY)
        names.add("clone")  # threads only
        if mode == "exec":
            names.add("execveat")  # its own memfd only
    if deny_signals:
        names -= set(SIGNAL_CALLS)
    if deny_memfd:
        names.discard("memfd_create")
    return names


def build_filter(deny_signals: bool = False, mode: str = "python", *, own_pid: int = OWN_PID_MARK,
                 shared_uid: bool = False, deny_memfd: bool = False, machine: str = MACHINE) -> bytes:
    """The BPF program as bytes (``struct sock_filter[]``) for ``machine``; ``mode`` of :data:`MODES`.
    Scheduling and limit calls reach only pid 0 and ``own_pid``; ``shared_uid``: chmod is a no-op."""
    if machine not in ARCHES:
        raise OSError(errno.ENOSYS, f"no seccomp syscall table for {machine}")
    if mode not in MODES:
        raise ValueError(f"unknown seccomp mode {mode!r}")
    arch, table = ARCHES[machine]

    def nr(name: str) -> int | None:
        return table.get(name)

    eperm = RET_ERRNO | errno.EPERM
    allowed = allowed_names(mode, deny_signals=deny_signals, deny_memfd=deny_memfd)
    special = {"clone", "clone3", "socket", "socketpair", "sendto", "fcntl", "ioctl", "prctl", "execveat",
               *SELF_ONLY_CALLS}
    if shared_uid and mode != "compile":  # the linker sets the mode of its output
        special |= set(CHMOD)
    # call number -> a constant answer, or the instructions that answer by argument (they end in returns)
    answer: dict[int, int | list[bytes]] = {n: RET_ALLOW for name in allowed - special if (n := nr(name)) is not None}
    if mode == "compile":
        answer[table["clone"]] = answer[table["execveat"]] = RET_ALLOW
    else:
        # a thread's pidfd (CLONE_PIDFD, Linux 6.9+) is numbered from a counter the whole machine shares: EINVAL,
        # what a kernel without thread pidfds answers
        answer[table["clone"]] = [_ins(LD_W_ABS, _arg_lo(0)), _ins(JSET_K, CLONE_PIDFD, 3, 0),
                                  _ins(JSET_K, CLONE_THREAD, 0, 1), _ret(RET_ALLOW), _ret(eperm),
                                  _ret(RET_ERRNO | errno.EINVAL)]
        if mode == "exec":
            answer[table["execveat"]] = [_ins(LD_W_ABS, _arg_lo(4)), _ins(JEQ_K, AT_EMPTY_PATH, 0, 1),
                                         _ret(RET_ALLOW), _ret(eperm)]
    answer[table["clone3"]] = RET_ERRNO | errno.ENOSYS
    for name in ("socket", "socketpair"):
        answer[table[name]] = [_ins(LD_W_ABS, _arg_lo(0)), _ins(JEQ_K, AF_UNIX, 0, 1), _ret(RET_ALLOW),
                               _ret(RET_ERRNO | errno.EAFNOSUPPORT)]
    answer[table["sendto"]] = _null_arg(4)
    locks = {cmd: RET_ERRNO | errno.ENOLCK for cmd in FCNTL_LOCKS}
    answer[table["fcntl"]] = _by_value(1, FCNTL_ALLOWED, locks, eperm)
    answer[table["ioctl"]] = _by_value(1, IOCTL_ALLOWED, {}, RET_ERRNO | errno.ENOTTY)
    answer[table["prctl"]] = _by_value(0, PRCTL_ALLOWED, {}, RET_ERRNO | errno.EINVAL)
    for name in SELF_ONLY_CALLS:
        if name == "prlimit64":
            answer[table[name]] = _self_only(0, own_pid, then=_null_arg(2))
        else:
            pid_arg, whole_user = SELF_ONLY_ARGS.get(name, (0, None))
            answer[table[name]] = _self_only(pid_arg, own_pid, whole_user)
    refusals = [(eperm, [n for names in REFUSED.values() for n in names if n not in allowed]),
                (RET_ERRNO | errno.EOPNOTSUPP, UNSUPPORTED), (RET_ERRNO | 0, NOOP_TIMES)]
    if shared_uid and mode != "compile":
        refusals.append((RET_ERRNO | 0, CHMOD))
    if deny_signals:
        refusals.append((eperm, SIGNAL_CALLS))
    if deny_memfd:
        refusals.append((eperm, ("memfd_create",)))
    for value, names in refusals:
        for name in names:
            if (n := nr(name)) is not None:
                answer.setdefault(n, value)
    head = [_ins(LD_W_ABS, OFF_ARCH), _ins(JEQ_K, arch, 1, 0), _ret(RET_KILL_PROCESS), _ins(LD_W_ABS, OFF_NR)]
    if machine == "x86_64":
        head += [_ins(JGE_K, X32_BIT, 0, 1), _ret(RET_KILL_PROCESS)]
    prog = head + _search(answer, RET_ERRNO | errno.ENOSYS)
    if len(prog) > 4096:
        raise ValueError(f"seccomp filter of {len(prog)} instructions (the kernel takes 4096)")
    return b"".join(prog)


def _search(answer: dict[int, int | list[bytes]], default: int) -> list[bytes]:
    """A binary search over the call number (in the accumulator): the number line is cut into runs of one
    answer (a constant, or the instructions of one call that answers by argument), and a tree of ``JGE``
    finds the run in a few comparisons, both when a call runs and when the kernel, installing the filter,
    works out (and caches) the answer of every call that does not depend on an argument. Short: one
    instruction per cut, so it costs little to load."""
    top = max(answer) + 2
    runs: list[tuple[int, int | list[bytes]]] = []  # (first number, answer) of each run
    for number in range(top):
        value = answer.get(number, default)
        if not runs or isinstance(value, list) or isinstance(runs[-1][1], list) or runs[-1][1] != value:
            runs.append((number, value))

    def emit(lo: int, hi: int) -> list[bytes]:  # the runs lo..hi-1
        if hi - lo == 1:
            value = runs[lo][1]
            return list(value) if isinstance(value, list) else [_ret(value)]
        mid = (lo + hi) // 2
        left, right = emit(lo, mid), emit(mid, hi)
        if len(left) <= 255:
            return [_ins(JGE_K, runs[mid][0], len(left), 0), *left, *right]
        return [_ins(JGE_K, runs[mid][0], 0, 1), _ins(JA, len(left)), *left, *right]

    return emit(0, len(runs))


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
        check(libc.syscall(ctypes.c_long(ARCHES[MACHINE][1]["seccomp"]),
                           ctypes.c_uint(SECCOMP_SET_MODE_FILTER), ctypes.c_uint(0), ctypes.byref(self._prog)),
              "seccomp")
