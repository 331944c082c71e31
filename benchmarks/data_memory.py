"""Peak memory of loading a 1,000,000-row JSONL and taking training batches from it: the rows read whole (every
row a Python dict, every prompt a string, as the trainer held them before), read lazily (a byte offset per row,
rows and prompts made when a step uses them: ``grpo_core.data`` + ``grpo_core.prompt_fit``), and streamed
(``[data] streaming = true``: datasets' IterableDataset, buffer-shuffled).

Each way runs in a child process of its own; its peak resident memory (``VmHWM``) is printed next to the
others, with the growth over the child's memory after its imports and the ratio to the whole-file way.

    python benchmarks/data_memory.py [--rows 1000000] [--batches 20]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = r"""
import json, sys, time
from grpo_core.config import DataConfig
from grpo_core.data import epoch_permutation, format_prompt, train_eval_rows

def vm(key):
    return int(next(l for l in open("/proc/self/status") if l.startswith(key)).split()[1])

way, path, batches = sys.argv[1], sys.argv[2], int(sys.argv[3])
cfg = DataConfig(source=path, prompt_field="question", answer_field="answer", chat_template=False,
                 max_prompt_length=None, streaming=way == "streamed", shuffle_buffer=1000)
base, start = vm("VmHWM"), time.perf_counter()
taken = []
if way == "whole":  # the rows read whole: the file's text, one dict a row, every prompt formatted up front
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    del text
    prompts = [format_prompt(r, cfg, None) for r in rows]
    order = epoch_permutation(len(rows), 0, seed=0, shuffle=True)
    for b in range(batches):
        taken += [(rows[i]["answer"], prompts[i]) for i in order[b * 8:(b + 1) * 8].tolist()]
elif way == "lazy":
    from grpo_core.prompt_fit import fit_rows
    rows, _ = train_eval_rows(cfg)  # every row checked, in one pass
    rows, prompts = fit_rows(rows, cfg, None, True, "training")
    order = epoch_permutation(len(rows), 0, seed=0, shuffle=True)
    for b in range(batches):
        taken += [(rows[i]["answer"], prompts[i]) for i in order[b * 8:(b + 1) * 8].tolist()]
else:
    from grpo_core.prompt_fit import fit_rows
    rows, _ = train_eval_rows(cfg)
    rows, prompts = fit_rows(rows, cfg, None, True, "training")
    epoch = position = 0
    for b in range(batches):
        ids, epoch, position = rows.take(8, epoch, position)
        taken += [(rows[i]["answer"], prompts[i]) for i in ids]
assert len(taken) == 8 * batches
print(json.dumps({"peak_mb": vm("VmHWM") / 1024, "growth_mb": (vm("VmHWM") - base) / 1024,
                  "seconds": time.perf_counter() - start}))
"""


def write_rows(path: Path, count: int) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(count):
            fh.write(json.dumps({"question": f"Question {i}: what is {i} plus {i + 1}? Show your work, then give "
                                             "the answer in <answer> tags.", "answer": str(2 * i + 1),
                                 "level": i % 5}) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--batches", type=int, default=20, help="batches of 8 rows taken after loading")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rows.jsonl"
        start = time.perf_counter()
        write_rows(path, args.rows)
        size_mb = path.stat().st_size / 2**20
        print(f"{args.rows:,} rows, {size_mb:.0f} MB JSONL (written in {time.perf_counter() - start:.1f} s)")
        results = {}
        for way in ("whole", "lazy", "streamed"):
            out = subprocess.run([sys.executable, "-c", CHILD, way, str(path), str(args.batches)],
                                 capture_output=True, text=True, check=False)
            if out.returncode:
                raise SystemExit(f"{way}: {out.stderr.strip().splitlines()[-1]}")
            results[way] = json.loads(out.stdout.strip().splitlines()[-1])
        whole = results["whole"]["growth_mb"]
        print(f"{'way':<10}{'peak MB':>10}{'growth MB':>12}{'seconds':>10}{'growth / whole':>16}")
        for way, r in results.items():
            print(f"{way:<10}{r['peak_mb']:>10.0f}{r['growth_mb']:>12.1f}{r['seconds']:>10.1f}"
                  f"{r['growth_mb'] / whole:>16.3f}")


if __name__ == "__main__":
    main()
