"""Where the time of scoring two slow rewards goes, in one run: rewards one after another vs concurrently, and a
real step's generation with scoring after it vs scoring during it.

    python benchmarks/scoring_overlap.py [--completions 16] [--tests 10] [--prompts 6] [--group 6]
                                         [--max-tokens 96] [--steps 2]

The rewards: ``code_execution`` (a program run against ``--tests`` stdin/stdout tests in the project's local
sandbox) and ``math_equivalence`` (math-verify in its worker processes), composed as a run composes them.

1. Scoring alone: a fixed batch of ``--completions`` is scored sequentially (``ComposedReward.concurrent =
   False``) and concurrently, after one warm-up pass (the sandbox pool and the math workers started); the
   scores must be identical. Printed: each reward's wall time alone, the CPU time of this process and its
   children while scoring (psutil, the whole process tree), both walls, and the target ``1.1 x max(longest
   single reward, CPU / cores)``.
2. A real step: ``Trainer.sample_and_score`` on a Llama-shaped random model over the demo's character
   vocabulary (completions end at EOS after a few to ~100 tokens, as a policy's do), ``--prompts`` x
   ``--group`` completions of at most ``--max-tokens``, each completion scored by both rewards (its row's
   program and boxed answer, followed by the generated text as a comment, so every completion runs the
   tests), with ``generation.score_during_generation`` off (scoring after generation) and on (each run of
   finished groups scored while the rest generates), alternating, the same seed each step. Printed per mode:
   generate+score wall, generation wall, the time spent waiting on rewards after generation ended, and its
   share of the step; the scores of the two modes must be identical.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import statistics
import tempfile
import time
from pathlib import Path
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


class RowText:
    """A reward scoring each completion as its row's text (``column``) followed by the completion as a comment:
    every completion does the row's full work whatever the random model wrote."""

    def __init__(self, inner: Any, column: str, comment: str):
        self.inner, self.column, self.comment = inner, column, comment
        self.__name__ = getattr(inner, "__name__", type(inner).__name__)

    def __call__(self, completions: list[str], **columns: Any) -> list[float | None]:
        texts = [f"{text}\n{self.comment} {c.replace(chr(10), ' ')}" for text, c in zip(columns[self.column],
                                                                                       completions, strict=True)]
        return self.inner(texts, **columns)


def scoring_alone(args: argparse.Namespace) -> None:
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
    print(f"1. scoring alone: {args.completions} completions, {args.tests} tests each; {cores} cores, "
          f"load {os.getloadavg()[0]:.2f}")
    for alias, wall in singles.items():
        values = [v for v in con_scores.columns[alias] if v is not None]
        print(f"  {alias:<5} alone           {wall:7.3f} s   (mean score {sum(values) / max(len(values), 1):.3f})")
    print(f"  sequential wall        {seq_wall:7.3f} s   (CPU {seq_cpu:.3f} s)")
    print(f"  concurrent wall        {con_wall:7.3f} s   (CPU {con_cpu:.3f} s)   {seq_wall / con_wall:.2f}x faster")
    print(f"  target 1.1 x max(longest {max(singles.values()):.3f}, CPU/cores {seq_cpu / cores:.3f}) = {target:.3f} s: "
          f"{'met' if con_wall <= target else 'NOT met'}")
    print("  scores identical: yes")


def step_trainer(args: argparse.Namespace, folder: Path) -> Any:
    """A Trainer on a random Llama over the demo's character vocabulary, its rows carrying a program, its tests
    and a boxed answer."""
    from grpo_core import Trainer, config_from_dict
    from grpo_core.demo.tiny import TinySpec, build_tiny_model

    completions, columns = batch(args.prompts, args.tests)
    rows = [{"prompt": f"{i}+{i + 1}=", "answer": columns["answer"][i], "verification_info": columns["verification_info"][i],
             "program": completions[i].split("\n\nSo")[0], "solution": completions[i].split("\n\n", 1)[1]}
            for i in range(args.prompts)]
    data = folder / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    corpus = [r["prompt"] + "12 plus 7 is 19." for r in rows]
    model = build_tiny_model(folder / "model", corpus, TinySpec(hidden=192, layers=3, heads=4, kv_heads=2,
                                                                intermediate=576, max_positions=512))
    code = RowText(make_code_execution(tests_column="verification_info"), "program", "#")
    # a verification that times out under load would differ between the two modes: a generous per-row limit
    maths = RowText(math_equivalence(workers=2, timeout_seconds=60.0), "solution", "%")
    return Trainer(config_from_dict({
        "model": {"name_or_path": str(model), "dtype": "float32", "gradient_checkpointing": False},
        "data": {"source": str(data), "chat_template": False, "shuffle": False},
        "generation": {"num_generations": args.group, "max_completion_length": args.max_tokens},
        "grpo": {"prompts_per_step": args.prompts, "max_steps": 1},
        "logging": {"output_dir": str(folder / "run"), "progress": False, "plot": False},
        "rewards": compose({"code": code, "math": maths}, on_error="raise"),
    }))


def real_step(args: argparse.Namespace) -> None:
    import torch

    with tempfile.TemporaryDirectory() as tmp:
        trainer = step_trainer(args, Path(tmp))
        generate, marks = trainer.backend.generate, {}

        def timed_generate(*a: Any, **kw: Any) -> Any:
            marks["start"] = time.perf_counter()
            out = generate(*a, **kw)
            marks["end"] = time.perf_counter()
            return out

        trainer.backend.generate = timed_generate
        rows = trainer.next_rows()
        results: dict[bool, list[tuple[float, float, float]]] = {False: [], True: []}
        scores: dict[bool, Any] = {}
        for step in range(args.steps + 1):  # step 0 warms up (the sandbox pool, the math workers)
            for during in (False, True) if step % 2 else (True, False):
                trainer.cfg.generation.score_during_generation = during
                torch.manual_seed(step)
                generated, total, columns = trainer.sample_and_score(rows)
                lengths = generated.completion_mask.sum(1).tolist()
                done = time.perf_counter()
                if step:
                    results[during].append((done - marks["start"], marks["end"] - marks["start"], done - marks["end"]))
                print(f"  (step {step}, {'during' if during else 'after '}: {done - marks['start']:.2f} s)", flush=True)
                scores.setdefault(step, {})[during] = ([None if math.isnan(t) else t for t in total.tolist()], columns)
        for step, pair in scores.items():
            if pair[False] != pair[True]:
                raise SystemExit(f"step {step}: scores during generation differ from scores after it")
    n = args.prompts * args.group
    print(f"2. a real step: {args.prompts} prompts x {args.group} completions of <= {args.max_tokens} tokens (a random "
          f"3-layer, 192-wide Llama; last step's lengths: mean {statistics.mean(lengths):.0f}, max {max(lengths)}), "
          f"{args.tests} tests each; median of {args.steps} steps, load {os.getloadavg()[0]:.2f}")
    for during, label in ((False, "scored after generation "), (True, "scored during generation")):
        wall, gen, wait = (statistics.median(r[i] for r in results[during]) for i in range(3))
        print(f"  {label}  step {wall:7.3f} s   generation {gen:7.3f} s   waiting on rewards after it "
              f"{wait:7.3f} s   ({wait / wall:.1%} of the step)")
    print(f"  scores identical ({n} completions x {args.steps + 1} steps): yes")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--completions", type=int, default=16)
    ap.add_argument("--tests", type=int, default=10)
    ap.add_argument("--prompts", type=int, default=6)
    ap.add_argument("--group", type=int, default=6)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--steps", type=int, default=2)
    args = ap.parse_args()
    scoring_alone(args)
    real_step(args)


if __name__ == "__main__":
    main()
