"""Scoring wall time with two slow rewards, one after another vs concurrently, in one run.

    python benchmarks/scoring_overlap.py [--completions 16] [--tests 10] [--generation-seconds 10]

The rewards: ``code_execution`` (each completion's program run against ``--tests`` stdin/stdout tests in the
project's local sandbox) and ``math_equivalence`` (math-verify in its worker processes), composed as a run
composes them. The same batch is scored sequentially (``ComposedReward.concurrent = False``) and
concurrently, after one warm-up pass (the sandbox pool and the math workers started); the scores must be
identical. Printed: each reward's wall time alone, the CPU time of this process and its children while
scoring (psutil, the whole process tree), both walls, the target ``1.1 x max(longest single reward, CPU /
cores)``, and the share of a step spent waiting on rewards for a step whose generation takes
``--generation-seconds`` (a stated assumption, not a measurement: rewards wait after generation).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import time
from typing import Any

import psutil

from grpo_rewards.builtins.math_equivalence import math_equivalence
from grpo_rewards.compose import ComposedReward, compose
from grpo_rewards.sandbox.reward import make_code_execution

PROGRAM = "```python\nimport sys\nn = int(sys.stdin.readline())\nprint(sum(i * i for i in range({k})) + n)\n```"
# pairs of equal forms that math-verify has to simplify to compare (a wrong pairing for odd rows)
ANSWERS = ["\\frac{x^3-1}{x-1}", "x^2+x+1", "\\sin^2(x)+\\cos^2(x)+(x+1)^4", "x^4+4x^3+6x^2+4x+2",
           "\\frac{(x+2)^5}{x+2}", "(x+2)^4", "\\sqrt{18}+\\sqrt{8}", "5\\sqrt{2}"]


def batch(n: int, tests: int) -> tuple[list[str], dict[str, list[Any]]]:
    completions, info, answers = [], [], []
    for i in range(n):
        k = 1000 * (i % 5 + 1)
        wrong = i % 3 == 0  # some programs fail some tests
        cases = [{"input": f"{t}\n", "output": f"{sum(j * j for j in range(k)) + t + (1 if wrong and t % 2 else 0)}\n"}
                 for t in range(tests)]
        info.append(json.dumps({"language": "python", "test_cases": cases}))
        answer = ANSWERS[i % len(ANSWERS)]
        completions.append(PROGRAM.format(k=k) + f"\n\nSo the answer is $\\boxed{{{answer}}}$.")
        pair = i % len(ANSWERS) ^ 1  # the other form of the same value
        answers.append(ANSWERS[pair] if i % 4 != 3 else ANSWERS[(pair + 2) % len(ANSWERS)])
    return completions, {"verification_info": info, "answer": answers}


def cpu_seconds() -> float:
    me = psutil.Process()
    total = sum(me.cpu_times()[:4])  # with the children it has reaped
    for child in me.children(recursive=True):  # the live ones, with theirs
        with contextlib.suppress(psutil.Error):
            total += sum(child.cpu_times()[:4])
    return total


def timed(composed: ComposedReward, completions: list[str], columns: dict[str, Any]) -> tuple[float, float, Any]:
    c0, t0 = cpu_seconds(), time.perf_counter()
    scores = composed.score(completions, **columns)
    return time.perf_counter() - t0, cpu_seconds() - c0, scores


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--completions", type=int, default=16)
    ap.add_argument("--tests", type=int, default=10)
    ap.add_argument("--generation-seconds", type=float, default=10.0)
    args = ap.parse_args()
    completions, columns = batch(args.completions, args.tests)
    code = make_code_execution(tests_column="verification_info")
    maths = math_equivalence(workers=2)
    composed = compose({"code": code, "math": maths}, on_error="raise")
    composed.concurrent = False
    timed(composed, completions, columns)  # warm-up: the pools start
    # each reward alone, through the same isolation (its worker process already started)
    singles = {e.alias: timed(ComposedReward([e]), completions, columns)[0] for e in composed.entries}
    seq_wall, seq_cpu, seq_scores = timed(composed, completions, columns)
    composed.concurrent = True
    con_wall, con_cpu, con_scores = timed(composed, completions, columns)
    if (seq_scores.total, seq_scores.columns) != (con_scores.total, con_scores.columns):
        raise SystemExit("concurrent scores differ from sequential scores")
    cores = len(os.sched_getaffinity(0))
    target = 1.1 * max(max(singles.values()), seq_cpu / cores)
    gen = args.generation_seconds
    load = os.getloadavg()[0]
    print(f"{args.completions} completions, {args.tests} tests each; {cores} cores, load {load:.2f}")
    for alias, wall in singles.items():
        values = [v for v in con_scores.columns[alias] if v is not None]
        print(f"  {alias:<5} alone           {wall:7.3f} s   (mean score {sum(values) / max(len(values), 1):.3f})")
    print(f"  sequential wall        {seq_wall:7.3f} s   (CPU {seq_cpu:.3f} s)")
    print(f"  concurrent wall        {con_wall:7.3f} s   (CPU {con_cpu:.3f} s)   {seq_wall / con_wall:.2f}x faster")
    print(f"  target 1.1 x max(longest {max(singles.values()):.3f}, CPU/cores {seq_cpu / cores:.3f}) = {target:.3f} s: "
          f"{'met' if con_wall <= target else 'NOT met'}")
    print(f"  share of a step waiting on rewards (generation {gen:g} s, scored after it): "
          f"sequential {seq_wall / (gen + seq_wall):.1%}, concurrent {con_wall / (gen + con_wall):.1%}")
    print("  scores identical: yes")


if __name__ == "__main__":
    main()
