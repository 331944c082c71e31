"""Local sandbox per profile, Python and C++: programs per second and median overhead, beside ``python3 -c``.

    python benchmarks/sandbox.py [--programs 1000] [--slots N] [--latency-runs 200] [--compiles 5]
                                 [--profiles default,hardened,strict]

For every profile this machine offers (as root, ``default`` is reached by dropping the
layers above it, as the tests do): throughput of N trivial programs with ``slots`` in
flight (default two per core, the pool's default), and the median end-to-end time of one
trivial program run alone (its own work is ~0), for Python and for a C++ binary. The C++
compile step is timed on its own (distinct sources, so none comes from the compile cache;
``<cstdio>`` and ``<bits/stdc++.h>``); its binary is then reused, as every test of one
completion reuses it. A plain ``python3 -c`` per program is measured once for scale. The
machine's load average is printed before and after: other processes on a shared box
skew every wall-clock column.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from grpo_rewards.sandbox import probe
from grpo_rewards.sandbox.pool import LocalSandbox, compilers
from grpo_rewards.sandbox.program import Limits, Program

CODE = "print(sum(range(100)))"
CPP = "#include <cstdio>\nint main(){ long s = 0; for (int i = 0; i < 100; i++) s += i; printf(\"%ld\\n\", s); }\n"
CPP_HEAVY = "#include <bits/stdc++.h>\nint main(){ std::vector<int> v(100); std::iota(v.begin(), v.end(), 0);\n" \
            "std::cout << std::accumulate(v.begin(), v.end(), 0L) << '\\n'; }\n"
# a compile runs under its program's limits: room for <bits/stdc++.h> on a loaded machine
COMPILE_ROOM = Limits(cpu_seconds=20, wall_seconds=60, memory_mb=2048)
DEFAULT_AS_ROOT = ("uid", "bwrap", "pidns", "netns", "ipcns", "utsns", "tmpfs-scratch")


def profile_options() -> dict[str, dict]:
    found = probe.probe()
    out: dict[str, dict] = {}
    if found.profile in ("default", "hardened", "strict"):
        out["default"] = {"disable": DEFAULT_AS_ROOT} if "uid" in found.layers else {"profile": "default"}
    for name in ("hardened", "strict"):
        if set(probe.PROFILES[name]) <= set(found.layers):
            out[name] = {"profile": name}
    return out


def throughput(box: LocalSandbox, program: Program, n: int, want: str) -> float:
    box.run([program] * (2 * box.slots))  # warm up
    t0 = time.perf_counter()
    results = box.run([program] * n)
    rate = n / (time.perf_counter() - t0)
    assert all(r.status == "ok" and r.stdout == want for r in results), {(r.status, r.error) for r in results}
    return rate


def latency(box: LocalSandbox, program: Program, n: int) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        r = box.run_one(program)
        times.append(time.perf_counter() - t)
        assert r.status == "ok", r
    return statistics.median(times) * 1000


def compile_times(box: LocalSandbox, source: str, n: int) -> tuple[float, float]:
    """Median wall and CPU (ms) of compiling ``source`` ``n`` times (a comment makes each one new)."""
    walls, cpus = [], []
    for i in range(n):
        r = box.run_one(Program(f"{source}// {time.time_ns()} {i}\n", "", "cpp", COMPILE_ROOM))
        assert r.status == "ok", (r.status, r.error, r.stderr[-300:])
        walls.append(r.extra["compile_wall"] * 1000)
        cpus.append(r.extra["compile_cpu"] * 1000)
    return statistics.median(walls), statistics.median(cpus)


def plain(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={}, check=True).stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--programs", type=int, default=1000)
    ap.add_argument("--slots", type=int, default=2 * (os.cpu_count() or 1))
    ap.add_argument("--latency-runs", type=int, default=200)
    ap.add_argument("--compiles", type=int, default=5)
    ap.add_argument("--profiles", default="", help="comma-separated (default: every profile this machine offers)")
    args = ap.parse_args()
    options = profile_options()
    names = [p for p in args.profiles.split(",") if p] or list(options)
    cpp = "cpp" in compilers()
    limits = Limits(cpu_seconds=5, wall_seconds=10, memory_mb=1024)
    load = os.getloadavg()
    print(f"machine: {os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (start)")
    rows = []
    for name in names:
        t0 = time.perf_counter()
        with LocalSandbox(slots=args.slots, limits=limits, **options[name]) as box:
            startup = (time.perf_counter() - t0) * 1000
            row = {"profile": name, "active": box.profile, "layers": box.layers, "startup": startup,
                   "py_rate": throughput(box, Program(CODE), args.programs, "4950\n"),
                   "py_lat": latency(box, Program(CODE), args.latency_runs)}
            if cpp:
                row["cc_wall"], row["cc_cpu"] = compile_times(box, CPP, args.compiles)
                row["cc_heavy_wall"], row["cc_heavy_cpu"] = compile_times(box, CPP_HEAVY, max(1, args.compiles // 2))
                binary = Program(CPP, "", "cpp")
                row["cpp_rate"] = throughput(box, binary, args.programs, "4950\n")
                row["cpp_lat"] = latency(box, binary, args.latency_runs)
        rows.append(row)
        print(f"  {name}: done (active profile {row['active']}, layers {','.join(row['layers'])})", flush=True)

    n_plain = max(args.programs // 10, 50)
    with ThreadPoolExecutor(args.slots) as ex:
        list(ex.map(plain, [CODE] * args.slots))
        t0 = time.perf_counter()
        assert all(o == "4950\n" for o in ex.map(plain, [CODE] * n_plain))
        plain_rate = n_plain / (time.perf_counter() - t0)
    plain_lat = []
    for _ in range(max(args.latency_runs // 5, 30)):
        t = time.perf_counter()
        plain(CODE)
        plain_lat.append(time.perf_counter() - t)

    load = os.getloadavg()
    print(f"machine: {os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (end); "
          f"slots={args.slots}, {args.programs} programs per throughput run")
    head = f"{'profile':10}{'start ms':>9}{'py prog/s':>11}{'py med ms':>11}"
    if cpp:
        head += f"{'c++ prog/s':>12}{'c++ med ms':>12}{'compile ms':>12}{'(cpu)':>8}{'stdc++.h ms':>13}{'(cpu)':>8}"
    print(head)
    for r in rows:
        line = f"{r['profile']:10}{r['startup']:9.0f}{r['py_rate']:11.0f}{r['py_lat']:11.2f}"
        if cpp:
            line += (f"{r['cpp_rate']:12.0f}{r['cpp_lat']:12.2f}{r['cc_wall']:12.0f}{r['cc_cpu']:8.0f}"
                     f"{r['cc_heavy_wall']:13.0f}{r['cc_heavy_cpu']:8.0f}")
        print(line)
    print(f"{'python3 -c':10}{'':9}{plain_rate:11.0f}{statistics.median(plain_lat) * 1000:11.2f}"
          "   (a fresh interpreter per program, no isolation)")
    if not cpp:
        print("C++: g++ not installed, skipped")


if __name__ == "__main__":
    main()
