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
