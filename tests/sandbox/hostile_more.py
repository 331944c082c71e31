"""Hostile programs that went past the first suites: signals aimed through files, a tree too deep to
delete recursively, reports built to crash the judge, disk and inode floods. Shared by the hole tests
and the rule test (every program-caused failure scores as a failure)."""

from __future__ import annotations

# Aims a signal at each target through a file: fcntl F_SETOWN / F_SETOWN_EX (+ F_SETSIG, O_ASYNC) and the
# ioctls FIOSETOWN / SIOCSPGRP on a socketpair, then writes to it. Prints "<target> <how> armed|refused:errno".
SIGNAL_THROUGH_FILES = """
import fcntl, os, signal, socket, struct
targets = {"host": HOST_PID, "owner": OWNER_PID, "zygote": os.getppid()}
sigs = {"host": signal.SIGUSR1, "owner": signal.SIGUSR1, "zygote": signal.SIGKILL}
F_SETSIG, F_SETOWN_EX, F_OWNER_PID = 10, 15, 1
for name, pid in targets.items():
    for how in ("setown", "setown_ex", "fiosetown", "siocspgrp"):
        a, b = socket.socketpair()
        try:
            if how == "setown":
                fcntl.fcntl(a, fcntl.F_SETOWN, pid)
            elif how == "setown_ex":
                fcntl.fcntl(a, F_SETOWN_EX, struct.pack("ii", F_OWNER_PID, pid))
            elif how == "fiosetown":
                fcntl.ioctl(a, 0x8901, struct.pack("i", pid))
            else:
                fcntl.ioctl(a, 0x8902, struct.pack("i", pid))
            armed = "armed"
        except OSError as exc:
            armed = f"refused:{exc.errno}"
        for call in (lambda: fcntl.fcntl(a, F_SETSIG, sigs[name]),
                     lambda: fcntl.fcntl(a, fcntl.F_SETFL, fcntl.fcntl(a, fcntl.F_GETFL) | os.O_ASYNC)):
            try:
                call()
            except OSError:
                pass
        b.send(b"x")
        print(name, how, armed, flush=True)
print("done")
"""


def signal_program(host_pid: int, owner_pid: int) -> str:
    return SIGNAL_THROUGH_FILES.replace("HOST_PID", str(host_pid)).replace("OWNER_PID", str(owner_pid))


# 1,500 nested folders with 100-character names (a path of 150,000 characters) and a file at the bottom
DEEP_TREE = """
import os
for _ in range(1500):
    os.mkdir("d" * 100)
    os.chdir("d" * 100)
open("bottom", "w").write("x" * 1000)
print(0)
"""

# a tree whose folders are closed (mode 000) on the way back up
CLOSED_TREE = """
import os
for i in range(50):
    os.makedirs(f"a{i}/b/c")
    open(f"a{i}/b/c/f", "w").write("x")
    os.mkdir(f"a{i}/b/c/closed", 0)  # closed from birth: where chmod is a no-op (a shared uid) too
    os.chmod(f"a{i}/b/c", 0)
    os.chmod(f"a{i}/b", 0)
    os.chmod(f"a{i}", 0)
os.chmod(".", 0o500)
print(0)
"""

DISK_FILL = """
i = 0
while True:
    with open(f"f{i}", "wb") as fh:
        fh.write(b"x" * (1 << 20))
    i += 1
"""

INODE_FILL = """
i = 0
while True:
    open(f"f{i}", "w").close()
    i += 1
"""

# function-call tests: the solution reads the report nonce from the runner above it and reports a value
# built to crash the judge, then leaves before the runner reports
_FORGE_REPORT = """
import os, re, sys
def add(a, b):
    for const in sys._getframe(1).f_globals["_grpo_emit"].__code__.co_consts:
        for nonce in re.findall("[0-9a-f]{24}", const if isinstance(const, str) else ""):
            os.write(1, ("\\n" + nonce + " " + PAYLOAD + "\\n").encode())
    os._exit(0)
"""
JUDGE_CRASHERS = {
    "huge_int": _FORGE_REPORT.replace("PAYLOAD", "'{\"value\": ' + '9' * 5000 + '}'"),
    "deep_brackets": _FORGE_REPORT.replace("PAYLOAD", "'{\"value\": ' + '[' * 50000 + ']' * 50000 + '}'"),
    "huge_float": _FORGE_REPORT.replace("PAYLOAD", "'{\"value\": 1' + '0' * 5000 + '.5}'"),
    "not_a_dict": _FORGE_REPORT.replace("PAYLOAD", "'[3]'"),
    "bad_json": _FORGE_REPORT.replace("PAYLOAD", "'{\"value\": 3'"),
    # built to spin the judge: escaped quotes (a quadratic string regex took about an hour on 1 MiB of them),
    # runs of long integers just under the bound, deep nesting inside strings
    "escaped_quotes": _FORGE_REPORT.replace("PAYLOAD", "'\"' + '\\\\\"' * 400000"),
    "long_integers": _FORGE_REPORT.replace("PAYLOAD", "'{\"value\": [' + ('9' * 4300 + ',') * 200 + '1]}'"),
    "brackets_in_a_string": _FORGE_REPORT.replace("PAYLOAD", "'{\"value\": \"' + '[{' * 300000 + '\"}'"),
}

# stdin/stdout programs of this module: name -> code (the signal, metadata and shared-uid programs need their
# targets filled in; the memory hoards are below)
STDIO = {"deep_tree": DEEP_TREE, "closed_tree": CLOSED_TREE, "disk_fill": DISK_FILL, "inode_fill": INODE_FILL}


# C versions of the attacks: each prints "<name> <return value>" per attempt; every attempt must fail (-1)
C_PRELUDE = """#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <dirent.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#define TRY(name, expr) do { long r_ = (long)(expr); printf("%s %ld\\n", name, r_ < 0 ? -1L : r_); fflush(stdout); } while (0)
"""
C_HOSTILE = {
    "c_fork_bomb": C_PRELUDE + """int main(void) {
    for (int i = 0; i < 8; i++) TRY("fork", fork());
    TRY("vfork_syscall", syscall(SYS_vfork));
    TRY("clone_process", syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0));
    return 0;
}""",
    "c_raw_syscalls": C_PRELUDE + """int main(void) {
    TRY("ptrace_parent", ptrace(PTRACE_ATTACH, getppid(), 0, 0));
    TRY("unshare_user", unshare(CLONE_NEWUSER));
    TRY("mount_tmpfs", mount("none", "/mnt", "tmpfs", 0, 0));
    TRY("chroot", chroot("/"));
    TRY("setuid_root", setuid(0) == 0 && getuid() == 0 ? 0 : -1);
    TRY("io_uring_setup", syscall(425, 8, 0));
    TRY("bpf", syscall(321, 0, 0, 0));
    char *argv[] = {"sh", "-c", "id", 0};
    TRY("execve_sh", execve("/bin/sh", argv, 0));
    return 0;
}""",
    "c_signals": C_PRELUDE + """int main(void) {
    TRY("kill_zygote", kill(getppid(), SIGKILL));
    TRY("kill_init", kill(1, SIGKILL));
    TRY("kill_all", kill(-1, SIGKILL));
    TRY("kill_host", kill(HOST_PID, SIGUSR1));
    int sv[2];
    socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    TRY("setown_host", fcntl(sv[0], F_SETOWN, HOST_PID));
    TRY("setown_zygote", fcntl(sv[0], F_SETOWN, getppid()));
    int pid = getppid();
    TRY("fiosetown", ioctl(sv[0], 0x8901, &pid));
    TRY("siocspgrp", ioctl(sv[0], 0x8902, &pid));
    fcntl(sv[0], F_SETSIG, SIGKILL);
    fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_ASYNC);
    write(sv[1], "x", 1);
    return 0;
}""",
    "c_file_system": C_PRELUDE + """int main(void) {
    TRY("read_shadow", open("/etc/shadow", O_RDONLY));
    TRY("read_passwd", open("/etc/passwd", O_RDONLY));
    TRY("write_tmp", open("TMP_MARKER", O_WRONLY | O_CREAT, 0644));
    TRY("write_victim", open("VICTIM", O_WRONLY | O_TRUNC));
    TRY("list_proc", opendir("/proc") ? 1L : -1L);
    TRY("symlink_escape", (symlink("/etc/hostname", "link"), open("link", O_RDONLY)));
    TRY("climb_out", opendir("..") ? 1L : -1L);
    TRY("write_own_binary", write(5, "x", 1));  /* the sealed memfd it was run from: shared with later tests */
    TRY("grow_own_binary", ftruncate(5, 1 << 20));
    int sh = open("/bin/sh", O_RDONLY);
    char *argv[] = {"sh", "-c", "echo pwned > TMP_MARKER", 0};
    TRY("execveat_sh", syscall(SYS_execveat, sh, "", argv, 0, AT_EMPTY_PATH) == 0 ? 1 : -1);
    return 0;
}""",
    "c_network": C_PRELUDE + """int main(void) {
    TRY("socket_inet", socket(AF_INET, SOCK_STREAM, 0));
    TRY("socket_inet6", socket(AF_INET6, SOCK_DGRAM, 0));
    TRY("socket_netlink", socket(AF_NETLINK, SOCK_RAW, 0));
    int u = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr addr = {AF_UNIX, "\\0grpo-test"};
    TRY("connect_abstract", connect(u, &addr, sizeof addr));
    return 0;
}""",
}


def c_programs(host_pid: int, tmp_marker: str, victim: str) -> dict[str, str]:
    """The C attacks with their targets filled in."""
    return {name: code.replace("HOST_PID", str(host_pid)).replace("TMP_MARKER", tmp_marker).replace("VICTIM", victim)
            for name, code in C_HOSTILE.items()}


# C programs that run into limits: each must end as the program's failure, never a sandbox error
C_LIMITS = {
    "c_output_flood": "#include <stdio.h>\nint main(void){ for (;;) fputs(\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\\n\", stdout); }",
    "c_memory_bomb": "#include <stdlib.h>\n#include <string.h>\nint main(void){ for (;;) { char *p = malloc(1 << 26);"
                     " if (!p) return 3; memset(p, 1, 1 << 26); } }",
    "c_disk_fill": "#include <stdio.h>\nint main(void){ char b[1 << 16] = {1}; char n[32];"
                   " for (int i = 0;; i++) { sprintf(n, \"f%d\", i); FILE *f = fopen(n, \"wb\"); if (!f) return 4;"
                   " for (int j = 0; j < 16; j++) fwrite(b, 1, sizeof b, f); fclose(f); } }",
    "c_stack_overflow": "int f(int n){ volatile char pad[4096]; pad[0] = n; return f(n + 1) + pad[0]; }\n"
                        "int main(void){ return f(0); }",
    "c_sleep": "#include <unistd.h>\nint main(void){ sleep(1000); }",
}


# ---- file metadata Landlock does not mediate, the scheduling of other processes, memory outside RLIMIT_AS ----

# Each attempt prints "<name> done [value]" or "<name> refused:<errno>". VICTIM is a world-writable host file
# carrying the extended attribute user.grpo (set by the test), FOLDER a sticky world-writable host folder; the
# test checks afterwards, from outside, that their attributes and times did not change.
METADATA = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
victim, folder = VICTIM_PATH, FOLDER_PATH
def attempt(name, fn):
    try:
        r = fn()
        print(name, "done", repr(r)[:60] if r is not None else "", flush=True)
    except OSError as exc:
        print(name, f"refused:{exc.errno}", flush=True)
def ok(r):
    if r < 0:
        raise OSError(ctypes.get_errno(), "failed")
    return r
attempt("getxattr", lambda: os.getxattr(victim, "user.grpo"))
attempt("listxattr", lambda: os.listxattr(victim))
attempt("setxattr", lambda: os.setxattr(victim, "user.pwned", b"stash"))
attempt("removexattr", lambda: os.removexattr(victim, "user.grpo"))
attempt("lgetxattr", lambda: os.getxattr(victim, "user.grpo", follow_symlinks=False))
attempt("utime_victim", lambda: os.utime(victim))
attempt("utime_folder", lambda: os.utime(folder))
attempt("utime_ns_victim", lambda: os.utime(victim, ns=(0, 0)))
attempt("chown_victim", lambda: os.chown(victim, -1, -1))
attempt("chmod_victim", lambda: os.chmod(victim, 0o600))
attempt("inotify_init1", lambda: ok(libc.inotify_init1(0)))
attempt("inotify_init", lambda: ok(libc.syscall(253)))
fd = libc.inotify_init1(0)
attempt("inotify_add_watch", lambda: ok(libc.inotify_add_watch(fd, victim.encode(), 0xFFF)))
attempt("fanotify_init", lambda: ok(libc.fanotify_init(0, 0)))
attempt("fanotify_mark", lambda: ok(libc.syscall(301, 0, 1, 0x20, -100, folder.encode())))
import fcntl
usr = os.open("/usr/lib", os.O_RDONLY | os.O_DIRECTORY)  # readable in every profile
attempt("dnotify", lambda: fcntl.fcntl(usr, 1026, 0x1 | 0x80000000))  # F_NOTIFY, DN_ACCESS | DN_MULTISHOT
open("own", "w").close()
own = os.open("own", os.O_RDONLY)
attempt("lease", lambda: fcntl.fcntl(own, 1024, fcntl.F_RDLCK))  # F_SETLEASE on its own file
attempt("setflags", lambda: fcntl.ioctl(own, 0x40086602, b"\0" * 8))  # FS_IOC_SETFLAGS
# in the scratch folder: what programs need keeps working
open("mine", "w").write("x")
os.rename("mine", "mine2")
import shutil
shutil.copy2("mine2", "copy")
print("scratch", open("copy").read(), sorted(os.listdir(".")), flush=True)
"""


def metadata_program(victim: str, folder: str) -> str:
    return METADATA.replace("VICTIM_PATH", repr(victim)).replace("FOLDER_PATH", repr(folder))


# refused outright; file times (and, with a shared uid, modes) are a no-op instead: the test checks the host
METADATA_REFUSED = ("getxattr", "listxattr", "setxattr", "removexattr", "lgetxattr", "chown_victim",
                    "inotify_init1", "inotify_init", "inotify_add_watch", "fanotify_init", "fanotify_mark", "dnotify",
                    "lease", "setflags")

# Aims the scheduling, priority, I/O priority and limit calls at other processes of the machine (TARGETS:
# name -> pid; with a shared uid, the pool's owner and the zygote are the program's own uid), and at a whole
# user; then the same calls on itself (which must work), 300 threads against a task limit of 64, and
# fallocate past the file-size limit.
SHARED_UID = r"""
import ctypes, os, resource, threading, time
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def attempt(name, fn):
    try:
        r = fn()
        print(name, "done", flush=True)
    except OSError as exc:
        print(name, f"refused:{exc.errno}", flush=True)
def sys_(*args):
    r = libc.syscall(*[ctypes.c_long(a) for a in args])
    if r < 0:
        raise OSError(ctypes.get_errno(), "failed")
    return r
IOPRIO_IDLE = 3 << 13
targets = dict(TARGETS, zygote=os.getppid())
for name, pid in targets.items():
    attempt(f"{name}:setpriority", lambda: os.setpriority(os.PRIO_PROCESS, pid, 19))
    attempt(f"{name}:getpriority", lambda: os.getpriority(os.PRIO_PROCESS, pid))
    attempt(f"{name}:sched_setscheduler", lambda: os.sched_setscheduler(pid, os.SCHED_IDLE, os.sched_param(0)))
    attempt(f"{name}:sched_getscheduler", lambda: os.sched_getscheduler(pid))
    attempt(f"{name}:sched_setaffinity", lambda: os.sched_setaffinity(pid, {0}))
    attempt(f"{name}:sched_getaffinity", lambda: os.sched_getaffinity(pid))
    attempt(f"{name}:sched_getparam", lambda: os.sched_getparam(pid))
    attempt(f"{name}:sched_setattr", lambda: sys_(314, pid, 0, 0))
    attempt(f"{name}:prlimit", lambda: resource.prlimit(pid, resource.RLIMIT_NOFILE))
    attempt(f"{name}:ioprio_set", lambda: sys_(251, 1, pid, IOPRIO_IDLE))
    attempt(f"{name}:ioprio_get", lambda: sys_(252, 1, pid))
attempt("user:setpriority", lambda: os.setpriority(os.PRIO_USER, 0, 19))
attempt("user:getpriority", lambda: os.getpriority(os.PRIO_USER, 0))
attempt("user:ioprio_set", lambda: sys_(251, 3, 0, IOPRIO_IDLE))
me = os.getpid()
attempt("self:getpriority", lambda: os.getpriority(os.PRIO_PROCESS, 0))
attempt("self:setpriority", lambda: os.setpriority(os.PRIO_PROCESS, 0, 1))
attempt("self:nice", lambda: os.nice(1))
attempt("self:sched_getaffinity", lambda: os.sched_getaffinity(0))
attempt("self:sched_getaffinity_pid", lambda: os.sched_getaffinity(me))
attempt("self:sched_setaffinity", lambda: os.sched_setaffinity(0, os.sched_getaffinity(0)))
attempt("self:sched_getscheduler", lambda: os.sched_getscheduler(0))
attempt("self:prlimit", lambda: resource.prlimit(0, resource.RLIMIT_NOFILE))
attempt("self:prlimit_pid", lambda: resource.prlimit(me, resource.RLIMIT_NOFILE))
attempt("self:getrlimit", lambda: resource.getrlimit(resource.RLIMIT_NOFILE))
fd = os.open("reserve", os.O_CREAT | os.O_RDWR)
attempt("fallocate_keep_size", lambda: sys_(285, fd, 1, 0, 120 << 20))
attempt("fallocate_punch_hole", lambda: sys_(285, fd, 3, 0, 1 << 20))
attempt("fallocate", lambda: sys_(285, fd, 0, 0, 1 << 20))
attempt("self:posix_fallocate", lambda: os.posix_fallocate(fd, 0, 1 << 16))
print("reserved", os.fstat(fd).st_blocks * 512, flush=True)
stop = threading.Event()
started = 0
try:
    for _ in range(300):
        threading.Thread(target=stop.wait, daemon=True).start()
        started += 1
except RuntimeError:
    pass
stop.set()
print("threads", started, flush=True)
"""


def shared_uid_program(targets: dict[str, int]) -> str:
    return SHARED_UID.replace("TARGETS", repr(targets))


def shared_uid_results(stdout: str) -> dict[str, str]:
    """"name" -> "done" / "refused:errno", plus "threads" and "reserved" -> their numbers."""
    return {line.split()[0]: line.split()[1] for line in stdout.splitlines() if line.strip()}


# Holds memory no mapping shows: 48 memfds of 8 MB (384 MB, each within the file-size limit) under a 256 MB
# limit, or /dev/shm files
MEMFD_HOARD = """
import os
fds = []
for i in range(48):
    fd = os.memfd_create(f"hoard{i}")
    block = b"x" * (1 << 20)
    for _ in range(8):
        os.write(fd, block)
    fds.append(fd)
print("held", len(fds) * 8, "MB", flush=True)
"""
SHM_HOARD = """
import os
files = []
for i in range(48):
    f = open(f"/dev/shm/grpo-hoard-{os.getpid()}-{i}", "wb")
    f.write(b"x" * (8 << 20))
    files.append(f)
print("held", len(files) * 8, "MB", flush=True)
"""

C_METADATA = C_PRELUDE + """#include <sys/xattr.h>
#include <sys/stat.h>
#include <sys/inotify.h>
#include <sys/fanotify.h>
int main(void) {
    char buf[64];
    TRY("getxattr", getxattr("VICTIM", "user.grpo", buf, sizeof buf));
    TRY("listxattr", listxattr("VICTIM", buf, sizeof buf));
    TRY("setxattr", setxattr("VICTIM", "user.pwned", "x", 1, 0));
    TRY("removexattr", removexattr("VICTIM", "user.grpo"));
    struct stat st;
    utimensat(AT_FDCWD, "VICTIM", NULL, 0);
    TRY("utime_victim", stat("VICTIM", &st) == 0 && st.st_mtime != 1000000000 ? 0 : -1);  /* changed: 0 */
    TRY("chown_victim", chown("VICTIM", -1, -1));
    TRY("inotify_init1", inotify_init1(0));
    TRY("inotify_add_watch", inotify_add_watch(inotify_init1(0), "VICTIM", IN_ALL_EVENTS));
    TRY("fanotify_init", fanotify_init(0, 0));
    int fd = open("reserve", O_CREAT | O_RDWR, 0600);
    TRY("fallocate_keep_size", fallocate(fd, 1, 0, 120 << 20));
    TRY("fallocate", fallocate(fd, 0, 0, 1 << 20));
    return 0;
}"""
C_SHARED_UID = C_PRELUDE + """#include <sys/resource.h>
#include <sched.h>
int main(void) {
    int pids[2] = {HOST_PID, getppid()};
    for (int i = 0; i < 2; i++) {
        int pid = pids[i];
        TRY("setpriority", setpriority(PRIO_PROCESS, pid, 19));
        errno = 0;
        int prio = getpriority(PRIO_PROCESS, pid);
        TRY("getpriority", errno ? -1 : prio + 100);
        struct sched_param sp = {0};
        TRY("sched_setscheduler", sched_setscheduler(pid, SCHED_IDLE, &sp));
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(0, &set);
        TRY("sched_setaffinity", sched_setaffinity(pid, sizeof set, &set));
        TRY("sched_getaffinity", sched_getaffinity(pid, sizeof set, &set));
        struct rlimit rl;
        TRY("prlimit", prlimit(pid, RLIMIT_NOFILE, NULL, &rl));
        TRY("ioprio_set", syscall(251, 1, pid, 3 << 13));
    }
    TRY("setpriority_user", setpriority(PRIO_USER, 0, 19));
    return 0;
}"""
C_MEMFD_HOARD = """#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
int main(void) {
    static char block[1 << 20];
    memset(block, 'x', sizeof block);
    int held = 0;
    for (int i = 0; i < 48; i++) {
        int fd = memfd_create("hoard", 0);
        if (fd < 0) { printf("refused %d\\n", held); return 0; }
        for (int j = 0; j < 8; j++) if (write(fd, block, sizeof block) != sizeof block) { printf("short %d\\n", held); return 0; }
        held += 8;
    }
    printf("held %d MB\\n", held);
    return 0;
}"""


def c_metadata_programs(host_pid: int, victim: str) -> dict[str, str]:
    """The C metadata and scheduling attacks with their targets filled in: every line must end in -1."""
    return {name: code.replace("HOST_PID", str(host_pid)).replace("VICTIM", victim)
            for name, code in (("c_metadata", C_METADATA), ("c_shared_uid", C_SHARED_UID))}
