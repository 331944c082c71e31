"""Throughput of every registered reward on a batch of GSM8K-style completions.

    python benchmarks/rewards_throughput.py [--data PATH] [--n 10000] [--repeat 3]
    python benchmarks/rewards_throughput.py --base /path/to/parent-checkout --data PATH [--repeat 5]

Builds ``--n`` completions from GSM8K training solutions (``--data``, default
``../shared/data/gsm8k/train.jsonl`` next to the repository; synthetic solutions
when the file is absent) in a realistic mix: Unsloth-style ``<reasoning>``/``<answer>``
(correct, near-miss, wrong), raw GSM8K ``####`` solutions, ``\\boxed{}``, ``Answer:``
lines, chat-message lists and junk. The ``answer`` column holds the *full* reference
solutions, so rewards also extract the reference's ``####`` answer.

Every reward in ``grpo_rewards.get_registry()`` is built with its defaults (plus a
few parameter variants of the built-ins) and scores the whole batch; the table gives
completions per second (best of ``--repeat`` runs), each reward's speed relative to
``exact_match`` measured in the same run, the mean score and the share of ``None``.
Slow rewards (``math_equivalence``) run once, in a separate table.

``--base CHECKOUT`` compares this checkout with another (e.g. ``git archive`` of the parent commit
unpacked in a folder) side by side in one run: two worker processes, one importing the rewards from
each checkout (``PYTHONPATH``), build the same batch; every reward both sides have is then timed
``--repeat`` times on each side, alternating which goes first, so that load drifts hit both alike.
The table gives each side's best wall-clock and CPU seconds per 1,000 completions and the ratios
this/base (above 1: this checkout is slower); the mean scores of both sides are printed beside them.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO / ".." / "shared" / "data" / "gsm8k" / "train.jsonl"
SLOW = {"math_equivalence"}
VARIANTS = [  # (label, reward name, parameters): built-in modes worth timing on their own
    ("numeric_proximity[tiered]", "numeric_proximity", {"mode": "tiered"}),
    ("xml_count[lenient]", "xml_count", {"mode": "lenient"}),
    ("exact_match[regex]", "exact_match", {"extract": "regex", "pattern": r"<answer>(.*?)</answer>"}),
]


def load_solutions(path: Path, rng: random.Random) -> tuple[list[dict[str, str]], str]:
    if path.exists():
        rows = [json.loads(line) for line in path.open(encoding="utf-8") if line.strip()]
        return [{"question": r["question"], "answer": r["answer"]} for r in rows], str(path.resolve())
    rows = []
    for _ in range(2000):
        a, b, c = rng.randint(2, 500), rng.randint(2, 500), rng.randint(2, 20)
        total = (a + b) * c
        rows.append({
            "question": f"Sam has {a} red and {b} blue marbles in each of {c} bags. How many marbles?",
            "answer": f"Each bag has {a} + {b} = <<{a}+{b}={a + b}>>{a + b} marbles.\n"
                      f"In all {a + b} * {c} = <<{a + b}*{c}={total}>>{total} marbles.\n#### {total:,}",
        })
    return rows, "synthetic (GSM8K file not found)"


def make_completion(row: dict[str, str], rng: random.Random) -> Any:
    solution = row["answer"]
    work, _, final = solution.rpartition("####")
    work, final = work.strip(), final.strip()
    try:
        number = int(final.replace(",", ""))
    except ValueError:
        number = 0
    near, wrong = str(round(number * 1.05) or 1), str(number + rng.randint(1, 50))
    style = rng.random()
    if style < 0.30:
        text = f"<reasoning>\n{work}\n</reasoning>\n<answer>\n{final}\n</answer>\n"
    elif style < 0.40:
        text = f"<reasoning>\n{work}\n</reasoning>\n<answer>\n{rng.choice([near, wrong])}\n</answer>\n"
    elif style < 0.55:
        text = solution  # the GSM8K solution itself: "... #### 72"
    elif style < 0.65:
        text = f"{work}\nSo the answer is $\\boxed{{{final}}}$."
    elif style < 0.75:
        text = f"{work}\nAnswer: {rng.choice([final, wrong])}"
    elif style < 0.90:
        text = [{"role": "assistant", "content": f"<think>\n{work}\n</think>\n<answer>{final}</answer>"}]
    elif style < 0.95:
        text = f"{work}\nI think it's about {wrong} or so."
    else:
        text = "".join(rng.choice("abc <>/#{}\\\n0123456789") for _ in range(rng.randint(0, 300)))
    return text


def build_batch(n: int, data: Path, seed: int) -> tuple[list[Any], dict[str, list[Any]], str]:
    rng = random.Random(seed)
    rows, source = load_solutions(data, rng)
    picked = [rows[rng.randrange(len(rows))] for _ in range(n)]
    completions = [make_completion(r, rng) for r in picked]
    columns = {"answer": [r["answer"] for r in picked], "prompts": [r["question"] for r in picked]}
    return completions, columns, source


def time_reward(fn: Any, completions: list[Any], columns: dict[str, list[Any]], repeat: int) -> tuple[float, list]:
    best, scores = math.inf, []
    for _ in range(repeat):
        start = time.perf_counter()
        scores = fn(completions, **columns)
        best = min(best, time.perf_counter() - start)
    return best, scores


def describe(scores: list[float | None]) -> tuple[float, float]:
    present = [s for s in scores if s is not None]
    mean = statistics.fmean(present) if present else math.nan
    return mean, 1 - len(present) / len(scores)


def build_jobs(columns: dict[str, list[Any]]) -> tuple[dict[str, Any], list[str]]:
    """Every registered reward (and the variants) built with its parameters: ``(label -> function, skipped)``."""
    from grpo_rewards import get_registry

    registry = get_registry()
    for problem in registry.problems:
        print(f"warning: {problem}", file=sys.stderr)
    jobs = [(name, name, {}) for name in sorted(registry.rewards)]
    jobs += [v for v in VARIANTS if v[1] in registry.rewards]
    built: dict[str, Any] = {}
    skipped: list[str] = []
    for label, name, params in jobs:
        spec = registry.rewards[name]
        missing = [c for c in spec.columns if c not in columns]
        if missing:
            skipped.append(f"{label}: needs column(s) {', '.join(missing)}")
            continue
        try:
            built[label] = spec.build(**params)
        except Exception as exc:  # a reward that cannot be built is reported, not fatal
            skipped.append(f"{label}: {type(exc).__name__}: {exc}")
    return built, skipped


def worker(args: argparse.Namespace) -> int:
    """One side of ``--base``: build the batch and the rewards, then time one run per label read on stdin."""
    channel = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    sys.stdout = sys.stderr  # a reward's prints never reach the channel
    completions, columns, source = build_batch(args.n, args.data, args.seed)
    built, skipped = build_jobs(columns)
    print(json.dumps({"source": source, "labels": sorted(built), "skipped": skipped}), file=channel)
    for line in sys.stdin:
        label = line.strip()
        try:
            wall, cpu = time.perf_counter(), time.process_time()
            scores = built[label](completions, **columns)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            mean, none_share = describe(scores)
            reply: dict[str, Any] = {"wall": wall, "cpu": cpu, "mean": mean, "none": none_share}
        except Exception as exc:  # reported to the controller, which leaves the reward out
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        print(json.dumps(reply), file=channel)
    return 0


class Side:
    """A worker process importing the rewards from one checkout."""

    def __init__(self, checkout: Path, args: argparse.Namespace) -> None:
        command = [sys.executable, str(Path(__file__).resolve()), "--worker", "--data", str(args.data),
                   "--n", str(args.n), "--seed", str(args.seed)]
        env = {**os.environ, "PYTHONPATH": str(checkout)}
        self.process = subprocess.Popen(command, env=env, cwd=checkout, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        text=True, bufsize=1)
        self.hello = self._read()

    def _read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"a benchmark worker exited (code {self.process.wait()}); see its messages above")
        return json.loads(line)

    def time(self, label: str) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(label + "\n")
        self.process.stdin.flush()
        return self._read()

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait()


def side_by_side(args: argparse.Namespace) -> int:
    """``--base``: every reward both checkouts have, timed alternately on each (module docs)."""
    sides = {"base": Side(args.base.resolve(), args), "this": Side(REPO, args)}
    labels = [label for label in sides["this"].hello["labels"] if label in sides["base"].hello["labels"]]
    if args.only:
        labels = [label for label in labels if label in args.only.split(",")]
    load = os.getloadavg()
    print(f"{args.n} completions from {sides['this'].hello['source']}; base {args.base.resolve()}; "
          f"this {REPO}; {args.repeat} runs per side, best reported; python {sys.version.split()[0]}")
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (start); {os.cpu_count()} cores\n")
    header = (f"{'reward':<28}{'base ms/1k':>11}{'this ms/1k':>11}{'wall x':>8}"
              f"{'base cpu':>10}{'this cpu':>10}{'cpu x':>8}{'mean base':>11}{'mean this':>11}")
    print(header + "\n" + "-" * len(header), flush=True)
    per_k = 1000 / args.n
    for label in labels:
        runs: dict[str, list[dict[str, Any]]] = {"base": [], "this": []}
        for i in range(1 if label in SLOW else args.repeat):
            for side in ("base", "this") if i % 2 == 0 else ("this", "base"):
                runs[side].append(sides[side].time(label))
        errors = [r["error"] for rs in runs.values() for r in rs if "error" in r]
        if errors:
            print(f"{label:<28}not timed: {errors[0]}")
            continue
        wall = {side: min(r["wall"] for r in rs) * 1000 * per_k for side, rs in runs.items()}
        cpu = {side: min(r["cpu"] for r in rs) * 1000 * per_k for side, rs in runs.items()}
        print(f"{label:<28}{wall['base']:>11.2f}{wall['this']:>11.2f}{wall['this'] / wall['base']:>7.2f}x"
              f"{cpu['base']:>10.2f}{cpu['this']:>10.2f}{cpu['this'] / max(cpu['base'], 1e-9):>7.2f}x"
              f"{runs['base'][0]['mean']:>11.3f}{runs['this'][0]['mean']:>11.3f}", flush=True)
    load = os.getloadavg()
    print(f"\nload average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (end)")
    for side, process in sides.items():
        for line in process.hello["skipped"]:
            print(f"skipped ({side}) {line}")
        process.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="GSM8K train.jsonl (question, answer)")
    parser.add_argument("--n", type=int, default=10_000, help="completions in the batch")
    parser.add_argument("--repeat", type=int, default=3, help="runs per fast reward (best is reported)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-slow", action="store_true", help="do not run math_equivalence")
    parser.add_argument("--base", type=Path, help="a checkout to compare with, side by side (module docs)")
    parser.add_argument("--only", help="with --base: the rewards to time, comma-separated (default: all)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args)
    if args.base is not None:
        return side_by_side(args)

    completions, columns, source = build_batch(args.n, args.data, args.seed)
    built, skipped = build_jobs(columns)
    print(f"{args.n} completions from {source}; best of {args.repeat} runs; python {sys.version.split()[0]}\n")

    results: list[tuple[str, float, float, float]] = []
    slow: list[tuple[str, float, float, float]] = []
    for label, fn in built.items():
        if label in SLOW and args.skip_slow:
            skipped.append(f"{label}: --skip-slow")
            continue
        try:
            seconds, scores = time_reward(fn, completions, columns, 1 if label in SLOW else args.repeat)
        except Exception as exc:  # a reward that cannot run on this batch is reported, not fatal
            skipped.append(f"{label}: {type(exc).__name__}: {exc}")
            continue
        mean, none_share = describe(scores)
        (slow if label in SLOW else results).append((label, seconds, mean, none_share))

    base = next((s for label, s, _, _ in results if label == "exact_match"), None)
    header = f"{'reward':<28}{'completions/s':>15}{'seconds':>10}{'vs exact_match':>16}{'mean':>10}{'None':>8}"
    print(header + "\n" + "-" * len(header))
    for label, seconds, mean, none_share in results:
        ratio = f"{base / seconds:.2f}x" if base else "-"
        print(f"{label:<28}{args.n / seconds:>15,.0f}{seconds:>10.3f}{ratio:>16}{mean:>10.3f}{none_share:>8.1%}")
    if slow:
        print("\nslow rewards (one run):")
        for label, seconds, mean, none_share in slow:
            ratio = f"{base / seconds:.4f}x" if base else "-"
            print(f"{label:<28}{args.n / seconds:>15,.0f}{seconds:>10.3f}{ratio:>16}{mean:>10.3f}{none_share:>8.1%}")
    for line in skipped:
        print(f"skipped {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
