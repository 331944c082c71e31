"""One side of ``benchmarks/vs_trl.py``, run in its own process: ``python grpo_bench_sides.py SIDE ...``.

``ours``  grpo_core's real ``Trainer`` (backbone + chunked log-probs, checkpointing, grpo_loss, AdamW),
          with its generation backend swapped, through the plugin hook, for :class:`FixedCompletions`.
``trl``   ``trl.GRPOTrainer`` with the same model, LoRA, group, reward and optimiser settings, its
          ``generate`` swapped for the same fixed completions.

Both sides therefore train on byte-identical full-length completions (no EOS, nothing sampled): what is
timed and measured is the GRPO step after generation (decode + reward + advantages + the policy update
forward/backward + optimiser step). Generation itself is the same ``model.generate`` code in both
trainers; on 2 CPU cores it runs at ~1 s per decode step for this 151,936-token vocabulary, which is why
it is left out. The peak is the process's resident high-water mark (``VmHWM``), reset once the model,
trainer and data are built, read at the end of every step (both trainers load the safetensors weights
memory-mapped, so the weights become resident during the first step and are inside the peak). With
``--device cuda`` (``benchmarks/gpu_vs_trl.py``) both train on the GPU, each step's time ends after a
``torch.cuda.synchronize()``, the peak is ``torch.cuda.max_memory_allocated`` since the run was built, and
``--memory-fraction`` caps this process's share of the GPU (``torch.cuda.set_per_process_memory_fraction``), which
our planner reads as the memory the process may hold (``--memory-budget-gb`` sets ``[trainer] memory_budget_gb``
instead: a budget the planner plans within, not a planned key).
``--checkpointing on|off`` sets gradient checkpointing on both sides; ``plan`` leaves it out of our run config, so
our step planner chooses it (``grpo_core.policy.step_plan``), while TRL, which has no planner, trains with it on.
``--micro-batch-tokens`` and ``--chunk-size`` likewise reach our run config only when given: a key in the run
config counts as set by the user and the planner never changes it, so leaving them out measures the planner's
step. ``--dtype auto`` trains fp32 master weights under 16-bit autocast on both sides (ours: a 16-bit checkpoint
with ``dtype = "auto"``; TRL: fp32 weights with ``bf16 = True``). The last line of stdout is ``RESULT {json}``;
ours adds ``plan``, the step plan our trainer ran by (``StepPlan.to_dict``), also when the step failed.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

GiB = 1024**3


def rss_bytes(field: str = "VmRSS") -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def reset_peak() -> bool:
    """Reset the resident high-water mark (Linux >= 4.0); False where that is not allowed."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def reward_distinct(completions: list[Any], **_: Any) -> list[float]:
    """Share of distinct characters: cheap, deterministic, and varies within a group."""
    texts = [c if isinstance(c, str) else str(c) for c in completions]
    return [len(set(t)) / (1.0 + len(t)) for t in texts]


def fixed_completions(rows: int, length: int, low: int, high: int, seed: int) -> Any:
    """The completions both sides train on: token ids in ``[low, high)`` (no special token, no EOS)."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    return torch.randint(low, high, (rows, length), generator=gen)


class Recorder:
    """Step timings and the high-water mark, shared by both sides (the resident set on the CPU,
    ``torch.cuda.max_memory_allocated`` on CUDA)."""

    def __init__(self, cuda: bool = False) -> None:
        self.cuda = cuda
        self.step_start: float | None = None
        self.steps: list[float] = []
        self.peak = 0
        self.reset_ok = False
        self.rss_at_start = 0
        self.plan: dict[str, Any] | None = None  # ours: the step plan the trainer runs by

    def start_run(self) -> None:
        import gc

        gc.collect()
        if self.cuda:
            import torch

            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self.reset_ok, self.rss_at_start = True, torch.cuda.memory_allocated()
            return
        self.reset_ok = reset_peak()
        self.rss_at_start = rss_bytes()

    def start_step(self) -> None:
        if self.step_start is None:
            self.step_start = time.perf_counter()

    def end_step(self) -> None:
        assert self.step_start is not None
        if self.cuda:
            import torch

            torch.cuda.synchronize()
        self.steps.append(time.perf_counter() - self.step_start)
        self.step_start = None
        if self.cuda:
            import torch

            self.peak = max(self.peak, torch.cuda.max_memory_allocated())
        else:
            self.peak = max(self.peak, rss_bytes("VmHWM"))


# ------------------------------------------------------------------------------------------ ours ---


def our_run_config(a: argparse.Namespace) -> dict[str, Any]:
    """Our run config for these arguments, but its rewards. The keys the step planner chooses are in it only
    where the arguments pin them: ``gradient_checkpointing`` unless ``--checkpointing plan``,
    ``micro_batch_tokens`` and ``logprob_chunk_size`` when given."""
    model: dict[str, Any] = {"name_or_path": a.model_dir, "dtype": a.dtype, "offload_activations": False}
    if a.checkpointing != "plan":
        model["gradient_checkpointing"] = a.checkpointing == "on"
    grpo: dict[str, Any] = {"learning_rate": 1e-5, "prompts_per_step": 1, "max_steps": a.steps, "loss_type": "dapo",
                            "beta": 0.0, "num_iterations": 1, "epsilon": 0.2, "max_grad_norm": 1.0,
                            "lr_scheduler": "constant", "seed": 0}
    if a.chunk_size is not None:
        grpo["logprob_chunk_size"] = a.chunk_size
    if a.micro_batch_tokens is not None:
        grpo["micro_batch_tokens"] = a.micro_batch_tokens
    trainer = {} if a.memory_budget_gb is None else {"trainer": {"memory_budget_gb": a.memory_budget_gb}}
    return {
        "model": model,
        "data": {"source": a.prompts, "prompt_field": "prompt", "chat_template": False, "shuffle": False},
        "generation": {"backend": "vs_trl_fixed", "num_generations": a.generations,
                       "max_completion_length": a.length, "temperature": 1.0},
        "grpo": grpo,
        "lora": {"enabled": a.lora_rank > 0, "r": max(a.lora_rank, 1), "alpha": 2 * max(a.lora_rank, 1)},
        "logging": {"output_dir": a.out_dir, "plot": False, "progress": False, "sample_every": 10**6},
        "checkpoint": {"every": 0, "keep_last": 1},
        **trainer,
    }


def run_ours(a: argparse.Namespace, rec: Recorder, completions: Any) -> dict[str, Any]:
    import torch

    from grpo_core.config import config_from_dict
    from grpo_core.generation.transformers_backend import Generation
    from grpo_core.trainer import Trainer
    from grpo_rewards import compose, hookimpl
    from grpo_rewards.plugins import load_registry

    class FixedCompletions:
        """Generation backend: the prompts, left-padded as the transformers backend does, + fixed ids."""

        def __init__(self, config: Any, model: Any, tokenizer: Any) -> None:
            self.tokenizer = tokenizer

        def generate(self, prompts: list[str], num_generations: int, *, greedy: bool = False) -> Generation:
            rec.start_step()
            self.tokenizer.padding_side = "left"
            enc = self.tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
            ids = enc["input_ids"].repeat_interleave(num_generations, 0)
            mask = enc["attention_mask"].repeat_interleave(num_generations, 0)
            comp = completions[: ids.size(0)]
            texts = self.tokenizer.batch_decode(comp, skip_special_tokens=True)
            return Generation(ids, mask, comp, torch.ones_like(comp), texts, torch.ones(ids.size(0), dtype=torch.bool))

    class BenchPlugin:
        @hookimpl
        def grpo_register_generation_backends(self, register: Any) -> None:
            register("vs_trl_fixed", FixedCompletions)

        @hookimpl
        def grpo_on_train_start(self, trainer: Any) -> None:
            rec.plan = trainer.step_plan.to_dict()
            rec.start_run()

        @hookimpl
        def grpo_on_step_end(self, trainer: Any, step: int, metrics: dict[str, float]) -> None:
            rec.end_step()

    registry = load_registry(extra_plugins=[("vs_trl_bench", BenchPlugin())])
    cfg = config_from_dict({**our_run_config(a), "rewards": compose({"distinct": reward_distinct})},
                           registry=registry)
    Trainer(cfg, registry=registry).train()
    return {"trainer": "grpo_core.trainer.Trainer"}


# ------------------------------------------------------------------------------------------- trl ---


def run_trl(a: argparse.Namespace, rec: Recorder, completions: Any) -> dict[str, Any]:
    import torch
    import transformers
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    seen: dict[str, int] = {}

    def fake_generate(self: Any, input_ids: Any = None, attention_mask: Any = None, **_: Any) -> Any:
        seen["prompt_length"] = int(input_ids.size(1))
        return torch.cat([input_ids, completions[: input_ids.size(0)].to(input_ids.device)], dim=1)

    transformers.GenerationMixin.generate = fake_generate  # type: ignore[method-assign]

    class Timer(TrainerCallback):
        def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            rec.start_run()

        def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            rec.start_step()

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            rec.end_step()

    dtype = torch.float32 if a.dtype == "auto" else getattr(torch, a.dtype)  # auto: fp32 weights, bf16 autocast
    tok = AutoTokenizer.from_pretrained(a.model_dir)
    model = AutoModelForCausalLM.from_pretrained(a.model_dir, dtype=dtype)
    rows = [json.loads(line) for line in Path(a.prompts).read_text().splitlines() if line.strip()]
    config = GRPOConfig(
        output_dir=a.out_dir, per_device_train_batch_size=a.generations, num_generations=a.generations,
        max_completion_length=a.length, gradient_checkpointing=a.checkpointing != "off", learning_rate=1e-5, beta=0.0,
        num_iterations=1, loss_type="dapo", epsilon=0.2, max_grad_norm=1.0, lr_scheduler_type="constant",
        max_steps=a.steps, logging_steps=1, report_to="none", save_strategy="no", use_cpu=a.device == "cpu",
        bf16=a.dtype == "bfloat16" or (a.dtype == "auto" and a.device == "cuda"), fp16=False, seed=0, temperature=1.0, dataloader_num_workers=0,
        shuffle_dataset=False, generation_kwargs={"min_new_tokens": a.length}, disable_tqdm=True,
    )
    trainer = GRPOTrainer(
        model=model, reward_funcs=reward_distinct, args=config,
        train_dataset=Dataset.from_list([{"prompt": r["prompt"]} for r in rows]), processing_class=tok,
        peft_config=LoraConfig(r=a.lora_rank, lora_alpha=2 * a.lora_rank, target_modules="all-linear",
                               task_type="CAUSAL_LM") if a.lora_rank else None,
        callbacks=[Timer()],
    )
    trainer.train()
    return {"trainer": f"trl.GRPOTrainer {__import__('trl').__version__}", **seen}


# ------------------------------------------------------------------------------------------ main ---


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("side", choices=["ours", "trl"])
    p.add_argument("--model-dir", required=True)
    p.add_argument("--prompts", required=True)
    p.add_argument("--out-dir", required=True)
    p.add_argument("--length", type=int, required=True)
    p.add_argument("--generations", type=int, default=8)
    p.add_argument("--steps", type=int, default=1)
    p.add_argument("--lora-rank", type=int, default=16)
    p.add_argument("--chunk-size", type=int, default=None, help="ours: log-prob head tile (default: planned)")
    p.add_argument("--micro-batch-tokens", type=int, default=None,
                   help="ours: tokens per forward/backward (default: planned)")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--token-range", default="6,500", help="low,high of the fixed completion ids")
    p.add_argument("--memory-limit-gb", type=float, default=0.0, help="RLIMIT_AS for this process (0: none)")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--checkpointing", choices=["on", "off", "plan"], default="on",
                   help="gradient checkpointing on both sides; plan: ours as planned, TRL's on")
    p.add_argument("--memory-fraction", type=float, default=0.0,
                   help="cuda: torch.cuda.set_per_process_memory_fraction for this process (0: none)")
    p.add_argument("--memory-budget-gb", type=float, default=None,
                   help="ours: [trainer] memory_budget_gb (default: none; the planner reads --memory-fraction itself)")
    return p.parse_args(argv)


def main() -> int:
    from grpo_rewards.errors import UserError

    a = parse_args()
    if a.memory_limit_gb > 0:
        limit = int(a.memory_limit_gb * GiB)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    out: dict[str, Any] = {"side": a.side, "length": a.length, "pid": os.getpid()}
    rec = Recorder(cuda=a.device == "cuda")
    try:
        import peft  # noqa: F401  (both trainers' stack, before any model: the runtime part of the floor)
        import torch
        import transformers  # noqa: F401

        import grpo_core.trainer  # noqa: F401

        out["runtime_rss"] = rss_bytes()
        if a.device == "cuda" and a.memory_fraction > 0:
            torch.cuda.set_per_process_memory_fraction(a.memory_fraction)
        low, high = (int(x) for x in a.token_range.split(","))
        completions = fixed_completions(a.generations, a.length, low, high, seed=1234)
        out.update(run_ours(a, rec, completions) if a.side == "ours" else run_trl(a, rec, completions))
        out["threads"] = torch.get_num_threads()
    except (MemoryError, RuntimeError) as exc:
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        out["error"] = message[:300]
        out["oom"] = isinstance(exc, MemoryError) or any(
            s in message.lower() for s in ("alloc", "out of memory", "not enough memory")
        )
    except UserError as exc:  # ours: the planner found no step within trainer.memory_budget_gb (a cap)
        out["error"] = str(exc).splitlines()[0][:300]
        out["oom"] = any(p.key == "trainer.memory_budget_gb" for p in exc.problems)
    if rec.plan is not None:
        out["plan"] = rec.plan
    out.update(steps=rec.steps, peak_step=rec.peak, peak_reset=rec.reset_ok, rss_at_start=rec.rss_at_start,
               peak_lifetime=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
    print("RESULT " + json.dumps(out), flush=True)
    return 0 if "error" not in out or out.get("oom") else 1


if __name__ == "__main__":
    sys.exit(main())
