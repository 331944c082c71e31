"""Operators and host synchronisations of one policy update, counted with ``torch.profiler`` on the CPU.

    PYTHONPATH=. python benchmarks/step_syncs.py [--passes-per-micro-batch 4]

Trains nothing: builds the demo's tiny model, samples one batch (2 prompts x 8 completions), then profiles the
trainer's ``_update`` on it (two micro-batches, each cut into several passes by an explicit
``grpo.micro_batch_tokens``, so the per-pass path repeats). It prints the operators the update dispatches, and
the ones that wait for the device: ``aten::_local_scalar_dense`` (what ``.item()``, ``float(tensor)`` and
``.tolist()`` run) and ``aten::nonzero`` (boolean indexing). On a CPU they cost little; on a GPU each one stops
the host until the queue drains, so the count per step is what matters, not the time here. Run it on two
checkouts to compare them (``PYTHONPATH=<checkout>``).
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
from pathlib import Path

import torch

SYNC_OPS = ("aten::_local_scalar_dense", "aten::nonzero")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passes-per-micro-batch", type=int, default=4)
    parser.add_argument("--lora", action="store_true", help="LoRA r=8 instead of a full fine-tune")
    args = parser.parse_args()

    from grpo_core import Trainer, config_from_dict
    from grpo_core.demo.task import completion, make_split
    from grpo_core.demo.tiny import TinySpec, build_tiny_model

    torch.manual_seed(0)
    tmp = Path(tempfile.mkdtemp(prefix="step_syncs_"))
    rows = make_split("train", max_operand=9, size=40)
    model_dir = build_tiny_model(tmp / "model", [r["prompt"] + completion(r) for r in rows],
                                 TinySpec(max_positions=128))
    generations, prompts, length = 8, 2, 24
    rows_per_pass = max(1, generations * prompts // 2 // args.passes_per_micro_batch)
    cfg = config_from_dict({
        "model": {"name_or_path": str(model_dir), "dtype": "float32"},
        "data": {"source": "demo:arithmetic?max_operand=9", "answer_field": "answer", "chat_template": False,
                 "max_prompt_length": 16},
        "generation": {"num_generations": generations, "max_completion_length": length},
        "grpo": {"prompts_per_step": prompts, "gradient_accumulation_steps": 2, "max_steps": 1,
                 "micro_batch_tokens": rows_per_pass * (16 + length)},
        "lora": {"enabled": args.lora, "r": 8},
        "logging": {"output_dir": str(tmp / "run"), "progress": False, "plot": False},
        "rewards": {"correct": {"use": "exact_match"}},
    })
    trainer = Trainer(cfg)
    batch, rewards, _ = trainer.sample_and_score(trainer.next_rows())
    advantages = torch.randn(len(rewards))
    trainer._update(batch, advantages)  # warm: first-call allocations and lazy imports out of the count
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        trainer._update(batch, advantages)
    counts = collections.Counter(e.name for e in prof.events())
    ops = sum(n for name, n in counts.items() if name.startswith("aten::"))
    width = batch.prompt_ids.size(1) + batch.completion_ids.size(1)
    print(f"update of {len(rewards)} rows x {width} tokens, {'LoRA' if args.lora else 'full fine-tune'}, "
          f"2 micro-batches in passes of <= {rows_per_pass} rows")
    print(f"aten operators per update: {ops}")
    for name in SYNC_OPS:
        print(f"{name}: {counts.get(name, 0)}")
    print(f"host syncs per update: {sum(counts.get(name, 0) for name in SYNC_OPS)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
