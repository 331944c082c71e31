"""``grpo eval MODEL --data SOURCE --rewards REWARDS.toml``: a model (full, merged, a LoRA adapter or a
training checkpoint's adapter) sampled on a dataset and scored by a rewards file; prints each reward's mean
with a bootstrap 95% interval over prompts and pass@k where the reward is binary, and writes every sample to
a JSONL (``--out``; atomic, an existing file refused without ``--overwrite``). Every input is checked (the
model folder, the data rows, the rewards file, the options, the outputs) before the model loads and before
anything is written; bad input is one line and exit 2. The work is in :mod:`grpo_core.evaluation`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from grpo_core.cli.argument_types import at_least
from grpo_core.data import load_rows
from grpo_core.run_folder.lock import check_free, hold
from grpo_core.run_folder.overlap import check_apart
from grpo_rewards.files import atomic_write, check_output
from grpo_rewards.reward_config import load_rewards

HELP = ("evaluate a model, adapter or checkpoint on a dataset with a rewards file: mean +- bootstrap 95%% CI per "
        "reward, pass@k, every sample to JSONL")


def add_parser(subparsers: Any) -> None:
    """Add ``grpo eval`` to the ``grpo`` command's subparsers."""
    add_arguments(subparsers.add_parser("eval", help=HELP))


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``grpo eval``'s options, added to its parser ``p``."""

    p.add_argument("model", metavar="MODEL", help="a model folder (full or merged), a LoRA adapter folder, a "
                                                  "training checkpoint holding adapter/, or a hub id")
    p.add_argument("--data", required=True, help="data source, as [data] source: a .jsonl/.json/.csv/.parquet "
                                                 "file, a hub dataset, or scheme:...")
    p.add_argument("--rewards", required=True, help="a rewards file ([rewards.*] tables; a run config works too)")
    p.add_argument("--out", default="eval_samples.jsonl", help="JSONL of every sample [eval_samples.jsonl]")
    p.add_argument("--overwrite", action="store_true", help="replace --out (and --summary) if they exist")
    p.add_argument("--summary", help="also write the summary as JSON to this file")
    p.add_argument("--base", help="the base model of an adapter (default: the adapter's base_model_name_or_path)")
    p.add_argument("--samples", type=at_least(1), default=1, metavar="N",
                   help="completions per prompt (1: greedy; more: sampled at --temperature) [1]")
    p.add_argument("--k", type=at_least(1), action="append", metavar="K",
                   help="pass@K for binary rewards (repeatable; each <= --samples) [1 and --samples]")
    p.add_argument("--temperature", type=float, default=1.0, help="sampling temperature for --samples > 1 [1.0]")
    p.add_argument("--max-new-tokens", type=at_least(1), default=256, metavar="N", help="[256]")
    p.add_argument("--split", default="train", help="[train]")
    p.add_argument("--subset", help="the hub dataset's config name")
    p.add_argument("--prompt-field", default="prompt", help="[prompt]")
    p.add_argument("--answer-field", help="the reference column (copied to `answer`, what rewards read)")
    p.add_argument("--system-prompt")
    p.add_argument("--no-chat-template", dest="chat_template", action="store_false",
                   help="feed the prompt as plain text instead of through the tokenizer's chat template")
    p.add_argument("--max-prompt-length", type=at_least(1), metavar="N",
                   help="longer prompts are dropped, with a warning [512]")
    p.add_argument("--limit", type=at_least(1), metavar="N", help="only the first N rows")
    p.add_argument("--backend", default="transformers", help="generation backend: transformers or vllm [transformers]")
    p.add_argument("--dtype", default="auto", help="auto | float32 | bfloat16 | float16 [auto]")
    p.add_argument("--seed", type=int, default=0, help="sampling and bootstrap seed [0]")
    p.set_defaults(func=cmd_eval)


def _check_outputs(args: argparse.Namespace) -> None:
    from grpo_core.evaluation.run import EvalError  # numpy: loaded when the command runs

    inputs = [args.rewards] + ([args.data] if Path(args.data).exists() else [])
    outs = [("--out", args.out)] + ([("--summary", args.summary)] if args.summary else [])
    if args.summary and Path(args.summary).expanduser().resolve() == Path(args.out).expanduser().resolve():
        raise EvalError("is the same file as --out", file="--summary")
    read = [(what, path, Path(path).expanduser().is_dir()) for what, path in
            (("the model", args.model), ("--base", args.base), ("--data", args.data), ("--rewards", args.rewards))
            if path and _exists(path)]
    for label, out in outs:
        check_apart(out, read, EvalError, label=label, folder=False)  # not into the model folder, symlinks resolved
        check_output(out, inputs, EvalError, label=label)
        check_free(out, folder=False, error=EvalError, key=label)
        if Path(out).expanduser().exists() and not args.overwrite:
            raise EvalError(f"{out} exists; pass --overwrite to replace it", file=label)


def _exists(path: str) -> bool:
    try:
        return Path(path).expanduser().exists()
    except OSError:  # a name too long: the checks say so
        return False


def cmd_eval(args: argparse.Namespace) -> int:
    from grpo_core.evaluation.run import EvalError  # numpy: loaded when the command runs

    ks = sorted(set(args.k or [1, args.samples]))
    if ks[-1] > args.samples:
        raise EvalError(f"pass@{ks[-1]} needs at least {ks[-1]} samples per prompt; raise --samples", file="--k")
    if args.samples > 1 and not args.temperature > 0:
        raise EvalError(f"must be > 0 to sample {args.samples} completions, got {args.temperature}",
                        file="--temperature")
    _check_outputs(args)
    out = Path(args.out).expanduser()
    if out.exists() and not out.is_file():  # a device (/dev/null): nothing to keep apart
        return _eval(args, ks)
    with hold(out, folder=False, error=EvalError, key="--out", command="grpo eval"):  # one eval writes it at a time
        return _eval(args, ks)


def _eval(args: argparse.Namespace, ks: list[int]) -> int:
    from grpo_core.evaluation.run import (  # numpy: loaded when the command runs
        eval_config,
        resolve_model,
        sample_and_score,
        summarize,
        summary_table,
    )
    model, adapter = resolve_model(args.model, args.base)
    rewards = load_rewards(args.rewards)
    data = {"source": args.data, "split": args.split, "prompt_field": args.prompt_field,
            "chat_template": args.chat_template}
    for key, value in (("max_prompt_length", args.max_prompt_length), ("subset", args.subset), ("answer_field", args.answer_field),
                       ("system_prompt", args.system_prompt), ("limit", args.limit)):
        if value is not None:
            data[key] = value
    cfg = eval_config(model, adapter, data, rewards, samples=args.samples, max_new_tokens=args.max_new_tokens,
                      temperature=args.temperature if args.samples > 1 else 1.0, backend=args.backend,
                      dtype=args.dtype, seed=args.seed)
    rows = load_rows(cfg.data)  # every row checked before the model loads
    records = sample_and_score(cfg, rows, args.samples)
    summary = summarize(records, cfg.rewards.aliases, args.samples, ks, seed=args.seed)
    summary.update({"model": model, "adapter": adapter, "data": cfg.data.source, "rewards_file": args.rewards})
    with atomic_write(args.out) as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
    if args.summary:
        with atomic_write(args.summary) as f:
            f.write(json.dumps(summary, indent=2) + "\n")
    print(summary_table(summary))
    print(f"wrote {len(records)} samples to {args.out}", file=sys.stderr)
    return 0
