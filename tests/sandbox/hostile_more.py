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
}

# stdin/stdout programs of this module: name -> code (the signal program needs its targets filled in)
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
