"""The tool example over seeds: GRPO with the calculator beside a no-tool control, held-out accuracy as they train.

    .venv/bin/python benchmarks/tool_example.py [--seeds 0,1,2] [--jobs 2] [--set grpo.max_steps=60 ...]

Each seed runs two arms of ``examples/tool_calculator.toml`` (:mod:`grpo_core.demo.tool_run`), one after the
other in a process of its own with one torch thread, ``--jobs`` seeds at a time: ``tools`` (the config as it is)
and ``control`` (the same with ``tools.names=[]``): the same tiny model from the same seed, as many warm-up steps
(the control takes the tool arm's count), the same GRPO steps, rewards and held-out rows; the example's seed and
``[grpo] seed`` both set to the seed. Prints the curve
(held-out exact match at each evaluation, one column per seed and arm), each seed's accuracy before and after
GRPO and whether the tool arm gained and beat the control, and the tool arm's rollout throughput measured with
``benchmarks/tool_rollouts.py``'s :func:`watch` (turns/s, tool calls/s, the share of the step in the model, the
tools and the trainer), with the machine's load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "examples" / "tool_calculator.toml"
ARMS = ("tools", "control")


def child(seed: int, out: str, overrides: list[str]) -> None:
    """Both arms of one seed in this process, the tool arm first (the control warms up for as many steps as it
    did): prints ``RESULT <json>`` for each."""
    import dataclasses

    import torch
    from tool_rollouts import rollout_numbers, watch

    from grpo_core.demo.tool_run import ToolExampleSettings, run_tool_arm
    from grpo_core.run_folder.layout import METRICS_FILE, read_jsonl

    torch.set_num_threads(1)
    settings = ToolExampleSettings(seed=seed)
    overrides = [f"grpo.seed={seed}", "logging.progress=false", *overrides]
    for arm in ARMS:
        parts: list[list[dict[str, float]]] = []
        result = run_tool_arm(CONFIG, overrides + (["tools.names=[]"] if arm == "control" else []),
                              Path(out) / arm, settings,
                              on_trainer=lambda trainer, parts=parts: parts.append(watch(trainer)))
        settings = dataclasses.replace(settings, warmup_steps=result["warmup_steps"])
        numbers = rollout_numbers(read_jsonl(Path(result["run_dir"]) / METRICS_FILE), parts[0])
        print("RESULT " + json.dumps({"arm": arm, "throughput": numbers} | {k: result[k] for k in (
            "curve", "warmup_steps", "warmup_readback", "warmup_seconds", "grpo_seconds", "steps")}), flush=True)


def run_seed(seed: int, folder: Path, overrides: list[str], timeout: int) -> list[dict]:
    start = time.perf_counter()
    command = [sys.executable, str(Path(__file__).resolve()), "--child", str(seed), str(folder / f"seed{seed}")]
    command += [a for o in overrides for a in ("--set", o)]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=dict(os.environ))
    wall = time.perf_counter() - start
    found = [json.loads(line[len("RESULT "):]) for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    results = [{"seed": seed, "wall": wall, **r} for r in found]
    if proc.returncode or len(found) < len(ARMS):
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        done = {r["arm"] for r in found}
        results += [{"seed": seed, "arm": arm, "error": " | ".join(tail), "wall": wall} for arm in ARMS if arm not in done]
    return results


def report(results: list[dict], seeds: list[int]) -> None:
    ok = {(r["seed"], r["arm"]): r for r in results if "error" not in r}
    for r in results:
        if "error" in r:
            print(f"seed {r['seed']} {r['arm']}: failed: {r['error']}")
    columns = [(s, a) for s in seeds for a in ARMS if (s, a) in ok]
    curves = {key: dict(ok[key]["curve"]) for key in columns}
    steps = sorted({step for curve in curves.values() for step in curve})
    print("\nheld-out exact match (greedy) by GRPO step\n")
    print("| step | " + " | ".join(f"seed {s} {a}" for s, a in columns) + " |")
    print("|---|" + "---|" * len(columns))
    for step in steps:
        cells = [f"{100 * curves[key][step]:.1f}%" if step in curves[key] else "" for key in columns]
        print(f"| {step} | " + " | ".join(cells) + " |")
    print("\n| seed | tools: before -> after | control: before -> after | tools gained | tools beat control |")
    print("|---|---|---|---|---|")
    for s in seeds:
        if (s, "tools") not in ok or (s, "control") not in ok:
            continue
        t, c = ok[(s, "tools")]["curve"], ok[(s, "control")]["curve"]
        print(f"| {s} | {100 * t[0][1]:.1f}% -> {100 * t[-1][1]:.1f}% | {100 * c[0][1]:.1f}% -> {100 * c[-1][1]:.1f}% "
              f"| {'yes' if t[-1][1] > t[0][1] else 'no'} | {'yes' if t[-1][1] > c[-1][1] else 'no'} |")
    print("\nrollout throughput of the tool arm (steps after the first; step time without evaluations)\n")
    print("| seed | turns/s | tool calls/s | model share | tools share | trainer share | warm-up steps (read back) "
          "| warm-up (s) | GRPO (s) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for s in seeds:
        r = ok.get((s, "tools"))
        if r:
            n = r["throughput"]
            print(f"| {s} | {n['turns/s']:.1f} | {n['tool calls/s']:.1f} | {100 * n['model share']:.0f}% | "
                  f"{100 * n['tools share']:.1f}% | {100 * n['trainer share']:.0f}% | {r['warmup_steps']} "
                  f"({100 * r['warmup_readback']:.0f}%) | {r['warmup_seconds']:.0f} | {r['grpo_seconds']:.0f} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--jobs", type=int, default=2, help="seeds run at once, each in a process with one thread")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override a value of the config in both arms, e.g. --set grpo.max_steps=20")
    p.add_argument("--out", help="folder for the runs (default: a temporary one, removed)")
    p.add_argument("--timeout", type=int, default=3600, help="seconds per seed")
    p.add_argument("--child", nargs=2, metavar=("SEED", "OUT"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(int(args.child[0]), args.child[1], args.overrides)
        return
    seeds = [int(s) for s in args.seeds.split(",")]
    load_before, start = os.getloadavg(), time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tool_example_") as tmp:
        folder = Path(args.out or tmp)
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            results = [r for rs in pool.map(lambda s: run_seed(s, folder, args.overrides, args.timeout), seeds)
                       for r in rs]
    report(results, seeds)
    load_after = os.getloadavg()
    print(f"\nwall {time.perf_counter() - start:.0f}s with {args.jobs} jobs; load average (1, 5, 15 min) before "
          f"{', '.join(f'{x:.1f}' for x in load_before)}, after {', '.join(f'{x:.1f}' for x in load_after)} "
          f"on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
