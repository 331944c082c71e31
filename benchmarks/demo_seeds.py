"""The demo's held-out gain over seeds and CPU kernels, each run in its own process, side by side in one table.

    .venv/bin/python benchmarks/demo_seeds.py [--seeds 0,1,2] [--capabilities native,avx2] [--control]

Each run is ``grpo_core.run_demo`` (the README's first command without its set-up) with the demo's seed
(model initialisation, warm-up batches) and ``[grpo] seed`` (GRPO sampling) both set to the seed, in a child
process with one torch thread. ``--capabilities``: ``native`` leaves torch's CPU kernels as the machine picks
them; ``avx2`` (``default``, ``avx512``) sets ``ATEN_CPU_CAPABILITY``, the kernels another machine's CPU would
run, which is where one machine's demo differs from another's (the arithmetic of a run with one thread is
otherwise deterministic). On a CPU without AVX-512, ``avx2`` is what ``native`` already picks: ``default`` (no
vector kernels) then stands for another machine's arithmetic (it changes matmul and softmax results in the last
bits, enough for a different trajectory). Prints one row per run and the min-max of the accuracy after warm-up, after GRPO and
of the gain, the figures README.md quotes. The supervised control is off unless ``--control``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = """
import json, sys
from grpo_core.demo.run import DemoSettings, run_demo
seed, out, control = int(sys.argv[1]), sys.argv[2], sys.argv[3] == "1"
result = run_demo(overrides=[f"grpo.seed={seed}"], output_dir=out, settings=DemoSettings(seed=seed),
                  control=control)
print("RESULT " + json.dumps({k: result[k] for k in ("accuracy_before", "accuracy_after", "gain_points",
                                                     "warmup_steps", "grpo_seconds", "total_seconds")}
                             | {"control": (result["control"] or {}).get("accuracy")}))
"""


def run_one(seed: int, capability: str, control: bool, timeout: int) -> dict:
    env = dict(os.environ)
    if capability != "native":
        env["ATEN_CPU_CAPABILITY"] = capability
    with tempfile.TemporaryDirectory(prefix="demo_seed_") as tmp:
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", CHILD, str(seed), str(Path(tmp) / "run"), "1" if control else "0"],
                              env=env, capture_output=True, text=True, timeout=timeout)
        wall = time.perf_counter() - start
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return {"seed": seed, "capability": capability, "error": " | ".join(tail), "wall": wall}
    return {"seed": seed, "capability": capability, "wall": wall, **json.loads(lines[-1][len("RESULT "):])}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--capabilities", default="native,avx2", help="native, or ATEN_CPU_CAPABILITY values")
    p.add_argument("--control", action="store_true", help="also run the supervised control")
    p.add_argument("--timeout", type=int, default=3600, help="seconds per run")
    args = p.parse_args()
    rows = []
    print("| kernels | seed | warm-up steps | after warm-up | after GRPO | gain (points) | control | wall (s) |")
    print("|---|---|---|---|---|---|---|---|")
    for capability in args.capabilities.split(","):
        for seed in (int(s) for s in args.seeds.split(",")):
            r = run_one(seed, capability, args.control, args.timeout)
            rows.append(r)
            if "error" in r:
                print(f"| {capability} | {seed} | failed: {r['error']} |", flush=True)
                continue
            control = "-" if r["control"] is None else f"{100 * r['control']:.1f}%"
            print(f"| {capability} | {seed} | {r['warmup_steps']} | {100 * r['accuracy_before']:.1f}% | "
                  f"{100 * r['accuracy_after']:.1f}% | {r['gain_points']:+.1f} | {control} | {r['wall']:.0f} |",
                  flush=True)
    ok = [r for r in rows if "error" not in r]
    if ok:
        def span(key: str, scale: float = 100.0) -> str:
            values = [scale * r[key] for r in ok]
            return f"{min(values):.1f}..{max(values):.1f}"

        print(f"summary runs={len(ok)}/{len(rows)} before={span('accuracy_before')}% after={span('accuracy_after')}% "
              f"gain={span('gain_points', 1.0)} points load={os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
