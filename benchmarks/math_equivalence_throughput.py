"""Throughput of ``math_equivalence`` (and ``email_rules``) on 10,000 GSM8K-style completions.

    python benchmarks/math_equivalence_throughput.py [--n 10000] [--workers 1,2] [--data PATH]

The batch is the one ``benchmarks/rewards_throughput.py`` builds (GSM8K training
solutions rendered as ``<answer>``, ``####``, ``\\boxed{}``, ``Answer:``, chat
messages and junk; full reference solutions in ``answer``). Measured side by side
in one run, completions per second:

* in-process serial: extraction + ``math_check.check`` in this process, no pool,
  no time limit (what calling math-verify directly costs; on ``--serial-n`` rows)
* ``math_equivalence`` as shipped, with ``--workers`` processes (integer pairs
  decided in the caller, the rest chunked through the pool with per-item
  deadlines), after a warm-up call that starts the pool (timed apart)
* the same with the integer fast path off (every pair through math-verify in the
  pool), then also with one task per item (``MAX_CHUNK = 1``) instead of chunks

and ``email_rules`` on 10,000 emails built from ``examples/email_completions.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]

from rewards_throughput import DEFAULT_DATA, build_batch  # noqa: E402

from grpo_rewards.answers.extraction import extract_answer  # noqa: E402
from grpo_rewards.builtins import math_check, timeout_pool  # noqa: E402
from grpo_rewards.builtins.email_rules import email_rules  # noqa: E402
from grpo_rewards.builtins.math_equivalence import math_equivalence  # noqa: E402
from grpo_rewards.completions import completion_text  # noqa: E402


def _answer(completion: object) -> str:
    try:
        return extract_answer(completion_text(completion)) or ""
    except TypeError:
        return "<junk>"


def serial_rate(completions: list, refs: list, n: int) -> float:
    math_check.init_worker()
    start = time.perf_counter()
    for completion, ref in zip(completions[:n], refs[:n], strict=True):
        try:
            text = completion_text(completion)
        except TypeError:
            continue
        math_check.check(str(ref), extract_answer(text) or "")
    return n / (time.perf_counter() - start)


def pool_rate(completions: list, refs: list, workers: int) -> tuple[float, float, list]:
    reward = math_equivalence(workers=workers)
    start = time.perf_counter()
    warm = ["\\boxed{\\frac{1}{2}}", "<answer>\\sqrt{2}</answer>"] * 2 * workers  # not integers: they reach the pool
    reward(warm, answer=["0.5", "\\sqrt{2}"] * 2 * workers)  # starts the pool and imports sympy in each worker
    cold = time.perf_counter() - start
    start = time.perf_counter()
    scores = reward(completions, answer=refs)
    return len(completions) / (time.perf_counter() - start), cold, scores


def email_batch(n: int, seed: int) -> tuple[list, dict]:
    rows = [json.loads(line) for line in (REPO / "examples" / "email_completions.jsonl").read_text().splitlines()]
    rng = random.Random(seed)
    picked = [rows[rng.randrange(len(rows))] for _ in range(n)]
    texts = [completion_text(r["completion"]) + rng.choice(["", " Thanks again.", "\nP.S. see you"]) for r in picked]
    cols = {k: [r.get(k) for r in picked] for k in ("keywords", "ideal", "recipient")}
    return texts, cols


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--serial-n", type=int, default=2_000)
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    completions, columns, source = build_batch(args.n, args.data, args.seed)
    refs = columns["answer"]
    unique = len({(str(r), _answer(c)) for c, r in zip(completions, refs, strict=True)})
    print(f"{args.n} completions from {source} ({unique} distinct (reference, answer) pairs, verified once each "
          f"by math_equivalence); {os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.2f}")
    rows: list[tuple[str, float, str]] = []
    serial = serial_rate(completions, refs, min(args.serial_n, args.n))
    rows.append(("in-process serial (no pool, no time limit)", serial, ""))
    scores = None
    for workers in (int(w) for w in args.workers.split(",")):
        rate, cold, scores = pool_rate(completions, refs, workers)
        rows.append((f"math_equivalence, {workers} worker(s)", rate, f"pool start + warm-up {cold:.2f}s"))
    most = max(int(w) for w in args.workers.split(","))
    math_check.literal_check = lambda gold, answer, require_literal: None  # every pair through math-verify in the pool
    rate, _, _ = pool_rate(completions, refs, most)
    rows.append((f"  same, {most} worker(s), integer fast path off", rate, "all pairs through math-verify"))
    timeout_pool.shutdown()
    timeout_pool.MAX_CHUNK = 1
    rate, _, _ = pool_rate(completions, refs, most)
    rows.append(("  same, one task per item instead of chunks", rate, "the design chunks replace"))
    timeout_pool.shutdown()

    print(f"\n{'method':<48} {'completions/s':>14} {'vs serial':>10}  note")
    for label, rate, note in rows:
        print(f"{label:<48} {rate:>14,.0f} {rate / serial:>9.2f}x  {note}")
    assert scores is not None
    present = [s for s in scores if s is not None]
    print(f"\nmath_equivalence: mean {sum(present) / len(present):.3f}, None share {1 - len(present) / len(scores):.1%}")

    texts, cols = email_batch(args.n, args.seed)
    reward = email_rules()
    start = time.perf_counter()
    reward(texts, **cols)
    email = args.n / (time.perf_counter() - start)
    print(f"\nemail_rules: {email:,.0f} completions/s on {args.n} emails ({email / serial:.1f}x math serial)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
