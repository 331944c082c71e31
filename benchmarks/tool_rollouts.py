"""Where a step's time goes with tools, in one run: a multi-turn step (the built-in calculator) beside a one-turn
step of the same model, prompts and seed.

    python benchmarks/tool_rollouts.py [--steps 3] [--prompts 4] [--group 4] [--max-tokens 160]

The model is the tests' tiny Llama that opens tool calls and ends turns within a few tokens
(``tests/core/tool_models.py``): many turns, each answered by a tool's error message. Printed per mode, over the
steps after the first (a warm-up): the rollout's turns/s and tool calls/s, the share of the step in the model
(sampling), in the tools and in the rest (scoring, the update: the trainer), and the model tokens sampled per
second of sampling; then the ratio of that rate, multi-turn over one turn (each later turn prefills its whole
context again). :func:`watch` and :func:`rollout_numbers` are the measuring, which ``benchmarks/tool_example.py``
uses too.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "core"))


def run(model_dir: Path, out: Path, tools: bool, args: argparse.Namespace) -> dict[str, float]:
    from grpo_core.run_folder.layout import METRICS_FILE, read_jsonl
    from grpo_core.trainer import Trainer

    rows = out / "rows.jsonl"
    out.mkdir(parents=True)
    rows.write_text("".join(json.dumps({"prompt": f"What is {i} * 7?", "answer": str(7 * i)}) + "\n"
                            for i in range(args.prompts * args.steps)))
    cfg = {"model": {"name_or_path": str(model_dir), "dtype": "float32"},
           "data": {"source": str(rows), "chat_template": True, "max_prompt_length": 1024, "system_prompt": "Calc."},
           "generation": {"num_generations": args.group, "max_completion_length": args.max_tokens, "temperature": 0.8},
           "grpo": {"max_steps": args.steps, "prompts_per_step": args.prompts, "seed": 0},
           "logging": {"output_dir": str(out / "run"), "progress": False, "plot": False},
           "rewards": {"right": {"use": "exact_match"}}}
    if tools:
        cfg["tools"] = {"names": ["calculator"], "max_tool_calling_iterations": 6, "max_output_chars": 10}
    trainer = Trainer(cfg)
    parts = watch(trainer)
    trainer.train()
    return rollout_numbers(read_jsonl(out / "run" / METRICS_FILE), parts)


def watch(trainer: Any) -> list[dict[str, float]]:
    """Record each training step's rollout as ``trainer`` runs (one dict per step, in the returned list): the
    seconds in the model and in the tools, the model's own tokens, the turns and the tool calls. A one-turn
    backend's sampling is timed around its ``generate``, as the multi-turn rollout times its own."""
    if trainer.backend.tools is None:
        generate = trainer.backend.generate

        def timed(*a: Any, **k: Any) -> Any:
            start = time.monotonic()
            batch = generate(*a, **k)
            trainer.backend.last_rollout_seconds = {"model": time.monotonic() - start, "tools": 0.0}
            return batch
        trainer.backend.generate = timed
    parts: list[dict[str, float]] = []
    original = trainer._metrics

    def spy(batch: Any, *a: Any, **k: Any) -> dict[str, Any]:
        out_metrics = original(batch, *a, **k)  # a training step's batch: the evaluation's come later
        own = int((batch.completion_mask * (batch.tool_mask if batch.tool_mask is not None else 1)).sum())
        facts = batch.tool_facts or [{"turns": 1, "tool_calls": 0}] * len(batch.completions_text)
        parts.append({**trainer.backend.last_rollout_seconds, "tokens": own,
                      "turns": sum(f["turns"] for f in facts), "calls": sum(f["tool_calls"] for f in facts)})
        return out_metrics
    trainer._metrics = spy
    return parts


def rollout_numbers(metrics: list[dict[str, Any]], parts: list[dict[str, float]], skip: int = 1) -> dict[str, float]:
    """Over the steps after the first ``skip`` (a warm-up): turns/s and tool calls/s of the rollouts, the share of
    the steps' time (``step_time``, evaluations left out) in the model, the tools and the rest (the trainer), and
    the model's tokens per second of sampling. ``metrics``: the run's metrics records; ``parts``: :func:`watch`'s."""
    steps = [m for m in metrics if "step_time" in m][skip:]
    parts = parts[skip:]
    step = sum(m["step_time"] for m in steps)
    model, tool = sum(p["model"] for p in parts), sum(p["tools"] for p in parts)
    rollout = model + tool
    return {"turns/s": sum(p["turns"] for p in parts) / rollout, "tool calls/s": sum(p["calls"] for p in parts) / rollout,
            "model share": model / step, "tools share": tool / step, "trainer share": (step - rollout) / step,
            "model tokens/s": sum(p["tokens"] for p in parts) / model}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--group", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=160)
    args = parser.parse_args()
    from tool_models import tool_calling_model, tool_tokenizer

    with tempfile.TemporaryDirectory() as tmp:
        model_dir = tool_calling_model(Path(tmp) / "model", tool_tokenizer())
        results = {mode: run(model_dir, Path(tmp) / mode, mode == "multi-turn", args)
                   for mode in ("multi-turn", "one turn")}
    for mode, numbers in results.items():
        print(f"{mode:>10}: " + ", ".join(f"{k} {v:.3g}" for k, v in numbers.items()))
    ratio = results["multi-turn"]["model tokens/s"] / results["one turn"]["model tokens/s"]
    print(f"model tokens/s, multi-turn / one turn: {ratio:.2f}")


if __name__ == "__main__":
    main()
