"""Local sandbox vs a plain ``python3 -c`` per program: programs per second and median overhead, side by side.

    python benchmarks/sandbox.py [--programs 2000] [--slots N] [--latency-runs 300] [--profile auto]

Throughput: N trivial programs with ``slots`` in flight (default: two per core, the pool's default; as many ``python3 -c`` in flight), through
the sandbox pool and through ``subprocess.run([python, "-c", code])``. Overhead: the
median end-to-end time of one trivial program run alone (its own work is ~0), for each.
CPU per program (every process involved, load-independent) and the rate it allows on
idle cores are printed too. The machine's load average is printed: other processes on
the box skew the wall-clock columns, for both sides alike.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from grpo_rewards.sandbox.pool import LocalSandbox
from grpo_rewards.sandbox.program import Program

CODE = "print(sum(range(100)))"


def tree_cpu(pid: int) -> float:
    """CPU seconds of ``pid`` and its live descendants, including children they reaped."""
    total, stack = 0.0, [pid]
    tick = os.sysconf("SC_CLK_TCK")
    while stack:
        p = stack.pop()
        try:
            with open(f"/proc/{p}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            total += sum(int(x) for x in fields[11:15]) / tick
            with open(f"/proc/{p}/task/{p}/children") as fh:
                stack += [int(c) for c in fh.read().split()]
        except OSError:
            continue
    return total


def sandbox_cpu(box: LocalSandbox) -> float:
    return time.process_time() + sum(tree_cpu(s.proc.pid) for s in box._slots if s.proc is not None)


def plain(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={}, check=True).stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--programs", type=int, default=2000)
    ap.add_argument("--slots", type=int, default=2 * (os.cpu_count() or 1))
    ap.add_argument("--latency-runs", type=int, default=300)
    ap.add_argument("--profile", default="auto", help="sandbox profile: auto (the strongest), hardened, strict...")
    args = ap.parse_args()

    t0 = time.perf_counter()
    box = LocalSandbox(slots=args.slots, profile=args.profile)
    startup = time.perf_counter() - t0
    with box:
        box.run([Program(CODE)] * (4 * args.slots))  # warm up
        c0, t0 = sandbox_cpu(box), time.perf_counter()
        results = box.run([Program(CODE)] * args.programs)
        box_rate = args.programs / (time.perf_counter() - t0)
        box_cpu = (sandbox_cpu(box) - c0) / args.programs
        assert all(r.status == "ok" and r.stdout == "4950\n" for r in results), {r.status for r in results}
        box_lat, inner = [], []
        for _ in range(args.latency_runs):
            t = time.perf_counter()
            r = box.run_one(Program(CODE))
            box_lat.append(time.perf_counter() - t)
            inner.append(r.wall)
        layers, profile = box.layers, box.profile

    n_plain = max(args.programs // 10, 50)
    with ThreadPoolExecutor(args.slots) as ex:
        list(ex.map(plain, [CODE] * args.slots))
        t = os.times()
        c0, t0 = t.user + t.system + t.children_user + t.children_system, time.perf_counter()
        outs = list(ex.map(plain, [CODE] * n_plain))
        plain_rate = n_plain / (time.perf_counter() - t0)
        t = os.times()
        plain_cpu = (t.user + t.system + t.children_user + t.children_system - c0) / n_plain
    assert all(o == "4950\n" for o in outs)
    plain_lat = []
    for _ in range(max(args.latency_runs // 5, 30)):
        t = time.perf_counter()
        plain(CODE)
        plain_lat.append(time.perf_counter() - t)

    load = os.getloadavg()
    print(f"machine: {os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"sandbox: profile={profile} layers={','.join(layers)} slots={args.slots} (start-up {startup * 1000:.0f} ms)")
    print(f"{'':34}{'local sandbox':>16}{'python3 -c':>16}{'ratio':>10}")
    print(f"{'programs per second':34}{box_rate:16.0f}{plain_rate:16.0f}{box_rate / plain_rate:9.1f}x")
    b, p = statistics.median(box_lat) * 1000, statistics.median(plain_lat) * 1000
    print(f"{'median overhead per program (ms)':34}{b:16.2f}{p:16.2f}{p / b:9.1f}x")
    print(f"{'  of which fork-to-reap in zygote':34}{statistics.median(inner) * 1000:16.2f}")
    print(f"{'CPU per program (ms, all processes)':34}{box_cpu * 1000:16.2f}{plain_cpu * 1000:16.2f}"
          f"{plain_cpu / box_cpu:9.1f}x")
    cores = os.cpu_count() or 1
    print(f"{'  = ceiling on idle cores (prog/s)':34}{cores / box_cpu:16.0f}{cores / plain_cpu:16.0f}")
    print(f"floor (300/s, < 5 ms): {'met' if box_rate >= 300 and b < 5 else 'NOT met'} "
          f"({args.programs} sandbox runs, {n_plain} plain runs)")


if __name__ == "__main__":
    main()
