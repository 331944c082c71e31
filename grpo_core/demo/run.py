"""``grpo demo``: build a tiny model, warm it up, measure, train with GRPO, measure again.

1. build     a character-level tokenizer trained on the task's text and a tiny Llama, saved with
             ``save_pretrained`` to ``<root>/base`` (``root`` = the parent of ``[model] name_or_path``)
2. warm up   load it back through ``models.load_model_and_tokenizer`` like any checkpoint, train on
             examples of the answer format until it gets a quarter of the warm-up problems right
             (see :class:`DemoSettings`), save to ``[model] name_or_path``
3. GRPO      ``Trainer(config).train()`` with the quickstart config (composed built-in rewards)
4. measure   held-out exact-match accuracy (greedy, on the ``test`` split) before and after GRPO,
             printed as percentages; the curves PNG and ``demo_result.json`` are written to the run
             folder. The run's own evaluation during training uses ``[data] eval_split``
             (``validation`` in the quickstart): settings are tuned there, never on ``test``.
5. control   (``control=True``, the default) the warm checkpoint trained on, supervised, on worked
             solutions of the warm-up problems for as long as GRPO ran, then measured on the same
             held-out problems: what the same time buys with full demonstrations, beside what GRPO
             reached from a reward on the final answer alone
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from grpo_core.config import load_config
from grpo_core.data import format_prompt, load_rows
from grpo_core.demo.evaluate import exact_match_accuracy
from grpo_core.demo.task import completion
from grpo_core.demo.tiny import TinySpec, build_tiny_model
from grpo_core.demo.warmup import warm_up
from grpo_core.generation.transformers_backend import TransformersBackend
from grpo_core.policy.models import load_model_and_tokenizer, save_model
from grpo_core.quiet import quiet_libraries
from grpo_core.run_folder.checkpoints import RunFolderError, check_run_dir, clear_run_dir
from grpo_core.run_folder.lock import hold
from grpo_core.trainer import Trainer
from grpo_rewards.files import atomic_write

QUICKSTART = Path(__file__).with_name("quickstart.toml")


@dataclass
class DemoSettings:
    """The parts of the demo that are not a GRPO run config: model size and the warm-up.

    The warm-up runs at a constant learning rate and stops as soon as greedy exact match on
    ``warmup_probe_size`` warm-up problems (never the held-out ones) reaches ``warmup_target``,
    checked every ``warmup_check_every`` steps (at most ``warmup_max_steps``): "start strong", but
    with plenty left for GRPO to learn, whatever the machine's arithmetic does to the exact curve.
    """

    hidden: int = 64
    layers: int = 2
    warmup_max_steps: int = 1500
    warmup_check_every: int = 50
    warmup_target: float = 0.25
    warmup_probe_size: int = 100
    warmup_batch_size: int = 32
    warmup_learning_rate: float = 2e-3
    seed: int = 0


def _say(text: str) -> None:
    print(text, flush=True)


def run_demo(
    config_path: str | None = None,
    overrides: list[str] | tuple[str, ...] = (),
    output_dir: str | None = None,
    threads: int | None = 1,
    settings: DemoSettings | None = None,
    overwrite: bool = False,
    control: bool = True,
) -> dict[str, Any]:
    settings = settings or DemoSettings()
    start = time.perf_counter()
    if threads:
        torch.set_num_threads(threads)
    overrides = list(overrides)
    if output_dir:
        overrides.append(f'logging.output_dir="{Path(output_dir) / "grpo"}"')
    cfg = load_config(config_path or str(QUICKSTART), overrides)
    quiet_libraries(cfg)

    # the demo writes its base and warm models beside the run folder: one demo at a time in its folder
    warm_dir = Path(output_dir) / "warm" if output_dir else Path(cfg.model.name_or_path)
    demo_dir = Path(output_dir) if output_dir else warm_dir.parent
    with hold(demo_dir, error=RunFolderError, key="--output-dir", command="grpo demo"):
        return _run_locked(cfg, settings, warm_dir, overwrite=overwrite, control=control, start=start)


def _run_locked(cfg: Any, settings: DemoSettings, warm_dir: Path, *, overwrite: bool, control: bool,
                start: float) -> dict[str, Any]:
    check_run_dir(cfg.logging.output_dir, overwrite=overwrite)  # an earlier run: refused now, not after the warm-up
    if overwrite:
        clear_run_dir(cfg.logging.output_dir)
    # the warm-started model is written where [model] name_or_path points (the folder need not exist yet)
    cfg = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, name_or_path=str(warm_dir)))
    base_dir = warm_dir.parent / "base"

    # 1. build: tokenizer + tiny model, from nothing
    warm_rows = load_rows(cfg.data, split="warmup")
    train_rows = load_rows(cfg.data)
    corpus = [r[cfg.data.prompt_field] + completion(r) for r in [*train_rows, *warm_rows]]
    spec = TinySpec(hidden=settings.hidden, layers=settings.layers, intermediate=3 * settings.hidden,
                    seed=settings.seed)
    build_tiny_model(base_dir, corpus, spec)

    # 2. warm up ("start strong"), loaded back like a real checkpoint
    base_cfg = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, name_or_path=str(base_dir)))
    torch.manual_seed(settings.seed)
    model, tokenizer = load_model_and_tokenizer(base_cfg)
    n_params = sum(p.numel() for p in model.parameters())
    _say(f"demo: tiny Llama with {n_params:,} parameters, vocabulary {len(tokenizer)} (built in {base_dir})")
    prompts = [format_prompt(r, cfg.data, tokenizer) for r in warm_rows]
    completions_sft = [completion(r) for r in warm_rows]
    probe = warm_rows[: settings.warmup_probe_size]
    probe_backend = TransformersBackend(cfg, model, tokenizer)
    generator = torch.Generator().manual_seed(settings.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings.warmup_learning_rate, weight_decay=0.0)
    steps, probe_acc, warm_seconds, sft = 0, 0.0, 0.0, {"sft_loss": float("nan")}
    while steps < settings.warmup_max_steps and probe_acc < settings.warmup_target:
        chunk = min(settings.warmup_check_every, settings.warmup_max_steps - steps)
        sft = warm_up(model, tokenizer, prompts, completions_sft, steps=chunk, batch_size=settings.warmup_batch_size,
                      learning_rate=settings.warmup_learning_rate, schedule="constant", generator=generator,
                      optimizer=optimizer)
        steps, warm_seconds = steps + chunk, warm_seconds + sft["sft_seconds"]
        probe_acc, _ = exact_match_accuracy(probe_backend, prompts[: len(probe)], [r["answer"] for r in probe])
    save_model(model, tokenizer, warm_dir)
    del model, probe_backend
    _say(f"demo: warm-up {steps} steps in {warm_seconds:.1f}s (loss {sft['sft_loss']:.3f}, "
         f"{100 * probe_acc:.0f}% of {len(probe)} warm-up problems right)")

    # 3. GRPO, measured before and after on held-out problems
    trainer = Trainer(cfg)
    eval_rows = load_rows(cfg.data, split="test")[: cfg.data.eval_size or None]
    eval_prompts = [format_prompt(r, cfg.data, trainer.tokenizer) for r in eval_rows]
    answers = [str(r["answer"]) for r in eval_rows]
    before, _ = exact_match_accuracy(trainer.backend, eval_prompts, answers)
    _say(f"demo: held-out exact match after warm-up: {100 * before:.1f}% ({len(eval_rows)} problems)")
    grpo_start = time.perf_counter()
    summary = trainer.train()
    grpo_seconds = time.perf_counter() - grpo_start
    after, completions = exact_match_accuracy(trainer.backend, eval_prompts, answers)
    _say(f"demo: held-out exact match: {100 * before:.1f}% after warm-up -> {100 * after:.1f}% after "
         f"{summary['step']} GRPO steps ({100 * (after - before):+.1f} points, {grpo_seconds:.0f}s)")
    del trainer
    supervised = (_supervised_control(cfg, settings, warm_dir, prompts, completions_sft, eval_prompts, answers,
                                      seconds=grpo_seconds) if control and not summary["interrupted"] else None)

    result = {
        "accuracy_before": before, "accuracy_after": after, "gain_points": 100 * (after - before),
        "eval_size": len(eval_rows), "grpo_steps": summary["step"], "grpo_seconds": grpo_seconds,
        "warmup_steps": steps, "warmup_seconds": warm_seconds, "total_seconds": time.perf_counter() - start,
        "plot": summary.get("plot"), "run_dir": summary["run_dir"], "interrupted": summary["interrupted"],
        "control": supervised,
        "examples": [{"prompt": p, "completion": c, "answer": a}
                     for p, c, a in list(zip(eval_prompts, completions, answers, strict=True))[:5]],
    }
    Path(summary["run_dir"]).mkdir(parents=True, exist_ok=True)

    with atomic_write(Path(summary["run_dir"]) / "demo_result.json") as fh:
        fh.write(json.dumps(result, indent=2) + "\n")
    if supervised:
        _say(f"demo: control, the warm checkpoint trained on worked solutions for the same {supervised['seconds']:.0f}s "
             f"({supervised['steps']} supervised steps): {100 * supervised['accuracy']:.1f}% held-out (GRPO saw only "
             "rewards on its own samples; the control was shown the worked solutions)")
    _say(f"demo: total {result['total_seconds']:.0f}s; curves: {result['plot']}")
    return result


def _supervised_control(cfg: Any, settings: DemoSettings, warm_dir: Path, prompts: list[str],
                        completions: list[str], eval_prompts: list[str], answers: list[str], *,
                        seconds: float) -> dict[str, Any]:
    """The warm checkpoint trained on worked solutions (the warm-up, continued) for ``seconds`` of training,
    then held-out exact match: what the time GRPO took buys with full supervision."""
    torch.manual_seed(settings.seed)
    model, tokenizer = load_model_and_tokenizer(cfg)  # [model] name_or_path is the warm checkpoint
    generator = torch.Generator().manual_seed(settings.seed + 1)
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings.warmup_learning_rate, weight_decay=0.0)
    steps, spent = 0, 0.0
    while spent < seconds and steps < 100 * settings.warmup_max_steps:
        sft = warm_up(model, tokenizer, prompts, completions, steps=10, batch_size=settings.warmup_batch_size,
                      learning_rate=settings.warmup_learning_rate, schedule="constant", generator=generator,
                      optimizer=optimizer)
        steps, spent = steps + 10, spent + sft["sft_seconds"]
    accuracy, _ = exact_match_accuracy(TransformersBackend(cfg, model, tokenizer), eval_prompts, answers)
    return {"accuracy": accuracy, "steps": steps, "seconds": spent, "checkpoint": str(warm_dir)}
