"""The sandbox benchmark side by side: this checkout against another (a worktree of the parent commit).

    python benchmarks/sandbox_sides.py /path/to/base-checkout [--rounds 3] [--profiles hardened] [--programs 400]

Runs ``benchmarks/sandbox.py`` (this checkout's script) alternately with ``PYTHONPATH`` at the
base checkout and at this one, ``--rounds`` times each, on the same machine in one run, so
that load drifts hit both sides alike; prints every round's Python and C++ throughput and
median time, the CPU seconds the whole run took (the benchmark, its pools, zygotes, templates,
programs and compiles: every process below it, reaped), the means, and the ratio this/base of
each. The load average before and after is printed too: on a shared machine it moves every
wall-clock number; the CPU column is the one it moves least.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLUMNS = ("py prog/s", "py med ms", "c++ prog/s", "c++ med ms", "cpu s")


def one_run(checkout: str, args: argparse.Namespace) -> dict[str, float]:
    command = [sys.executable, os.path.join(HERE, "benchmarks", "sandbox.py"), "--profiles", args.profiles,
               "--programs", str(args.programs), "--latency-runs", str(args.latency_runs), "--compiles", "1"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(command, env={**os.environ, "PYTHONPATH": checkout}, capture_output=True, text=True,
                         check=True, cwd=checkout).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    row = next(line for line in out.splitlines() if line.startswith(args.profiles.split(",")[0] + " "))
    values = row.split()[2:]  # profile, start ms, then the columns
    return {**{name: float(v) for name, v in zip(COLUMNS, values)}, "cpu s": cpu}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("base", help="the checkout to compare with (e.g. a worktree of the parent commit)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--profiles", default="hardened")
    ap.add_argument("--programs", type=int, default=400)
    ap.add_argument("--latency-runs", type=int, default=80)
    args = ap.parse_args()
    sides = {"base": os.path.abspath(args.base), "this": HERE}
    runs: dict[str, list[dict[str, float]]] = {"base": [], "this": []}
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (start); {os.cpu_count()} cores")
    for i in range(args.rounds):
        for side in (("base", "this") if i % 2 == 0 else ("this", "base")):
            runs[side].append(one_run(sides[side], args))
            row = runs[side][-1]
            print(f"round {i + 1} {side:5} " + "  ".join(f"{k} {v:8.2f}" for k, v in row.items()), flush=True)
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (end)")
    for name in COLUMNS:
        base = statistics.mean(r[name] for r in runs["base"])
        this = statistics.mean(r[name] for r in runs["this"])
        print(f"{name:11} base {base:9.2f}  this {this:9.2f}  this/base {this / base:5.3f}")


if __name__ == "__main__":
    main()
