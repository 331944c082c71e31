"""LoRA weight pushes to the colocated vLLM engine: ``vllm_lora_push = "merged"`` (``W + scale * B @ A`` of
every adapted block reloaded into the engine's weights) against ``"adapter"`` (the adapter written to shared
memory and served as a vLLM LoRA), on the same model, prompts and sampling.

Each mode runs in its own process (its own engine; vLLM's CPU platform turns ``torch.compile`` off when LoRA
is on, so the adapter engine is the eager one unless ``--eager`` makes both eager). Per step: one AdamW step
on the LoRA weights (every LoRA tensor changes), then the push timed alone (``sync_weights``), then one
sampled generation call timed (completion tokens per second, EOS included). One untimed warm-up call comes
first (the merged engine's first full push, the first adapter version); engine start-up is reported apart.

    .venv-vllm/bin/python benchmarks/vllm_push.py                       # SmolLM2-135M-Instruct, 4 steps
    .venv-vllm/bin/python benchmarks/vllm_push.py --steps 6 --prompts 8 --num-generations 4 --eager

Last line: ``summary merged_push_s=.. adapter_push_s=.. push_ratio=.. merged_tokens_per_s=..
adapter_tokens_per_s=.. tokens_ratio=.. merged_step_s=.. adapter_step_s=.. step_ratio=..`` (ratios: adapter
over merged; ``step``: push plus generation). Runs in the vLLM environment (``bash scripts/setup.sh --vllm``).
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
from typing import Any

from generation import QUESTIONS  # benchmarks/generation.py: the same GSM8K questions

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")

MODES = ("merged", "adapter")


def run_config(model: str, args: argparse.Namespace, mode: str, tmp: Path) -> Any:
    from grpo_core.config import config_from_dict

    data = tmp / "rows.jsonl"
    data.write_text("".join(json.dumps({"prompt": q}) + "\n" for q in QUESTIONS))
    return config_from_dict({
        "model": {"name_or_path": model, "gradient_checkpointing": False, "dtype": args.dtype},
        "data": {"source": str(data), "max_prompt_length": 256},
        "generation": {"backend": "vllm", "num_generations": args.num_generations,
                       "max_completion_length": args.max_tokens, "vllm_lora_push": mode},
        "grpo": {"prompts_per_step": args.prompts, "seed": 0},
        "lora": {"enabled": True, "r": args.rank, "alpha": 2 * args.rank, "target_modules": "all-linear"},
        "rewards": {"fmt": {"use": "xml_count"}},
        "logging": {"output_dir": str(tmp / "run")},
    })


def child(args: argparse.Namespace) -> dict[str, Any]:
    """One mode in this process: ``{start_s, steps: [{push_s, gen_s, tokens}]}``."""
    import torch

    from grpo_core.data import format_prompt
    from grpo_core.generation.vllm.engine import VLLMBackend
    from grpo_core.policy.models import load_model_and_tokenizer

    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        cfg = run_config(args.model, args, args.child, Path(tmp))
        model, tok = load_model_and_tokenizer(cfg)
        prompts = [format_prompt({"prompt": q}, cfg.data, tok) for q in (QUESTIONS * args.prompts)[:args.prompts]]
        start = time.perf_counter()
        backend = VLLMBackend(cfg, model, tok)
        start_s = time.perf_counter() - start
        n = args.num_generations
        batch = backend.generate(prompts, n)  # warm-up: the first push, the first compiled/eager passes
        params = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(params, lr=1e-3)
        steps = []
        for _ in range(args.steps):
            ids = torch.cat([batch.prompt_ids, batch.completion_ids], 1)[:4]  # a few rows: an update, not a bench
            loss = -model(input_ids=ids).logits.float().log_softmax(-1).mean()
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            t0 = time.perf_counter()
            sent = backend.sync_weights()
            t1 = time.perf_counter()
            batch = backend.generate(prompts, n)
            t2 = time.perf_counter()
            steps.append({"push_s": t1 - t0, "gen_s": t2 - t1, "tokens": int(batch.completion_mask.sum()),
                          "tensors": sent})
        return {"mode": args.child, "start_s": start_s, "dtype": str(next(model.parameters()).dtype),
                "threads": torch.get_num_threads(), "steps": steps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="a model folder (default: SmolLM2-135M-Instruct, fetched once)")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--num-generations", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--rank", type=int, default=16)
    parser.add_argument("--dtype", default="auto", help="[model] dtype (auto: the checkpoint's, bf16 for SmolLM2)")
    parser.add_argument("--eager", action="store_true", help="both engines without torch.compile")
    parser.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.model is None:
        from grpo_core.smollm2 import fetch_smollm2

        args.model = str(fetch_smollm2())
    if args.child:
        print("RESULT " + json.dumps(child(args)), flush=True)
        return

    env = {**os.environ, **({"GRPO_VLLM_EAGER": "1"} if args.eager else {})}
    if not args.eager:
        env.pop("GRPO_VLLM_EAGER", None)
    print(f"model {args.model} prompts {args.prompts} x {args.num_generations} max_tokens {args.max_tokens} "
          f"LoRA r={args.rank} all-linear steps {args.steps} dtype {args.dtype} eager={args.eager} load {os.getloadavg()[0]:.2f}",
          flush=True)
    results = {}
    for mode in MODES:
        cmd = [sys.executable, __file__, "--child", mode, *_forwarded(args)]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
        line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
        if proc.returncode or line is None:
            sys.exit(f"{mode}: exit {proc.returncode}\n{proc.stderr[-3000:]}")
        results[mode] = json.loads(line[len("RESULT "):])
    print(f"{'':<10}{'merged push s':>14}{'adapter push s':>15}{'merged tok/s':>13}{'adapter tok/s':>14}")
    merged, adapter = results["merged"]["steps"], results["adapter"]["steps"]
    for i, (m, a) in enumerate(zip(merged, adapter, strict=True), 1):
        print(f"step {i:<5}{m['push_s']:>14.3f}{a['push_s']:>15.3f}{m['tokens'] / m['gen_s']:>13.1f}"
              f"{a['tokens'] / a['gen_s']:>14.1f}")
    summary = {}
    for mode, steps in (("merged", merged), ("adapter", adapter)):
        summary[f"{mode}_push_s"] = statistics.mean(s["push_s"] for s in steps)
        summary[f"{mode}_tokens_per_s"] = sum(s["tokens"] for s in steps) / sum(s["gen_s"] for s in steps)
        summary[f"{mode}_step_s"] = statistics.mean(s["push_s"] + s["gen_s"] for s in steps)
        print(f"{mode}: engine start-up {results[mode]['start_s']:.1f} s, {steps[0]['tensors']} tensors per push, "
              f"dtype {results[mode]['dtype']}, threads {results[mode]['threads']}")
    ratios = {"push_ratio": summary["adapter_push_s"] / summary["merged_push_s"],
              "tokens_ratio": summary["adapter_tokens_per_s"] / summary["merged_tokens_per_s"],
              "step_ratio": summary["adapter_step_s"] / summary["merged_step_s"]}
    print(f"load after {os.getloadavg()[0]:.2f}")
    print("summary " + " ".join(f"{k}={v:.3f}" for k, v in {
        "merged_push_s": summary["merged_push_s"], "adapter_push_s": summary["adapter_push_s"],
        "push_ratio": ratios["push_ratio"], "merged_tokens_per_s": summary["merged_tokens_per_s"],
        "adapter_tokens_per_s": summary["adapter_tokens_per_s"], "tokens_ratio": ratios["tokens_ratio"],
        "merged_step_s": summary["merged_step_s"], "adapter_step_s": summary["adapter_step_s"],
        "step_ratio": ratios["step_ratio"]}.items()))


def _forwarded(args: argparse.Namespace) -> list[str]:
    return ["--model", args.model, "--steps", str(args.steps), "--prompts", str(args.prompts),
            "--num-generations", str(args.num_generations), "--max-tokens", str(args.max_tokens),
            "--rank", str(args.rank), "--dtype", args.dtype]


if __name__ == "__main__":
    main()
