"""Hostile programs that talk to each other while they run, and ones that reach past the filter.

Pairs (a sender and a receiver, Python and C): the sender puts a token into kernel state every program can
reach without a file of its own (record and OFD locks and their holders on a system file, flock on system
files, a lock on /dev/null, the uid's count of queued signals, the metadata of its scratch folder found by
guessing its path) and holds it; the receiver, started at the same time in another slot, reads it back and
prints ``got <token>`` (or ``got none``). Both print the wall-clock window they were alive in, so a test can
check they overlapped. Probes: newer system calls the filter never named (listmount, statmount, pidfd_open,
file_setattr, cachestat, ...), host-wide kernel budgets (aio contexts, pipe pages, queued signals), each
printing ``<name> ok:<ret>`` or ``<name> refused:<errno>``.
"""

from __future__ import annotations

import random

BITS = 12


def token() -> int:
    """A fresh token with its top bit set (never 0, never all-ones by chance of a broken read)."""
    return random.randrange(1 << (BITS - 1), (1 << BITS) - 1)


_PY_HEAD = """
import ctypes, fcntl, os, struct, sys, time
T0 = time.time()
TOKEN, BITS, HOLD = {token}, {bits}, {hold}
FLOCK = "hhxxxxqqixxxx"  # struct flock on 64-bit Linux: type, whence, start, len, pid (32 bytes)
F_OFD_GETLK, F_OFD_SETLK = 36, 37
def window():
    print("window", T0, time.time(), flush=True)
"""

# record locks (POSIX, or OFD with cmd 37/36) on a byte per bit of a system file every program can read
PY_LOCK_SENDER = _PY_HEAD + """
fd = os.open(PATH, MODE)
for i in range(BITS):
    if TOKEN >> i & 1:
        try:
            fcntl.fcntl(fd, SETLK, struct.pack(FLOCK, LTYPE, 0, 4096 + i, 1, 0))
        except OSError as exc:
            print("refused", exc.errno, flush=True)
            break
time.sleep(HOLD)
window()
"""
PY_LOCK_RECEIVER = _PY_HEAD + """
fd = os.open(PATH, os.O_RDONLY)
got = 0
end = time.time() + HOLD
while time.time() < end and not got:
    time.sleep(0.05)
    for i in range(BITS):
        try:
            out = fcntl.fcntl(fd, GETLK, struct.pack(FLOCK, fcntl.F_WRLCK, 0, 4096 + i, 1, 0))
        except OSError:
            continue
        if struct.unpack(FLOCK, out)[0] != fcntl.F_UNLCK:
            got |= 1 << i
print("got", got or "none", flush=True)
window()
"""

# flock: one system file per bit, locked whole
PY_FLOCK_FILES = """
import sysconfig
LIB = sysconfig.get_paths()["stdlib"]
FILES = sorted(os.path.join(LIB, n) for n in os.listdir(LIB) if n.endswith(".py"))[:BITS]
"""
PY_FLOCK_SENDER = _PY_HEAD + PY_FLOCK_FILES + """
fds = []
for i, path in enumerate(FILES):
    if TOKEN >> i & 1:
        fd = os.open(path, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError as exc:
            print("refused", exc.errno, flush=True)
            break
        fds.append(fd)
time.sleep(HOLD)
window()
"""
PY_FLOCK_RECEIVER = _PY_HEAD + PY_FLOCK_FILES + """
got = 0
end = time.time() + HOLD
while time.time() < end and not got:
    time.sleep(0.05)
    for i, path in enumerate(FILES):
        fd = os.open(path, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            got |= 1 << i
        except OSError:
            pass
        os.close(fd)
print("got", got or "none", flush=True)
window()
"""

# the uid's count of queued signals (shared by every process of a uid): the sender fills it or not (one bit per
# run), the receiver reports whether it can still queue one real-time signal to itself
PY_SIGQUEUE_SENDER = _PY_HEAD + """
import signal
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
sig = signal.SIGRTMIN + 2
signal.pthread_sigmask(signal.SIG_BLOCK, [sig])
queued = 0
info = ctypes.create_string_buffer(128)
struct.pack_into("iii", info, 0, sig, 0, -1)  # si_signo, si_errno, si_code SI_QUEUE
while TOKEN & 1 and queued < 1_000_000:
    if libc.syscall(129, os.getpid(), sig, info) != 0:  # rt_sigqueueinfo (x86_64)
        break
    queued += 1
print("queued", queued, flush=True)
time.sleep(HOLD)
window()
"""
PY_SIGQUEUE_RECEIVER = _PY_HEAD + """
import signal
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
sig = signal.SIGRTMIN + 3
signal.pthread_sigmask(signal.SIG_BLOCK, [sig])
info = ctypes.create_string_buffer(128)
struct.pack_into("iii", info, 0, sig, 0, -1)
seen = set()
end = time.time() + HOLD
while time.time() < end:
    time.sleep(0.1)
    ok = libc.syscall(129, os.getpid(), sig, info) == 0
    seen.add("free" if ok else f"full:{ctypes.get_errno()}")
    if ok:
        signal.sigtimedwait([sig], 0)  # take it back
print("got", ",".join(sorted(seen)), flush=True)
window()
"""

# metadata of the sender's own scratch folder, found by guessing its path: a file whose size is the token
PY_SCRATCH_SENDER = _PY_HEAD + """
with open("token", "w") as fh:
    fh.write("x" * TOKEN)
print("cwd", os.getcwd(), flush=True)
time.sleep(HOLD)
window()
"""
PY_SCRATCH_RECEIVER = _PY_HEAD + """
import re
here = os.getcwd()
slot_root = os.path.dirname(here)
base = os.path.dirname(slot_root)
m = re.match(r"r(\\d+)-(\\d+)", os.path.basename(here))
ppid = int(m.group(1)) if m else os.getppid()
got = None
end = time.time() + HOLD
while time.time() < end and got is None:
    for slot in [slot_root] + [os.path.join(base, f"slot{i}") for i in range(4)]:
        for pid in range(ppid - 40, ppid + 40):
            for run in range(1, 40):
                path = os.path.join(slot, f"r{pid}-{run}", "token")
                if path != os.path.join(here, "token"):
                    try:
                        got = os.stat(path).st_size
                    except OSError:
                        continue
                    break
            if got is not None:
                break
        if got is not None:
            break
    time.sleep(0.05)
print("got", got if got is not None else "none", flush=True)
window()
"""


def python_pair(kind: str, tok: int, hold: float = 2.0) -> tuple[str, str]:
    """(sender, receiver) Python programs of channel ``kind``."""
    fill = {"token": tok, "bits": BITS, "hold": hold}
    head = _PY_HEAD.format(**fill)
    if kind in ("posix_lock", "ofd_lock", "devnull_lock"):
        path = '"/dev/null"' if kind == "devnull_lock" else '"/etc/ld.so.cache"'
        setlk, getlk = ("F_OFD_SETLK", "F_OFD_GETLK") if kind == "ofd_lock" else ("fcntl.F_SETLK", "fcntl.F_GETLK")
        mode, ltype = ("os.O_RDWR", "fcntl.F_WRLCK") if kind == "devnull_lock" else ("os.O_RDONLY", "fcntl.F_RDLCK")
        consts = f"PATH, SETLK, GETLK, MODE, LTYPE = {path}, {setlk}, {getlk}, {mode}, {ltype}\n"
        return (head + consts + PY_LOCK_SENDER[len(_PY_HEAD):], head + consts + PY_LOCK_RECEIVER[len(_PY_HEAD):])
    table = {"flock": (PY_FLOCK_SENDER, PY_FLOCK_RECEIVER), "sigqueue": (PY_SIGQUEUE_SENDER, PY_SIGQUEUE_RECEIVER),
             "scratch_metadata": (PY_SCRATCH_SENDER, PY_SCRATCH_RECEIVER)}
    sender, receiver = table[kind]
    return head + sender[len(_PY_HEAD):], head + receiver[len(_PY_HEAD):]


PY_KINDS = ("posix_lock", "ofd_lock", "devnull_lock", "flock", "scratch_metadata")

# the same lock channels in C: POSIX and OFD read locks on bytes of /etc/ld.so.cache, flock on system headers
C_PAIR = r"""
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/time.h>
#include <unistd.h>
static double now(void) { struct timeval tv; gettimeofday(&tv, 0); return tv.tv_sec + tv.tv_usec / 1e6; }
static const char *FILES[] = {"/usr/include/stdio.h", "/usr/include/stdlib.h", "/usr/include/string.h",
    "/usr/include/math.h", "/usr/include/errno.h", "/usr/include/fcntl.h", "/usr/include/unistd.h",
    "/usr/include/signal.h", "/usr/include/time.h", "/usr/include/ctype.h", "/usr/include/limits.h",
    "/usr/include/assert.h"};
int main(void) {
    double t0 = now(), hold = HOLD;
    int token = TOKEN, bits = BITS, sender = SENDER, getlk = OFD ? 36 : F_GETLK, setlk = OFD ? 37 : F_SETLK;
    int fd = open("/etc/ld.so.cache", O_RDONLY);
    if (sender) {
        for (int i = 0; i < bits; i++) {
            if (!(token >> i & 1)) continue;
            struct flock fl; memset(&fl, 0, sizeof fl);
            fl.l_type = F_RDLCK; fl.l_whence = SEEK_SET; fl.l_start = 4096 + i; fl.l_len = 1;
            if (fcntl(fd, setlk, &fl) != 0) printf("refused lock\n");
            int f = open(FILES[i], O_RDONLY);
            if (flock(f, LOCK_EX) != 0) printf("refused flock\n");
        }
        usleep((useconds_t)(hold * 1e6));
    } else {
        int got = 0;
        while (now() < t0 + hold && !got) {
            usleep(50000);
            for (int i = 0; i < bits; i++) {
                struct flock fl; memset(&fl, 0, sizeof fl);
                fl.l_type = F_WRLCK; fl.l_whence = SEEK_SET; fl.l_start = 4096 + i; fl.l_len = 1;
                if (fcntl(fd, getlk, &fl) == 0 && fl.l_type != F_UNLCK) got |= 1 << i;
                int f = open(FILES[i], O_RDONLY);
                if (flock(f, LOCK_EX | LOCK_NB) != 0 && errno_is_wouldblock()) got |= 1 << i;
                close(f);
            }
        }
        if (got) printf("got %d\n", got); else printf("got none\n");
    }
    printf("window %.6f %.6f\n", t0, now());
    return 0;
}
"""


def c_pair(tok: int, ofd: bool, hold: float = 2.5) -> tuple[str, str]:
    """(sender, receiver) C programs: record locks (POSIX or OFD) and flock, one bit each per byte/file."""
    def make(sender: bool) -> str:
        src = C_PAIR.replace("HOLD", str(hold)).replace("TOKEN", str(tok)).replace("BITS", str(BITS))
        src = src.replace("SENDER", "1" if sender else "0").replace("OFD ?", "1 ?" if ofd else "0 ?")
        return src.replace("#include <unistd.h>", "#include <unistd.h>\n#include <errno.h>\n"
                                                  "static int errno_is_wouldblock(void) { return errno == EWOULDBLOCK; }")
    return make(True), make(False)


# system calls past the old deny-list, and host-wide budgets; "<name> ok:<ret>" or "<name> refused:<errno>"
PY_PROBES = r"""
import ctypes, fcntl, os, struct
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(name, nr, *args):
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    print(name, f"ok:{r}" if r >= 0 else f"refused:{ctypes.get_errno()}", flush=True)
    return r
buf = ctypes.create_string_buffer(4096)
# listmount: struct mnt_id_req {u32 size, spare; u64 mnt_id, param, mnt_ns_id} of the root mount's children
req = ctypes.create_string_buffer(struct.pack("IIQQQ", 32, 0, 0xFFFFFFFFFFFFFFFF, 0, 0), 32)  # LSMT_ROOT
ids = (ctypes.c_uint64 * 64)()
call("listmount", 458, req, ids, 64, 0)
req2 = ctypes.create_string_buffer(struct.pack("IIQQQ", 32, 0, ids[0] or 1, 0xFFFF, 0), 32)
call("statmount", 457, req2, buf, 4096, 0)
pidfd = call("pidfd_open", 434, os.getppid(), 0)
call("pidfd_getfd", 438, max(pidfd, 0), 0, 0)
try:  # PIDFD_GET_INFO: _IOWR(0xFF, 11, struct pidfd_info), 64 bytes
    fcntl.ioctl(max(pidfd, 0), 0xC040FF0B, bytes(64))
    print("pidfd_get_info ok:0", flush=True)
except OSError as exc:
    print("pidfd_get_info", f"refused:{exc.errno}", flush=True)
open("victim", "w").write("x")
attr = ctypes.create_string_buffer(struct.pack("IIIII", 0x4000, 0, 0, 0, 0) + bytes(8), 32)  # FS_XFLAG_NODUMP
call("file_setattr", 469, -100, b"victim", attr, 24, 0)
call("file_getattr", 468, -100, b"/etc/ld.so.cache", buf, 24, 0)
call("setxattrat", 463, -100, b"victim", 0, b"user.x", buf, 0)
call("open_tree_attr", 467, -100, b"/usr", 1, 0, 0)
fd = os.open("/etc/ld.so.cache", os.O_RDONLY)
call("cachestat", 451, fd, buf, buf, 0)
call("lsm_list_modules", 461, buf, buf, 0)
call("sysinfo", 99, buf)
ctx = ctypes.c_ulong(0)
call("io_setup", 206, 4096, ctypes.byref(ctx))  # aio contexts: fs.aio-max-nr is host-wide
call("mincore", 27, 0, 4096, buf)
call("syscall_500", 500)
call("timer_create", 222, 1, 0, buf)
try:
    r, w = os.pipe()
    fcntl.fcntl(w, 1031, 1 << 20)  # F_SETPIPE_SZ: pipe pages are a per-user budget
    print("pipe_resize ok:0", flush=True)
except OSError as exc:
    print("pipe_resize", f"refused:{exc.errno}", flush=True)
try:
    fcntl.flock(fd, fcntl.LOCK_SH)
    print("flock ok:0", flush=True)
except OSError as exc:
    print("flock", f"refused:{exc.errno}", flush=True)
try:
    fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    print("lockf ok:0", flush=True)
except OSError as exc:
    print("lockf", f"refused:{exc.errno}", flush=True)
print("done", flush=True)
"""
PROBE_NAMES = ("listmount", "statmount", "pidfd_open", "pidfd_getfd", "pidfd_get_info", "file_setattr",
               "file_getattr", "setxattrat", "open_tree_attr", "cachestat", "lsm_list_modules", "sysinfo", "io_setup",
               "mincore", "syscall_500", "timer_create", "pipe_resize", "flock", "lockf")

C_PROBES = r"""
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/syscall.h>
#include <unistd.h>
static void show(const char *name, long r) {
    if (r >= 0) printf("%s ok:%ld\n", name, r); else printf("%s refused:%d\n", name, errno);
}
int main(void) {
    static char buf[4096];
    uint64_t req[4] = {32, 0xFFFFFFFFFFFFFFFFull, 0, 0};  /* size|spare, mnt_id = LSMT_ROOT, param, ns */
    uint64_t ids[64];
    errno = 0; show("listmount", syscall(458, req, ids, 64, 0));
    uint64_t req2[4] = {32, ids[0] ? ids[0] : 1, 0xFFFF, 0};
    errno = 0; show("statmount", syscall(457, req2, buf, sizeof buf, 0));
    errno = 0; long pidfd = syscall(434, getppid(), 0); show("pidfd_open", pidfd);
    errno = 0; show("pidfd_getfd", syscall(438, pidfd < 0 ? 0 : pidfd, 0, 0));
    errno = 0; show("pidfd_get_info", ioctl_probe(pidfd < 0 ? 0 : (int)pidfd));
    int v = open("victim", O_CREAT | O_WRONLY, 0600);
    close(v);
    uint32_t attr[8] = {0x4000};
    errno = 0; show("file_setattr", syscall(469, AT_FDCWD, "victim", attr, 24, 0));
    errno = 0; show("setxattrat", syscall(463, AT_FDCWD, "victim", 0, "user.x", buf, 0));
    int fd = open("/etc/ld.so.cache", O_RDONLY);
    errno = 0; show("cachestat", syscall(451, fd, buf, buf, 0));
    errno = 0; show("sysinfo", syscall(SYS_sysinfo, buf));
    unsigned long ctx = 0;
    errno = 0; show("io_setup", syscall(SYS_io_setup, 4096, &ctx));
    errno = 0; show("syscall_500", syscall(500));
    errno = 0; show("flock", flock(fd, LOCK_SH));
    struct flock fl; memset(&fl, 0, sizeof fl); fl.l_type = F_RDLCK; fl.l_len = 1;
    errno = 0; show("fcntl_lock", fcntl(fd, F_SETLK, &fl));
    errno = 0; show("ofd_lock", fcntl(fd, 37, &fl));
    int p[2]; pipe(p);
    errno = 0; show("pipe_resize", fcntl(p[1], 1031, 1 << 20));
    puts("done");
    return 0;
}
"""
C_PROBES = C_PROBES.replace("static void show", "#include <sys/ioctl.h>\n"
                            "static long ioctl_probe(int fd) { static char info[64]; "
                            "return ioctl(fd, 0xC040FF0B, info); }\nstatic void show")
C_PROBE_NAMES = ("listmount", "statmount", "pidfd_open", "pidfd_getfd", "pidfd_get_info", "file_setattr",
                 "setxattrat", "cachestat", "sysinfo", "io_setup", "syscall_500", "flock", "fcntl_lock", "ofd_lock",
                 "pipe_resize")

# queues real-time signals to itself until the kernel refuses, then holds them: with a per-uid count full, no
# process of that uid (outside the sandbox too) can create a POSIX timer
SIGQUEUE_HOLD = r"""
import ctypes, os, signal, struct, time
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
sig = signal.SIGRTMIN + 2
signal.pthread_sigmask(signal.SIG_BLOCK, [sig])
info = ctypes.create_string_buffer(128)
struct.pack_into("iii", info, 0, sig, 0, -1)
queued = 0
while queued < 1_000_000 and libc.syscall(129, os.getpid(), sig, info) == 0:
    queued += 1
print("queued", queued, os.getuid(), flush=True)
time.sleep(HOLD)
"""

# a process outside the sandbox: can it create a POSIX timer? prints "timer ok" or "timer refused <errno>"
TIMER_CHECK = r"""
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
tid = ctypes.c_int(0)
r = libc.syscall(ctypes.c_long(222), ctypes.c_long(1), None, ctypes.byref(tid))  # timer_create(CLOCK_MONOTONIC)
print("timer ok" if r == 0 else f"timer refused {ctypes.get_errno()}")
"""
