"""One arm of the tool example: build the tiny tool model, warm it up, train it with GRPO, read its held-out curve.

``run_tool_arm(config_path, overrides, out_dir, settings)`` runs ``examples/tool_calculator.toml`` (or another
config) as one arm: with its ``[tools]`` (the calculator) or, with ``tools.names=[]``, the no-tool control.

1. build    the tiny Llama and its tokenizer with a chat template that writes tool calls
            (:mod:`grpo_core.demo.tool_model`), from ``settings.seed``; both arms of a seed start from the same
            weights
2. warm up  supervised steps on the ``warmup`` split: the tool arm on conversations calling the calculator,
            with the row's own product in a share ``settings.correct_rate`` of them and a slip in the rest, the
            answer always read back from the tool (:func:`grpo_core.demo.tool_task.warmup_expressions`), until
            the greedy model reads the tool's answer back in ``settings.readback_target`` of
            ``settings.warmup_probe_size`` warm-up conversations (checked every ``warmup_check_every`` steps,
            at most ``warmup_max_steps``): the format and the reading learnt, the slip too, as the demo's
            warm-up stops at a target rather than a step count (where a seed learns to copy moves). The
            control, exactly ``settings.warmup_steps`` steps (give it its tool arm's count) on the right answer
            of every row, written at once. Saved to ``<out_dir>/warm``
3. GRPO     ``Trainer(config).train()`` from the warm model, its held-out evaluation (``[data] eval_split``,
            greedy, ``eval_on_start``) every ``[logging] eval_every`` steps: the curve
4. result   the curve (step, held-out exact match from ``eval/rewards/<correct>``), the warm-up's and GRPO's
            seconds, the run folder

``on_trainer`` is called with the trainer before it trains (a benchmark's meter goes there).
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from grpo_core.config import load_config
from grpo_core.data import format_prompt, load_rows
from grpo_core.demo.tiny import TinySpec
from grpo_core.demo.tool_model import answer_demonstration, build_tool_model, tool_demonstration
from grpo_core.demo.tool_task import warmup_expressions
from grpo_core.demo.warmup import warm_up
from grpo_core.generation.tools.toolset import ToolSet
from grpo_core.generation.transformers_backend import TransformersBackend
from grpo_core.policy.models import load_model_and_tokenizer, save_model
from grpo_core.quiet import quiet_libraries
from grpo_core.run_folder.layout import METRICS_FILE, read_jsonl
from grpo_core.trainer import Trainer
from grpo_rewards.plugins import get_registry


@dataclass
class ToolExampleSettings:
    """The parts of the tool example that are not a GRPO run config: the model's size and the warm-up."""

    hidden: int = 64
    layers: int = 2
    max_positions: int = 128
    warmup_steps: int = 500  # the control's; the tool arm's stop at readback_target (module docs)
    warmup_max_steps: int = 1500
    warmup_check_every: int = 100
    warmup_probe_size: int = 100
    readback_target: float = 0.75
    warmup_batch_size: int = 32
    warmup_learning_rate: float = 1e-3  # at 3e-3 one seed in three sat at a loss of 0.3, never reading back (docs/tools.md)
    correct_rate: float = 0.2  # share of the tool warm-up's calls made with the row's own product
    correct_alias: str = "correct"  # the [rewards] alias whose eval mean is held-out exact match
    seed: int = 0


def run_tool_arm(config_path: str | Path, overrides: list[str] | tuple[str, ...], out_dir: str | Path,
                 settings: ToolExampleSettings | None = None,
                 on_trainer: Callable[[Trainer], None] | None = None) -> dict[str, Any]:
    """Build, warm up, train and measure one arm (module docs)."""
    settings = settings or ToolExampleSettings()
    out = Path(out_dir)
    warm_dir = out / "warm"
    cfg = load_config(str(config_path), [*overrides, f'logging.output_dir="{out / "grpo"}"'])
    quiet_libraries(cfg)
    # the warm model is written where [model] name_or_path points (the folder need not exist yet)
    cfg = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, name_or_path=str(warm_dir)))
    tools = bool(cfg.tools.names)

    # 1. build, from the seed: the same weights for both arms
    warm_rows = load_rows(cfg.data, split="warmup")
    train_rows = load_rows(cfg.data)
    spec = TinySpec(hidden=settings.hidden, layers=settings.layers, intermediate=3 * settings.hidden,
                    max_positions=settings.max_positions, seed=settings.seed)
    base_dir = build_tool_model(out / "base", [r[cfg.data.prompt_field] for r in [*train_rows, *warm_rows]], spec)

    # 2. warm up: the tool arm to the readback target, the control as many steps as its tool arm took
    base_cfg = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, name_or_path=str(base_dir)))
    torch.manual_seed(settings.seed)
    model, tokenizer = load_model_and_tokenizer(base_cfg)
    registry = get_registry()
    schemas = ToolSet([registry.get("tools", n) for n in cfg.tools.names]).schemas if tools else None
    prompts = [format_prompt(r, cfg.data, tokenizer, schemas) for r in warm_rows]
    generator = torch.Generator().manual_seed(settings.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings.warmup_learning_rate, weight_decay=0.0)

    def warm(demonstrations: list[Any], steps: int) -> dict[str, float]:
        return warm_up(model, tokenizer, prompts, demonstrations, steps=steps, batch_size=settings.warmup_batch_size,
                       learning_rate=settings.warmup_learning_rate, schedule="constant", generator=generator,
                       optimizer=optimizer)

    steps, seconds, readback = 0, 0.0, None
    if tools:
        expressions = warmup_expressions(warm_rows, settings.correct_rate, settings.seed)
        demonstrations = [tool_demonstration(tokenizer, e) for e in expressions]
        probe = TransformersBackend(cfg, model, tokenizer)
        readback = 0.0
        while steps < settings.warmup_max_steps and readback < settings.readback_target:
            sft = warm(demonstrations, min(settings.warmup_check_every, settings.warmup_max_steps - steps))
            steps, seconds = steps + int(sft["sft_steps"]), seconds + sft["sft_seconds"]
            batch = probe.generate(prompts[: settings.warmup_probe_size], 1, greedy=True)
            readback = reads_back(batch.conversations or [])
        del probe
    else:
        sft = warm([answer_demonstration(str(r[cfg.data.answer_field])) for r in warm_rows], settings.warmup_steps)
        steps, seconds = settings.warmup_steps, sft["sft_seconds"]
    save_model(model, tokenizer, warm_dir)

    # 3. GRPO from the warm model, evaluated on held-out rows as it trains
    trainer = Trainer(cfg)
    if on_trainer is not None:
        on_trainer(trainer)
    start = time.perf_counter()
    summary = trainer.train()
    grpo_seconds = time.perf_counter() - start

    # 4. the curve, from the run's own evaluations
    key = f"eval/rewards/{settings.correct_alias}"
    value = cfg.rewards.score(["<answer>1</answer>"], answer=["1"]).columns[settings.correct_alias][0]  # a right one
    records = read_jsonl(Path(summary["run_dir"]) / METRICS_FILE)
    curve = [(int(r["step"]), r[key] / value) for r in records if key in r]
    return {"tools": tools, "seed": settings.seed, "curve": curve, "warmup_steps": steps, "warmup_seconds": seconds,
            "warmup_readback": readback, "grpo_seconds": grpo_seconds, "run_dir": summary["run_dir"],
            "steps": summary["step"]}


def reads_back(conversations: list[list[dict[str, Any]]]) -> float:
    """Share of ``conversations`` whose last model turn's ``<answer>`` is the last tool answer it read."""
    def ok(conversation: list[dict[str, Any]]) -> bool:
        replies = [m["content"] for m in conversation if m["role"] == "tool"]
        last = conversation[-1] if conversation and conversation[-1]["role"] == "assistant" else {"content": ""}
        found = re.search(r"<answer>(.*?)</answer>", last["content"] or "")
        return bool(replies) and found is not None and found.group(1) == replies[-1]

    return sum(map(ok, conversations)) / max(1, len(conversations))
