"""Where a step's time goes with tools, in one run: a multi-turn step (the built-in calculator) beside a one-turn
step of the same model, prompts and seed.

    python benchmarks/tool_rollouts.py [--steps 3] [--prompts 4] [--group 4] [--max-tokens 160]

The model is the tests' tiny Llama that opens tool calls and ends turns within a few tokens
(``tests/core/tool_models.py``): many turns, each answered by a tool's error message. Printed per mode, over the
steps after the first (a warm-up): the rollout's turns/s and tool calls/s, the share of the step in the model
(sampling), in the tools and in the rest (scoring, the update: the trainer), and the model tokens sampled per
second of sampling; then the ratio of that rate, multi-turn over one turn (each later turn prefills its whole
context again).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

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
    if not tools:  # the one-turn rollout's sampling time, measured around the backend as the rollout measures its own
        import time

        generate = trainer.backend.generate

        def timed(*a, **k):
            start = time.monotonic()
            batch = generate(*a, **k)
            trainer.backend.last_rollout_seconds = {"model": time.monotonic() - start, "tools": 0.0}
            return batch
        trainer.backend.generate = timed
    seconds = []
    original = trainer._metrics

    def spy(batch, *a, **k):
        out_metrics = original(batch, *a, **k)
        own = int((batch.completion_mask * (batch.tool_mask if batch.tool_mask is not None else 1)).sum())
        facts = batch.tool_facts or [{"turns": 1, "tool_calls": 0}] * len(batch.completions_text)
        seconds.append({**trainer.backend.last_rollout_seconds, "tokens": own,
                        "turns": sum(f["turns"] for f in facts), "calls": sum(f["tool_calls"] for f in facts)})
        return out_metrics
    trainer._metrics = spy
    trainer.train()
    steps = read_jsonl(out / "run" / METRICS_FILE)[1:]
    parts = seconds[1:]
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
