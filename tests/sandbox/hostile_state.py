"""Hostile programs for what a program must not reach beyond its own run: an earlier program's result in
what its slot left it, test data in an installed package, and compile-cache memory and compile time that
outlive it (the last two are below, with their limits).

The first program of a slot ends in a way nobody could guess (``SIZE`` bytes of output, exit code ``CODE``);
a probe run next in the same slot searches everything it inherited for either: live objects of its
interpreter (every stack frame up to the bottom, every object the collector knows, frozen ones too), its
whole heap byte by byte (the pages near every object, probed with a pipe so an unmapped page is an EFAULT,
not a crash; a marker it planted itself shows the scan sees the heap), its open file descriptors, its
environment and the ``/proc`` files of itself and its parent. None of the probes spell the markers whole:
their own code holds only halves, built apart at run time.
"""

from __future__ import annotations

import json
import os

from grpo_rewards.sandbox.program import Limits

SIZE = 40961  # output bytes of the first program
CODE = 77  # its exit code

FIRST = f"import sys\nsys.stdout.write('x' * {SIZE - 1} + '\\n')\nsys.stdout.flush()\nsys.exit({CODE})\n"
FIRST_C = (f"#include <stdio.h>\n#include <stdlib.h>\nint main(void){{ for (int i = 0; i < {SIZE - 1}; i++) "
           f"putchar('x'); putchar('\\n'); fflush(stdout); return {CODE}; }}\n")

PROBE = r'''
import ctypes, gc, json, os, sys
SIZE, CODE = __SIZE__, __CODE__
found = {}

# 1. live objects: every frame up the stack and every object the collector tracks (frozen ones included)
def hits(obj):
    return isinstance(obj, dict) and any(k in obj for k in ("out_size", "exit_code", "err_size"))
frames, f = [], sys._getframe()
while f is not None:
    frames.append(f)
    f = f.f_back
found["frames"] = [f.f_code.co_name for f in frames]
found["frame_results"] = [repr({k: v for k, v in val.items() if k in ("out_size", "exit_code", "status")})
                          for f in frames for val in list(f.f_locals.values()) if hits(val)]
if hasattr(gc, "unfreeze"):
    gc.unfreeze()
found["gc_results"] = [repr({k: v for k, v in o.items() if k in ("out_size", "exit_code", "status")})
                       for o in gc.get_objects() if hits(o)][:5]

# 2. the heap, byte by byte: pages near every object, unmapped ones skipped (a pipe write gives EFAULT)
libc = ctypes.CDLL(None, use_errno=True)
libc.write.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
libc.write.restype = ctypes.c_ssize_t
r, w = os.pipe()
def readable(page):
    n = libc.write(w, page, 4096)
    if n > 0:
        os.read(r, n)
    return n == 4096
planted = b"out_size\xe9" + (31337).to_bytes(4, "little")  # the scan must find this one
prefixes = {b"out_size\xe9": SIZE.to_bytes(4, "little"), b"exit code ": str(CODE).encode(),
            b"exit_code\xe9": CODE.to_bytes(4, "little")}
control = (31337).to_bytes(4, "little")
windows = {id(o) >> 20 for o in gc.get_objects()} | {id(planted) >> 20}
pages = sorted({(win + d) << 8 | p for win in windows for d in (-1, 0, 1) for p in range(256)})
scanned = 0
found["memory_results"], found["control"] = [], False
for page in pages:
    addr = page << 12
    if not readable(addr):
        continue
    scanned += 1
    mem = ctypes.string_at(addr, 4096)
    for prefix, tail in prefixes.items():
        at = mem.find(prefix)
        while at >= 0:
            after = mem[at + len(prefix): at + len(prefix) + len(tail)]
            if after == tail:
                found["memory_results"].append(f"{prefix!r} at {addr + at:#x}")
            if prefix == b"out_size\xe9" and after == control:
                found["control"] = True
            at = mem.find(prefix, at + 1)
found["pages_scanned"] = scanned

# 3. descriptors, environment, /proc of itself and of its parent
fds = []
for fd in range(3, 1024):
    try:
        os.fstat(fd)
        fds.append(fd)
    except OSError:
        pass
found["fds"] = [fd for fd in fds if fd not in (r, w)]
found["env"] = sorted(os.environ)
found["proc"] = {}
for path in ("/proc/self/maps", "/proc/self/mem", f"/proc/{os.getppid()}/status", f"/proc/{os.getppid()}/environ",
             f"/proc/{os.getppid()}/mem", f"/proc/{os.getppid()}/fd"):
    try:
        with open(path, "rb") as fh:
            fh.read(64)
        found["proc"][path] = "read"
    except OSError as exc:
        found["proc"][path] = type(exc).__name__
print("FOUND " + json.dumps(found))
'''.replace("__SIZE__", str(SIZE)).replace("__CODE__", str(CODE))

PROBE_C = r'''
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
extern char **environ;
int main(void) {
    printf("FOUND {\"fds\": [");
    int first = 1;
    for (int fd = 3; fd < 1024; fd++)
        if (fcntl(fd, F_GETFD) >= 0) { printf("%s%d", first ? "" : ", ", fd); first = 0; }
    printf("], \"env\": [");
    first = 1;
    for (char **e = environ; *e; e++) {
        char name[128]; size_t n = strcspn(*e, "=");
        if (n >= sizeof name) n = sizeof name - 1;
        memcpy(name, *e, n); name[n] = 0;
        printf("%s\"%s\"", first ? "" : ", ", name); first = 0;
    }
    printf("], \"proc\": {");
    char paths[6][64];
    snprintf(paths[0], 64, "/proc/self/maps"); snprintf(paths[1], 64, "/proc/self/mem");
    snprintf(paths[2], 64, "/proc/%d/status", getppid()); snprintf(paths[3], 64, "/proc/%d/environ", getppid());
    snprintf(paths[4], 64, "/proc/%d/mem", getppid()); snprintf(paths[5], 64, "/proc/%d/cmdline", getppid());
    for (int i = 0; i < 6; i++) {
        int fd = open(paths[i], O_RDONLY);
        char buf[64];
        const char *state = fd < 0 ? "refused" : read(fd, buf, sizeof buf) > 0 ? "read" : "empty";
        if (fd >= 0) close(fd);
        printf("%s\"%s\": \"%s\"", i ? ", " : "", paths[i], state);
    }
    printf("}}\n");
    return 0;
}
'''


def found(stdout: str) -> dict:
    line = next((x for x in stdout.splitlines() if x.startswith("FOUND ")), None)
    assert line, stdout[-500:]
    return json.loads(line[6:])


# A GRPO group: siblings solve one problem one after another in the same slot. The first computes the
# answer and pads its line with trailing spaces (the judge ignores them) so that its output size says the
# answer; the others compute nothing: they look for the previous run's output size and print it less one.
ORACLE_FIRST = "a, b = map(int, input().split())\nprint(str(a * b).ljust(a * b))\n"
ORACLE_SIBLING = r'''
import gc, sys
sizes = []
f = sys._getframe()
while f is not None:
    sizes += [v["out_size"] for v in list(f.f_locals.values()) if isinstance(v, dict) and "out_size" in v]
    f = f.f_back
if hasattr(gc, "unfreeze"):
    gc.unfreeze()
sizes += [o["out_size"] for o in gc.get_objects() if isinstance(o, dict) and "out_size" in o]
print(sizes[0] - 1 if sizes else "no idea")
'''
ORACLE_TESTS = {"language": "python", "test_cases": [{"input": "6 7\n", "output": "42\n"}]}


# Test data in an installed package (see test_packages)
ANSWER = "answer-7c41d9"


def thief(site: str) -> str:
    """Every way a Python program would reach the answers (and the trainer's own packages): one line each."""
    import pluggy

    venv_site = os.path.dirname(os.path.dirname(pluggy.__file__))
    attempts = {
        "import_pkg": "import answers_pkg; print(answers_pkg.EXPECTED)",
        "import_mod": "import answers_mod; print(answers_mod.EXPECTED)",
        "read_data": f"print(open({os.path.join(site, 'answers_pkg', 'expected.json')!r}).read())",
        "list_site": f"print(os.listdir({site!r}))",
        "path_append": f"sys.path.append({site!r}); import answers_pkg; print(answers_pkg.EXPECTED)",
        "trainer_package": f"print(open({pluggy.__file__!r}).read()[:20])",
        "list_trainer_site": f"print(os.listdir({venv_site!r}))",
        "import_trainer_package": "import pluggy; print(pluggy.__name__)",
        "stdlib": "import json, decimal, fractions; print(json.dumps([1]))",
    }
    lines = ["import os, sys"]
    for name, code in attempts.items():
        lines.append(f"try:\n    exec({code!r})\n    print({name!r}, 'reached')\nexcept Exception as exc:\n"
                     f"    print({name!r}, 'refused', type(exc).__name__)")
    return "\n".join(lines) + "\n"


def outcome(stdout: str) -> dict[str, str]:
    return {line.split()[0]: line.split()[1] for line in stdout.splitlines() if line.split()[1:2] in (["reached"],
                                                                                                         ["refused"])}


C_THIEF = r'''
#include <stdio.h>
int main(void) {
    FILE *f = fopen("__PATH__", "r");
    char buf[128] = {0};
    if (!f) { puts("refused"); return 0; }
    fread(buf, 1, sizeof buf - 1, f);
    printf("reached %s\n", buf);
    return 0;
}
'''


# What outlives a program (see test_compile_cache)
# a distinct source per n, each compiled into a binary of over 20 MB (initialised data)
BIG = "#include <stdio.h>\nchar big[20 << 20] = {{{n}}};\nint main(void){{ printf(\"%d\\n\", big[0]); }}\n"
BIG_LIMITS = Limits(cpu_seconds=20.0, wall_seconds=60.0, memory_mb=1024, output_bytes=1 << 20, file_size_mb=8)
# 2^16 distinct instantiations: about 25 s and 400 MB to compile on the development VM
BOMB = ("template<int D, long N> struct T { static const long v = T<D-1, 2*N>::v + T<D-1, 2*N+1>::v; };\n"
        "template<long N> struct T<0, N> { static const long v = N; };\nint main(){ return (int)T<16, 0>::v; }\n")
BOMB_LIMITS = Limits(cpu_seconds=2.0, wall_seconds=4.0, memory_mb=512, output_bytes=1 << 20, file_size_mb=8)
