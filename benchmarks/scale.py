"""Scaling out: steps/s of ``grpo train`` on 1 and on N processes (``--nproc N``, torchrun) over the same global
batch (the same prompts per step, generations and micro-batches), on the same model and data, with the engine
``--engine`` names (``[distributed] engine``: ``ddp``, ``fsdp2`` or ``deepspeed``; ``--offload cpu`` puts
DeepSpeed's optimizer on the CPU). One process runs the plain trainer for ``ddp`` and ``fsdp2`` (they only
apply to several) and DeepSpeed's engine for ``deepspeed``. Beside the speed it prints the training state one
process holds (the runs' ``memory/parameters_gb`` and ``memory/optimizer_gb``): what sharding saves per process.

Steps/s comes from the runs' own ``step_time`` (the slowest rank's, generation and update included; the
first step is left out as warm-up); the wall time with start-up is reported beside it. By default each run
gets the same CPUs: one process uses all of them (``OMP_NUM_THREADS``), N processes a 1/N share each;
``--threads T`` gives every process T threads instead (on a busy shared machine, several OpenMP threads per
process can spin against other jobs and make the one-process run look far slower than it is).

On a CPU-only machine with few cores (2 here), N processes split the same cores, so this measures the
overhead of running data-parallel (collectives, per-rank padding, smaller matrix products), not a speed-up;
a speed-up needs one accelerator (or enough cores) per process.

    .venv/bin/python benchmarks/scale.py                          # a tiny Llama built on the spot, 2 processes
    .venv/bin/python benchmarks/scale.py --engine fsdp2
    .venv/bin/python benchmarks/scale.py --engine deepspeed --offload cpu
    .venv/bin/python benchmarks/scale.py --model DIR --nproc 4 --steps 8 --prompts 16

Last line: ``summary engine=.. nproc=N steps_per_s_1=.. steps_per_s_N=.. ratio=.. params_ratio=..
optimizer_ratio=.. cpus=.. device=..`` (ratios: N over 1; the state ratios per process).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def tiny_model(out: Path, hidden: int) -> Path:
    from grpo_core.demo.task import completion, make_split
    from grpo_core.demo.tiny import TinySpec, build_tiny_model

    rows = make_split("train", max_operand=99, size=400)
    return build_tiny_model(out, [r["prompt"] + completion(r) for r in rows],
                            TinySpec(hidden=hidden, intermediate=3 * hidden, layers=4))


def write_config(path: Path, model: Path, run_dir: Path, a: argparse.Namespace) -> Path:
    path.write_text(f"""
[model]
name_or_path = "{model}"
dtype = "float32"
gradient_checkpointing = false
[data]
source = "demo:arithmetic?max_operand=99"
chat_template = false
[generation]
num_generations = {a.generations}
max_completion_length = {a.length}
[grpo]
learning_rate = 1e-4
prompts_per_step = {a.prompts}
max_steps = {a.steps}
gradient_accumulation_steps = 2
beta = 0.04
loss_type = "dapo"
[logging]
output_dir = "{run_dir}"
progress = false
plot = false
[distributed]
engine = "{a.engine}"{offload(a)}
[rewards.correct]
use = "exact_match"
reference_extract = "none"
[rewards.near]
use = "numeric_proximity"
reference_extract = "none"
""")
    return path


def offload(a: argparse.Namespace) -> str:
    return f'\noffload_optimizer = "{a.offload}"' if a.engine == "deepspeed" else ""


def run(nproc: int, config: Path, threads: int) -> dict[str, float]:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "PYTHONUNBUFFERED": "1"}
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "grpo_rewards", "train", str(config), "--nproc", str(nproc)],
                          env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode:
        raise SystemExit(f"--nproc {nproc} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    records = [json.loads(line) for line in (config.parent / f"run-{nproc}" / "metrics.jsonl").read_text().splitlines()]
    times = [r["step_time"] for r in records][1:]  # the first step warms up
    return {"steps_per_s": 1.0 / statistics.mean(times), "wall_s": wall, "steps": len(times) + 1,
            "params_gb": records[-1]["memory/parameters_gb"], "optimizer_gb": records[-1]["memory/optimizer_gb"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="a model folder (default: a tiny Llama built on the spot)")
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--engine", choices=("ddp", "fsdp2", "deepspeed"), default="ddp")
    ap.add_argument("--offload", choices=("none", "cpu"), default="none", help="deepspeed: the optimizer's device")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--prompts", type=int, default=8, help="prompts per step, the whole step's (global)")
    ap.add_argument("--generations", type=int, default=4)
    ap.add_argument("--length", type=int, default=24, help="max completion tokens")
    ap.add_argument("--hidden", type=int, default=128, help="hidden size of the tiny model")
    ap.add_argument("--threads", type=int, default=0,
                    help="threads per process (default: the CPUs divided by the number of processes)")
    a = ap.parse_args()
    if a.offload != "none" and a.engine != "deepspeed":
        ap.error("--offload is DeepSpeed's (--engine deepspeed)")

    import torch

    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    with tempfile.TemporaryDirectory(prefix="grpo-scale-") as tmp:
        root = Path(tmp)
        model = Path(a.model) if a.model else tiny_model(root / "model", a.hidden)
        results = {}
        for n in (1, a.nproc):
            config = write_config(root / f"run-{n}.toml", model, root / f"run-{n}", a)
            threads = a.threads or max(1, cpus // n)
            results[n] = run(n, config, threads)
            r = results[n]
            print(f"nproc={n}: {r['steps_per_s']:.3f} steps/s (steps 2-{r['steps']:.0f}), wall {r['wall_s']:.1f} s "
                  f"with start-up; {a.prompts} prompts x {a.generations} generations per step; "
                  f"OMP_NUM_THREADS={threads}; one process holds {r['params_gb'] * 1024:.1f} MiB of parameters "
                  f"and {r['optimizer_gb'] * 1024:.1f} MiB of optimizer state")
    ratio = results[a.nproc]["steps_per_s"] / results[1]["steps_per_s"]
    held = {key: results[a.nproc][f"{key}_gb"] / results[1][f"{key}_gb"] for key in ("params", "optimizer")}
    if device == "cpu" and cpus < 2 * a.nproc:
        print(f"note: {cpus} CPUs shared by {a.nproc} processes: this is the data-parallel overhead, not a speed-up")
    engine = a.engine + ("+offload" if a.offload != "none" else "")
    print(f"summary engine={engine} nproc={a.nproc} steps_per_s_1={results[1]['steps_per_s']:.3f} "
          f"steps_per_s_{a.nproc}={results[a.nproc]['steps_per_s']:.3f} ratio={ratio:.3f} "
          f"params_ratio={held['params']:.3f} optimizer_ratio={held['optimizer']:.3f} cpus={cpus} "
          f"threads_per_process={a.threads or 'share'} device={device.replace(' ', '_')}")


if __name__ == "__main__":
    main()
