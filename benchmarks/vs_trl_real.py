"""Ours against ``trl.GRPOTrainer`` on SmolLM2-135M-Instruct, generation on for both, each side in its own process.

    .venv-vllm/bin/python benchmarks/vs_trl_real.py [--steps 8 --generations 4 --length 64 --lora-rank 16]
    .venv/bin/python benchmarks/vs_trl_real.py --sides ours-hf,trl-hf      # where vLLM is not installed
    .venv-vllm/bin/python benchmarks/vs_trl_real.py --gsm8k ../shared/data/gsm8k/train.jsonl --length 128

Same model (``grpo_core.smollm2``: the PyPI GGUF converted once), same rows (two-number additions asked
in words, answer checked on the last number of the reply: SmolLM2-135M gets some right, so groups have
reward variance; or, with ``--gsm8k FILE``, GSM8K questions under the Unsloth notebook's system prompt,
longer prompts on which the model rarely scores), same reward function, LoRA rank, group size, completion
length, temperature, learning rate, loss (``dapo``, no KL) and number of steps. Four sides (``--sides``; all
four where vLLM imports, else the two HF ones): ``ours-hf`` (the transformers backend, each prompt prefilled
once for its group), ``ours-vllm`` (the colocated vLLM engine, LoRA merged and pushed before each step, the
default importance-sampling correction), ``trl-hf`` (``model.generate``) and ``trl-vllm`` (TRL's
``use_vllm=True, vllm_mode="colocate"``, its own push and correction). Per step it prints the wall time split
into generation (the push included, also shown alone) / scoring / training, the resident high-water mark
(``VmHWM``, reset after loading) and the mean reward; then per side the mean step time (every step, the first
included), peak and final reward (mean of the last half of the steps), and one line::

    summary model=smollm2-135m best_ours=.. best_trl=.. step_time_ratio=.. ours-vllm/trl-hf=.. ours-hf/trl-hf=..
            ours-vllm/trl-vllm=.. ours-hf/trl-vllm=..

(``step_time_ratio``: ours' fastest side over TRL's fastest). On a CPU shared with other work the numbers are
indicative only.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SYSTEM = "Add the two numbers. Reply with one short sentence ending in: The answer is N."
GSM8K_SYSTEM = """Respond in the following format:
<reasoning>
...
</reasoning>
<answer>
...
</answer>"""  # the Unsloth GRPO notebook's


def system_prompt(a: argparse.Namespace) -> str:
    return GSM8K_SYSTEM if a.gsm8k else SYSTEM


def gsm8k_rows(path: str, n: int) -> list[dict[str, Any]]:
    """The first ``n`` rows of a GSM8K JSONL file, the answer cut to the number after ``####``."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            rows.append({"question": row["question"], "answer": row["answer"].split("####")[-1].strip()})
            if len(rows) == n:
                break
    return rows


SIDES = ("ours-hf", "ours-vllm", "trl-hf", "trl-vllm")  # who trains, and what samples: HF generation or vLLM


def vllm_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("vllm") is not None


def make_rows(n: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        a, b = rng.randint(10, 99), rng.randint(10, 99)
        rows.append({"question": f"What is {a} + {b}?", "answer": str(a + b)})
    return rows


def _text(completion: Any) -> str:
    if isinstance(completion, list):  # TRL's conversational form: [{"role": "assistant", "content": ...}]
        return " ".join(str(m.get("content", "")) for m in completion)
    return str(completion)


def addition_reward(completions: list[Any], answer: list[str], **_: Any) -> list[float]:
    """1 when the reply's last number is the sum, else 0.5 / (1 + |error|) (partial credit for near misses)."""
    out = []
    for completion, ref in zip(completions, answer):
        numbers = re.findall(r"-?\d+", _text(completion).replace(",", ""))
        if not numbers:
            out.append(0.0)
            continue
        error = abs(int(numbers[-1]) - int(ref.replace(",", "")))
        out.append(1.0 if error == 0 else 0.5 / (1.0 + error))
    return out


def vmhwm() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def reset_peak() -> None:
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


class Split:
    """Seconds spent in generation / scoring / training per step."""

    def __init__(self) -> None:
        self.steps: list[dict[str, float]] = []
        self.current: dict[str, float] = {}

    def add(self, key: str, seconds: float) -> None:
        self.current[key] = self.current.get(key, 0.0) + seconds

    def timed(self, key: str, fn: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.add(key, time.perf_counter() - start)
        return wrapper

    def end(self, **extra: float) -> None:
        self.steps.append({**self.current, **extra, "peak": vmhwm()})
        self.current = {}


# ------------------------------------------------------------------------------------------ sides ---


def run_ours(a: argparse.Namespace, rows: list[dict[str, Any]], split: Split) -> None:
    from grpo_core.config import config_from_dict
    from grpo_core.trainer import Trainer
    from grpo_rewards import compose

    data = Path(a.work) / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = config_from_dict({
        "model": {"name_or_path": a.model_dir, "dtype": "float32", "gradient_checkpointing": True},
        "data": {"source": str(data), "prompt_field": "question", "system_prompt": system_prompt(a),
                 "shuffle": False, "max_prompt_length": 512},
        "generation": {"num_generations": a.generations, "max_completion_length": a.length, "temperature": 1.0,
                       **({"backend": "vllm", "vllm_max_model_len": 512 + a.length}
                          if a.side == "ours-vllm" else {})},
        "grpo": {"learning_rate": a.lr, "prompts_per_step": a.prompts, "max_steps": a.steps, "loss_type": "dapo",
                 "beta": 0.0, "lr_scheduler": "constant", "seed": a.seed},
        "lora": {"enabled": True, "r": a.lora_rank, "alpha": a.lora_rank, "target_modules": "all-linear"},
        "logging": {"output_dir": str(Path(a.work) / a.side), "plot": False, "progress": False,
                    "sample_every": 10**6},
        "rewards": compose({"addition": addition_reward}),
    })
    trainer = Trainer(cfg)
    trainer.backend.generate = split.timed("generation", trainer.backend.generate)
    if hasattr(trainer.backend, "sync_weights"):  # vLLM: the weight push, a part of generation
        trainer.backend.sync_weights = split.timed("push", trainer.backend.sync_weights)
    trainer._score = split.timed("scoring", trainer._score)
    trainer._update = split.timed("training", trainer._update)
    original_log = trainer._metrics

    def metrics(*args: Any, **kwargs: Any) -> dict[str, Any]:
        out = original_log(*args, **kwargs)
        split.end(step_time=out["step_time"], reward=out["reward/mean"])
        return out

    trainer._metrics = metrics
    reset_peak()
    trainer.train()


def run_trl(a: argparse.Namespace, rows: list[dict[str, Any]], split: Split) -> None:
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    class Steps(TrainerCallback):
        def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self.start = time.perf_counter()

        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kw: Any) -> None:
            if logs and "reward" in logs:
                split.current["reward"] = float(logs["reward"])

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self.step_time = time.perf_counter() - self.start
            split.current["step_time"] = self.step_time

    tok = AutoTokenizer.from_pretrained(a.model_dir)
    model = AutoModelForCausalLM.from_pretrained(a.model_dir, dtype=torch.float32)
    dataset = Dataset.from_list([{"prompt": [{"role": "system", "content": system_prompt(a)},
                                             {"role": "user", "content": r["question"]}], "answer": r["answer"]}
                                 for r in rows])
    config = GRPOConfig(
        output_dir=str(Path(a.work) / a.side), per_device_train_batch_size=a.prompts * a.generations,
        num_generations=a.generations, max_completion_length=a.length, gradient_checkpointing=True,
        learning_rate=a.lr, beta=0.0, num_iterations=1, loss_type="dapo", lr_scheduler_type="constant",
        max_steps=a.steps, logging_steps=1, report_to="none", save_strategy="no", use_cpu=True, bf16=False,
        fp16=False, seed=a.seed, temperature=1.0, top_p=1.0, top_k=0, dataloader_num_workers=0,
        shuffle_dataset=False, disable_tqdm=True,
        **({"use_vllm": True, "vllm_mode": "colocate", "vllm_max_model_length": 512 + a.length}
           if a.side == "trl-vllm" else {}),
    )
    trainer = GRPOTrainer(
        model=model, reward_funcs=addition_reward, args=config, train_dataset=dataset, processing_class=tok,
        peft_config=LoraConfig(r=a.lora_rank, lora_alpha=a.lora_rank, target_modules="all-linear",
                               task_type="CAUSAL_LM"),
        callbacks=[Steps()],
    )
    trainer._generate_single_turn = split.timed("generation", trainer._generate_single_turn)
    trainer._calculate_rewards = split.timed("scoring", trainer._calculate_rewards)
    if getattr(trainer, "vllm_generation", None) is not None:  # vLLM: the weight push, a part of generation
        trainer.vllm_generation.sync_weights = split.timed("push", trainer.vllm_generation.sync_weights)
    original_log = trainer.log

    def log(logs: dict[str, float], *args: Any, **kwargs: Any) -> None:
        original_log(logs, *args, **kwargs)
        if "reward" in logs:
            seconds = split.current.get("step_time")
            step_time = seconds if seconds is not None else 0.0
            split.current["reward"] = float(logs["reward"])
            split.end(step_time=step_time)

    trainer.log = log
    reset_peak()
    trainer.train()


def side_main(a: argparse.Namespace) -> int:
    rows = gsm8k_rows(a.gsm8k, a.prompts * a.steps) if a.gsm8k else make_rows(a.prompts * a.steps, a.seed)
    split = Split()
    (run_ours if a.side.startswith("ours") else run_trl)(a, rows, split)
    for s in split.steps:
        if "training" not in s:  # TRL: training is the step minus generation and scoring
            s["training"] = max(0.0, s.get("step_time", 0.0) - s.get("generation", 0.0) - s.get("scoring", 0.0))
        if not s.get("step_time"):
            s["step_time"] = s.get("generation", 0.0) + s.get("scoring", 0.0) + s["training"]
    print("RESULT " + json.dumps({"side": a.side, "steps": split.steps}), flush=True)
    return 0


# ------------------------------------------------------------------------------------------- main ---


def run_side(side: str, a: argparse.Namespace, work: str) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--side", side, "--model-dir", a.model_dir, "--work", work,
           *[f"--{k.replace('_', '-')}={getattr(a, k)}" for k in
             ("steps", "prompts", "generations", "length", "lora_rank", "lr", "seed", "gsm8k")]]
    done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
    result = next((json.loads(line[7:]) for line in done.stdout.splitlines() if line.startswith("RESULT ")), None)
    if result is None:
        raise SystemExit(f"{side} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    return result


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--side", choices=SIDES, help=argparse.SUPPRESS)
    p.add_argument("--work", help=argparse.SUPPRESS)
    p.add_argument("--model-dir", default="")
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--prompts", type=int, default=1)
    p.add_argument("--generations", type=int, default=4)
    p.add_argument("--length", type=int, default=64)
    p.add_argument("--lora-rank", type=int, default=16)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--gsm8k", default="", help="GSM8K JSONL file: its questions instead of the additions")
    p.add_argument("--sides", default="",
                   help=f"comma-separated, of {', '.join(SIDES)} (default: all four where vLLM imports, else the HF "
                        "two)")
    a = p.parse_args()
    if a.side:
        return side_main(a)
    if not a.model_dir:
        from grpo_core.smollm2 import fetch_smollm2

        a.model_dir = str(fetch_smollm2())
    sides = [x for x in a.sides.split(",") if x] or (list(SIDES) if vllm_available() else ["ours-hf", "trl-hf"])
    unknown = sorted(set(sides) - set(SIDES))
    if unknown or not any(x.startswith("ours") for x in sides) or not any(x.startswith("trl") for x in sides):
        raise SystemExit(f"--sides: one or more of ours-hf, ours-vllm and of trl-hf, trl-vllm (got {a.sides!r})")
    with tempfile.TemporaryDirectory(prefix="vs_trl_real-") as work:
        results = {side: run_side(side, a, work) for side in sides}
    print(f"SmolLM2-135M-Instruct, {'GSM8K' if a.gsm8k else 'additions'}, LoRA r={a.lora_rank}, {a.prompts} prompt(s) "
          f"x {a.generations} completions x {a.length} tokens, {a.steps} steps, fp32, CPU threads={os.cpu_count()}, "
          f"load {os.getloadavg()[0]:.2f}")
    print(f"{'side':<9} {'step':>4} {'total s':>8} {'gen s':>7} {'push s':>7} {'score s':>8} {'train s':>8} "
          f"{'peak GiB':>9} {'reward':>7}")
    for side, res in results.items():
        for i, s in enumerate(res["steps"], 1):
            print(f"{side:<9} {i:>4} {s['step_time']:8.2f} {s.get('generation', 0):7.2f} {s.get('push', 0):7.2f} "
                  f"{s.get('scoring', 0):8.3f} {s['training']:8.2f} {s['peak'] / 2**30:9.3f} "
                  f"{s.get('reward', float('nan')):7.3f}")
    steps = {side: res["steps"] for side, res in results.items()}
    half = max(1, a.steps // 2)
    mean_step = {side: _mean([s["step_time"] for s in st]) for side, st in steps.items()}
    print(f"{'side':<9} {'mean step s':>11} {'mean gen s':>10} {'peak GiB':>9} {'final reward':>12}")
    for side, st in steps.items():
        print(f"{side:<9} {mean_step[side]:11.2f} {_mean([s.get('generation', 0) for s in st]):10.2f} "
              f"{max(s['peak'] for s in st) / 2**30:9.3f} {_mean([s.get('reward', float('nan')) for s in st[-half:]]):12.3f}")
    pairs = [(o, t) for o, t in (("ours-vllm", "trl-hf"), ("ours-hf", "trl-hf"), ("ours-vllm", "trl-vllm"),
                                 ("ours-hf", "trl-vllm")) if o in steps and t in steps]
    best_ours = min((x for x in steps if x.startswith("ours")), key=mean_step.__getitem__)
    best_trl = min((x for x in steps if x.startswith("trl")), key=mean_step.__getitem__)
    ratios = " ".join(f"{o}/{t}={mean_step[o] / mean_step[t]:.3f}" for o, t in pairs)
    print(f"summary model=smollm2-135m best_ours={best_ours} best_trl={best_trl} "
          f"step_time_ratio={mean_step[best_ours] / mean_step[best_trl]:.3f} {ratios}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
