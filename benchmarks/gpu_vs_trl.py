"""A GRPO step on a GPU, grpo_core against ``trl.GRPOTrainer``, side by side in one run; and sampling.

    python benchmarks/gpu_vs_trl.py [--lengths 1024,4096,16384] [--modes lora,full] [--checkpointing plan,on,off]
                                    [--steps 3] [--memory-fraction 0.1] [--micro-batch-tokens N] [--chunk-size N]
    python benchmarks/gpu_vs_trl.py --device cpu --small       (the same plumbing at a toy size on the CPU)

The model: a random Qwen2.5-0.5B-shaped model built from a config (vocabulary 151,936, hidden 896, 24 layers,
14 heads, 2 KV heads, tied head; ``--small``: vocabulary 600, hidden 56, one layer) saved in bf16 by
``benchmarks/vs_trl.py``'s builder and loaded by both trainers. One prompt x ``--generations`` completions of L
tokens, handed to both trainers as the same fixed completions (generation not timed), the same reward, AdamW,
loss ``dapo``, beta 0, one iteration; ``lora``: LoRA r=16 on all linear layers over bf16 weights; ``full``:
every weight, fp32 master weights under bf16 autocast on both sides. Each (mode, checkpointing, L, side) runs in
its own process through ``benchmarks/grpo_bench_sides.py``; the step time is the median of the steps after the
first (``--steps`` in all), the peak ``torch.cuda.max_memory_allocated`` (the resident high-water mark on the
CPU). Prints a table with ours/TRL time and peak ratios, then per row one ``plan`` line (what our step plan
chose: micro-batch tokens, checkpointing, MLP tile, head chunk, packing kernel, autocast, estimated peak, and
``set=``, the planned keys the run config pinned) and one ``summary`` line.

What is measured on our side is the step planner's step (``grpo_core.policy.step_plan``): our run config leaves
every planned key out unless a flag pins it. ``--checkpointing plan`` leaves checkpointing to our planner while
TRL, which has no planner, trains with it on (the comparison the planner must win); ``on`` and ``off`` pin it on
both sides. ``--micro-batch-tokens`` and ``--chunk-size`` pin our ``grpo.micro_batch_tokens`` and
``grpo.logprob_chunk_size`` (a pinned key is one the planner never changes).

Sampling: ``benchmarks/generation_speed.py`` in its own process per sampler, our group sampler against
``model.generate`` on the same model (bf16 on CUDA) and prompts, tokens/s and their ratio.

``--memory-fraction F`` (CUDA): each side also trains under ``torch.cuda.set_per_process_memory_fraction(F)``
at doubling lengths from the shortest of ``--cap-lengths`` until it runs out of memory, and the longest L it
trained is printed (on the CPU the cap is ``--memory-limit-gb``, an address-space limit per process): LoRA, ours
as planned within the cap (the planner reads the fraction), TRL with checkpointing on.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import vs_trl  # noqa: E402  (its model builder and side runner)

GiB = 1024**3
CHECKPOINTING = ("plan", "on", "off")
SHAPES = {"qwen2.5-0.5b": {"vocab": 151936, "hidden": 896, "intermediate": 4864, "layers": 24},
          "small": {"vocab": 600, "hidden": 56, "intermediate": 112, "layers": 1}}


def median_step(res: dict[str, Any]) -> float | None:
    """The median step time after the first (warm-up); the one step when there is only one."""
    steps = res.get("steps") or []
    return statistics.median(steps[1:] if len(steps) > 1 else steps) if steps else None


def side_args(a: argparse.Namespace, mode: str, checkpointing: str, fraction: float = 0.0) -> argparse.Namespace:
    """The arguments ``vs_trl.run_side`` hands ``grpo_bench_sides.py`` for one (mode, checkpointing) run
    (``checkpointing``: one of :data:`CHECKPOINTING`; ``a.micro_batch_tokens``/``a.chunk_size`` None: planned)."""
    b = argparse.Namespace(**vars(a))
    cuda = a.device == "cuda"
    b.lora_rank = a.lora_rank if mode == "lora" else 0
    b.dtype = ("bfloat16" if mode == "lora" else "auto") if cuda else ("float32" if mode == "lora" else "auto")
    b.side_args = ["--device", a.device, "--checkpointing", checkpointing,
                   *(["--memory-fraction", str(fraction)] if fraction else [])]
    return b


def pinned(value: int | None) -> str:
    return "planned" if value is None else f"{value} (pinned)"


def fmt_ratio(x: float | None, y: float | None) -> str:
    return "-" if not x or not y else f"{x / y:.2f}"


def fmt_gib(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def plan_fields(plan: dict[str, Any] | None) -> str:
    """Our step plan as ``key=value`` words (``set``: the planned keys the run config pinned, ``none`` if the
    planner chose them all); ``plan=unavailable`` where the run ended before the trainer planned."""
    if not plan:
        return "plan=unavailable"

    def word(value: Any) -> str:
        return "none" if value is None else str(value).lower() if isinstance(value, bool) else str(value)

    set_keys = sorted(k for k, why in (plan.get("reasons") or {}).items() if why == "set" or why.startswith("set "))
    keys = ("micro_batch_tokens", "gradient_checkpointing", "mlp_chunk_tokens", "logprob_chunk_size",
            "packing_kernel", "autocast_dtype")
    return " ".join([*(f"{k.removesuffix('_dtype')}={word(plan.get(k))}" for k in keys),
                     f"estimated_peak_gib={fmt_gib(plan.get('estimated_peak_gb'))}",
                     f"set={','.join(set_keys) or 'none'}"])


def cell(res: dict[str, Any]) -> tuple[str, str, float | None, float | None]:
    """(time, peak) as printed, and as numbers (None where the run failed)."""
    if "error" in res:
        what = "OOM" if res.get("oom") else "failed"
        return what, what, None, None
    t = median_step(res)
    return f"{t:.3f} s", f"{res['peak_step'] / GiB:.2f} GiB", t, res["peak_step"]


def train_table(a: argparse.Namespace, model_dir: Path, token_range: str) -> None:
    print("\n| mode | checkpointing | L | ours | TRL | time ratio | ours peak | TRL peak | peak ratio |")
    print("|---|---|---|---|---|---|---|---|---|")
    summaries, plans = [], []
    for mode in a.modes:
        for ckpt in a.checkpointing:
            b = side_args(a, mode, ckpt)
            for length in a.lengths:
                res = {side: vs_trl.run_side(side, length, b, model_dir, token_range) for side in ("ours", "trl")}
                (ot, op, ot_s, op_b), (tt, tp, tt_s, tp_b) = cell(res["ours"]), cell(res["trl"])
                for side in ("ours", "trl"):
                    if "error" in res[side] and not res[side].get("oom"):
                        print(f"  ({mode}, checkpointing {ckpt}, L={length}, {side}: {res[side]['error']})",
                              file=sys.stderr)
                print(f"| {mode} | {ckpt} | {length} | {ot} | {tt} | {fmt_ratio(ot_s, tt_s)} | {op} | {tp} | "
                      f"{fmt_ratio(op_b, tp_b)} |", flush=True)
                measured = "-" if op_b is None else f"{op_b / GiB:.3f}"
                plans.append(f"plan mode={mode} checkpointing={ckpt} tokens={length} "
                             f"{plan_fields(res['ours'].get('plan'))} ours_peak_gib={measured}")
                summaries.append(f"summary mode={mode} checkpointing={ckpt} tokens={length} "
                                 f"time_ratio={fmt_ratio(ot_s, tt_s)} peak_ratio={fmt_ratio(op_b, tp_b)}")
    print("\nour step plan per row (set: the planned keys pinned by a flag, not chosen by the planner):")
    print("\n".join(plans))
    print("\n" + "\n".join(summaries))


def sampling(a: argparse.Namespace, model_dir: Path) -> None:
    rates = {}
    for name in ("sampler", "model.generate"):
        cmd = [sys.executable, str(HERE / "generation_speed.py"), "--model-dir", str(model_dir), "--plain-prompts",
               "--only", name, "--device", a.device, "--dtype", "bfloat16" if a.device == "cuda" else "float32",
               "--prompts", str(a.sample_prompts), "--generations", str(a.generations), "--length",
               str(a.sample_length), "--repeats", str(a.sample_repeats)]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE.parent),
                                                                         os.environ.get("PYTHONPATH")]))}
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout, env=env)
        found = re.search(r"^summary sampler=\S+ tokens_per_s=([\d.]+) tokens=(\d+) seconds=([\d.]+)$",
                          proc.stdout, re.M)
        if not found:
            print(f"sampling {name}: failed ({(proc.stderr.strip().splitlines() or ['no output'])[-1][:300]})")
            continue
        rates[name] = float(found.group(1))
        print(f"sampling {name:<15} {rates[name]:9.1f} tokens/s ({found.group(2)} tokens in {found.group(3)} s)")
    if len(rates) == 2:
        print(f"summary sampling prompts={a.sample_prompts} generations={a.generations} length={a.sample_length} "
              f"ours_tps={rates['sampler']:.1f} generate_tps={rates['model.generate']:.1f} "
              f"speedup={rates['sampler'] / rates['model.generate']:.2f}")


def longest_under_cap(a: argparse.Namespace, model_dir: Path, token_range: str) -> None:
    """The longest L each side trains under the memory cap (LoRA; ours as planned, TRL with checkpointing on),
    doubling from the shortest."""
    b = side_args(a, "lora", "plan", a.memory_fraction if a.device == "cuda" else 0.0)
    cap = f"memory fraction {a.memory_fraction}" if a.device == "cuda" else f"{b.memory_limit_gb} GB address space"
    for side in ("ours", "trl"):
        longest, length = 0, min(a.cap_lengths)
        while length <= max(a.cap_lengths):
            res = vs_trl.run_side(side, length, b, model_dir, token_range)
            if "error" in res:
                print(f"cap {side}: L={length} {'ran out of memory' if res.get('oom') else res['error']}")
                break
            if side == "ours":
                print(f"cap ours: L={length} trained, {plan_fields(res.get('plan'))}")
            longest, length = length, length * 2
        print(f"summary cap side={side} cap=\"{cap}\" longest_tokens={longest}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    p.add_argument("--small", action="store_true", help="a toy shape for the CPU (plumbing, not figures)")
    p.add_argument("--lengths", default="1024,4096,16384")
    p.add_argument("--modes", default="lora,full")
    p.add_argument("--checkpointing", default="plan,on,off",
                   help="plan: ours as our step planner chooses, TRL's on; on/off: both sides")
    p.add_argument("--micro-batch-tokens", type=int, default=None,
                   help="pin our grpo.micro_batch_tokens (default: the step planner chooses)")
    p.add_argument("--chunk-size", type=int, default=None,
                   help="pin our grpo.logprob_chunk_size (default: the step planner chooses)")
    p.add_argument("--steps", type=int, default=3, help="steps per run; the median of those after the first")
    p.add_argument("--generations", type=int, default=8)
    p.add_argument("--lora-rank", type=int, default=16)
    p.add_argument("--sample-prompts", type=int, default=8)
    p.add_argument("--sample-length", type=int, default=512)
    p.add_argument("--sample-repeats", type=int, default=2)
    p.add_argument("--memory-fraction", type=float, default=0.0,
                   help="also find the longest L each side trains under this share of the GPU (0: skip)")
    p.add_argument("--cap-lengths", default="1024,65536", help="the shortest and longest L the cap search tries")
    p.add_argument("--memory-limit-gb", type=float, default=0.0, help="CPU: the cap search's address-space limit")
    p.add_argument("--parts", default="train,sampling", help="train, sampling (and the cap, with its flag)")
    p.add_argument("--timeout", type=int, default=1800, help="seconds per child")
    a = p.parse_args()
    for key in ("lengths", "cap_lengths"):
        setattr(a, key, [int(x) for x in getattr(a, key).split(",") if x])
    a.modes, a.checkpointing = a.modes.split(","), a.checkpointing.split(",")
    if unknown := [c for c in a.checkpointing if c not in CHECKPOINTING]:
        p.error(f"--checkpointing: {','.join(unknown)} is not one of {','.join(CHECKPOINTING)}")
    a.parts = set(a.parts.split(","))
    for key, value in SHAPES["small" if a.small else "qwen2.5-0.5b"].items():
        setattr(a, key, value)
    # what vs_trl.run_side reads besides the above (a.chunk_size, a.micro_batch_tokens: None unless pinned)
    a.malloc_mmap_threshold, a.verbose, a.save_dtype = 0, False, "bfloat16"
    if a.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            print("gpu_vs_trl: torch sees no CUDA device (use --device cpu --small for the plumbing)", file=sys.stderr)
            return 2
        print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    with tempfile.TemporaryDirectory(prefix="gpu_vs_trl_") as tmp:
        model_dir = Path(tmp)
        built = vs_trl.build_model_dir(model_dir, a)
        print(f"model: Qwen2-shaped, vocab {a.vocab}, hidden {a.hidden}, {a.layers} layers, "
              f"{built['params'] / 1e6:.1f}M params, saved in bf16; {a.generations} completions per step; "
              f"{a.steps} steps (median after the first); device {a.device}; ours: micro_batch_tokens "
              f"{pinned(a.micro_batch_tokens)}, logprob_chunk_size {pinned(a.chunk_size)}", flush=True)
        if "train" in a.parts:
            train_table(a, model_dir, built["token_range"])
        if "sampling" in a.parts:
            sampling(a, model_dir)
        if a.memory_fraction > 0 or (a.device == "cpu" and a.memory_limit_gb > 0):
            longest_under_cap(a, model_dir, built["token_range"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
