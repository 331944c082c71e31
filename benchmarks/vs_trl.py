"""GRPO step memory and time, grpo_core vs ``trl.GRPOTrainer``, side by side in one run.

    .venv/bin/python benchmarks/vs_trl.py [--lengths 512,1024,2048] [--steps 1] [--sides ours,trl]

Reference configuration (the issue's): a Qwen2-shaped model built from a config (vocabulary 151,936,
hidden 896, 2 layers, tied head; random weights) saved with ``save_pretrained`` and loaded back by both
trainers, fp32 on the CPU, LoRA r=16 on all linear layers, 8 generations of one prompt per step, the
same reward, AdamW, loss ``dapo``, beta 0, one iteration, gradient checkpointing on both sides; each
trainer otherwise runs with its own defaults (ours: ``micro_batch_tokens`` 4096, MLP tiles of the hidden
size; TRL: its fused chunked LM head). Our checkpointing, ``micro_batch_tokens`` and ``logprob_chunk_size``
(``--chunk-size``) are written into our run config, so the step planner keeps them as given.

Allocator: both children run with the same fixed glibc ``M_MMAP_THRESHOLD`` (1 MiB by default), so
buffers of 1 MiB and more are mapped on allocation and unmapped on free, and the resident peak follows
each trainer's live memory (the CPU counterpart of ``torch.cuda.max_memory_allocated``). Under glibc's
default dynamic threshold (``--malloc-mmap-threshold 0``), freed buffers under 32 MiB stay in the heap,
and the peak then also measures how each trainer's allocation order fragments it.

Each (side, length) runs in its own process (``grpo_bench_sides.py``), both on byte-identical
full-length completions: generation is replaced by fixed token ids on both sides (see that module for
why), so the step measured is decode + reward + advantages + policy update + optimiser step. A child is
capped with ``RLIMIT_AS`` (``--memory-limit-gb``) so that running out of memory is reported as a result
instead of taking the machine down. Prints a table, how far our peak is from the floor (runtime +
weights + LoRA states + one logits tile, from ``grpo_core.policy.memory_model``), and one
``summary tokens=L peak_ratio=R time_ratio=T`` line per length (ours / TRL).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
GiB = 1024**3
PROMPT = "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many?"


def build_model_dir(out: Path, a: argparse.Namespace) -> dict[str, Any]:
    """Tokenizer trained on the spot + the Qwen2-shaped model from its config, saved for both sides."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    special = ["<pad>", "</s>", "<s>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=500, special_tokens=special, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([PROMPT, "What is 12 plus 7? The answer is 19. <answer>42</answer>"] * 8, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", bos_token="<s>")
    fast.save_pretrained(out)
    config = Qwen2Config(
        vocab_size=a.vocab, hidden_size=a.hidden, intermediate_size=a.intermediate, num_hidden_layers=a.layers,
        num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=32768, tie_word_embeddings=True,
        pad_token_id=fast.pad_token_id, eos_token_id=fast.eos_token_id, bos_token_id=fast.bos_token_id,
    )
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(config).to(getattr(torch, getattr(a, "save_dtype", "float32")))
    model.save_pretrained(out)
    with open(out / "prompts.jsonl", "w") as f:
        for i in range(64):
            f.write(json.dumps({"prompt": f"{PROMPT} ({i})"}) + "\n")
    return {"config": config, "params": sum(p.numel() for p in model.parameters()),
            "token_range": f"{len(special)},{len(fast)}"}


def side_command(side: str, length: int, a: argparse.Namespace, model_dir: Path, token_range: str,
                 out_dir: Path) -> list[str]:
    """The ``grpo_bench_sides.py`` command for one (side, length) run. ``a.chunk_size`` and
    ``a.micro_batch_tokens`` reach our run config only when not None (else the step planner chooses them);
    ``a.side_args`` are appended as they are."""
    pinned = [*(["--chunk-size", str(a.chunk_size)] if a.chunk_size is not None else []),
              *(["--micro-batch-tokens", str(a.micro_batch_tokens)] if a.micro_batch_tokens is not None else [])]
    return [sys.executable, str(HERE / "grpo_bench_sides.py"), side, "--model-dir", str(model_dir),
            "--prompts", str(model_dir / "prompts.jsonl"), "--out-dir", str(out_dir), "--length", str(length),
            "--generations", str(a.generations), "--steps", str(a.steps), "--lora-rank", str(a.lora_rank),
            *pinned, "--dtype", a.dtype, "--token-range", token_range,
            "--memory-limit-gb", str(a.memory_limit_gb), *getattr(a, "side_args", ())]


def run_side(side: str, length: int, a: argparse.Namespace, model_dir: Path, token_range: str) -> dict[str, Any]:
    out_dir = Path(tempfile.mkdtemp(prefix=f"vs_trl_{side}_{length}_"))
    cmd = side_command(side, length, a, model_dir, token_range, out_dir)
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", "PYTHONWARNINGS": "ignore"}
    if a.malloc_mmap_threshold:  # the same allocator setting on both sides
        env["MALLOC_MMAP_THRESHOLD_"] = str(a.malloc_mmap_threshold)
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout, env=env)
    except subprocess.TimeoutExpired:
        shutil.rmtree(out_dir, ignore_errors=True)
        return {"side": side, "length": length, "error": f"timed out after {a.timeout}s"}
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)
    wall = time.perf_counter() - start
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if lines:
        res = json.loads(lines[-1][len("RESULT "):])
    elif proc.returncode < 0:
        sig = signal.Signals(-proc.returncode).name
        res = {"side": side, "length": length, "oom": proc.returncode == -signal.SIGKILL,
               "error": f"killed by {sig}" + (" (out of memory)" if proc.returncode == -signal.SIGKILL else "")}
    else:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        res = {"side": side, "length": length, "error": f"exit {proc.returncode}: {tail[:300]}"}
    if "error" in res and not res.get("oom") and a.verbose:
        print(proc.stderr[-3000:], file=sys.stderr)
    res["wall"] = wall
    res["load"] = os.getloadavg()[0]
    return res


def step_time(res: dict[str, Any]) -> float | None:
    """Mean step time, leaving out the first step when there are more (allocator and lazy-init warm-up)."""
    steps = res.get("steps") or []
    if not steps:
        return None
    use = steps[1:] if len(steps) > 1 else steps
    return sum(use) / len(use)


def fmt_gb(x: float | None) -> str:
    return "-" if x is None else f"{x / GiB:.2f}"


def describe(res: dict[str, Any], tokens: int) -> str:
    if "error" in res:
        what = "OUT OF MEMORY" if res.get("oom") else "FAILED"
        return f"{what}: {res['error']}"
    t = step_time(res)
    return (f"peak {fmt_gb(res['peak_step'])} GB  (lifetime {fmt_gb(res['peak_lifetime'])} GB, runtime "
            f"{fmt_gb(res['runtime_rss'])} GB)  step {t:.1f} s  {tokens / t:.0f} tok/s  "
            f"[{res.get('trainer')}, load {res['load']:.1f}]")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The arguments, with our side pinned to the reference configuration: ``micro_batch_tokens`` (default: the
    config's default), ``logprob_chunk_size`` and checkpointing on, all written into our run config."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lengths", default="512,1024,2048", help="completion lengths, comma-separated")
    p.add_argument("--steps", type=int, default=1, help="GRPO steps per run (>1: the first is left out of the time)")
    p.add_argument("--sides", default="ours,trl")
    p.add_argument("--generations", type=int, default=8)
    p.add_argument("--lora-rank", type=int, default=16)
    p.add_argument("--chunk-size", type=int, default=1024, help="our log-prob token chunk")
    p.add_argument("--micro-batch-tokens", type=int, default=None,
                   help="our tokens per forward/backward (default: the trainer's default)")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--vocab", type=int, default=151936)
    p.add_argument("--hidden", type=int, default=896)
    p.add_argument("--intermediate", type=int, default=4864)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--memory-limit-gb", type=float, default=0.0,
                   help="address-space cap per child (default: 85%% of the memory available at start)")
    p.add_argument("--timeout", type=int, default=1800, help="seconds per child")
    p.add_argument("--malloc-mmap-threshold", type=int, default=1 << 20,
                   help="MALLOC_MMAP_THRESHOLD_ for both children (default 1 MiB; 0: glibc's dynamic default)")
    p.add_argument("--verbose", action="store_true")
    a = p.parse_args(argv)
    sys.path.insert(0, str(HERE.parent))
    from grpo_core.config import GRPOConfig

    if a.micro_batch_tokens is None:
        a.micro_batch_tokens = GRPOConfig().micro_batch_tokens
    a.side_args = ["--checkpointing", "on"]
    return a


def main() -> int:
    a = parse_args()
    lengths = [int(x) for x in a.lengths.split(",") if x]
    sides = [s for s in a.sides.split(",") if s]
    if a.memory_limit_gb <= 0:
        with open("/proc/meminfo") as f:
            avail = next(int(ln.split()[1]) for ln in f if ln.startswith("MemAvailable")) * 1024
        a.memory_limit_gb = round(0.85 * avail / GiB, 1)

    import torch

    from grpo_core.policy.memory_model import estimate_peak_memory

    tmp = Path(tempfile.mkdtemp(prefix="vs_trl_model_"))
    try:
        built = build_model_dir(tmp, a)
        print(f"model: Qwen2-shaped, vocab {a.vocab}, hidden {a.hidden}, {a.layers} layers, tied head, "
              f"{built['params'] / 1e6:.1f}M params ({a.dtype}); LoRA r={a.lora_rank}; {a.generations} generations; "
              f"ours: micro_batch_tokens {a.micro_batch_tokens}; steps {a.steps}; torch threads {torch.get_num_threads()}; cpus {os.cpu_count()}; "
              f"malloc mmap threshold {a.malloc_mmap_threshold or 'glibc default'}; "
              f"child memory cap {a.memory_limit_gb} GB; load {os.getloadavg()[0]:.1f}", flush=True)
        results: dict[tuple[str, int], dict[str, Any]] = {}
        for length in lengths:
            tokens = a.generations * length
            for side in sides:
                res = run_side(side, length, a, tmp, built["token_range"])
                results[side, length] = res
                print(f"tokens={length:<5} {side:<4} {describe(res, tokens)}", flush=True)

        print("\n| completion tokens | side | peak RSS (GB) | step (s) | tokens/s |")
        print("|---|---|---|---|---|")
        for length in lengths:
            for side in sides:
                res = results[side, length]
                t = step_time(res)
                peak = "OOM" if res.get("oom") else ("failed" if "error" in res else fmt_gb(res["peak_step"]))
                print(f"| {length} | {side} | {peak} | {'-' if t is None else f'{t:.1f}'} | "
                      f"{'-' if t is None else f'{a.generations * length / t:.0f}'} |")
        print()
        for length in lengths:
            ours = results.get(("ours", length), {})
            if "error" in ours or not ours:
                continue
            est = estimate_peak_memory(built["config"], num_sequences=a.generations, prompt_length=32,
                                       completion_length=length, dtype=a.dtype, lora_rank=a.lora_rank,
                                       chunk_size=a.chunk_size, micro_batch_tokens=a.micro_batch_tokens)
            floor = ours["runtime_rss"] + est.floor
            modelled = ours["runtime_rss"] + est.peak
            print(f"floor tokens={length}: runtime (Python, torch, transformers, peft) {fmt_gb(ours['runtime_rss'])} "
                  f"+ weights/LoRA states/one tile "
                  f"{fmt_gb(est.floor)} = {fmt_gb(floor)} GB; ours {fmt_gb(ours['peak_step'])} GB is "
                  f"{fmt_gb(ours['peak_step'] - floor)} GB above it ({ours['peak_step'] / floor:.2f}x); "
                  f"memory model predicted {fmt_gb(modelled)} GB")
        for length in lengths:
            ours, trl = results.get(("ours", length), {}), results.get(("trl", length), {})
            if not ours or not trl:
                continue
            if "error" in ours:
                print(f"summary tokens={length} ours_failed=1")
            elif trl.get("oom"):
                print(f"summary tokens={length} trl=oom ours_peak_gb={ours['peak_step'] / GiB:.2f} "
                      f"ours_step_s={step_time(ours):.1f}")
            elif "error" in trl:
                print(f"summary tokens={length} trl_failed=1")
            else:
                print(f"summary tokens={length} peak_ratio={ours['peak_step'] / trl['peak_step']:.2f} "
                      f"time_ratio={step_time(ours) / step_time(trl):.2f}")
        print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
