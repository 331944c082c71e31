"""The model card of a trained run: ``README.md`` beside the saved model, written with huggingface_hub's
``ModelCard`` / ``ModelCardData``.

``write_model_card(model_dir, cfg, metrics, curves=None) -> Path``: the card's metadata (base model, datasets,
library, tags) and text: the base model and how it was trained (full, LoRA, QLoRA), the data, each reward with
its weight, the final metrics (each reward's mean, the held-out ones), the curves image (copied beside the card
as ``curves.png``) and the resolved run config as TOML-like JSON. No secret goes in: ``hub_token`` is hidden by
``RunConfig.to_dict``.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

from grpo_core.config import looks_local, repo_id_problem
from grpo_core.run_folder.layout import CURVES_FILE
from grpo_rewards.files import atomic_write

CARD_FILE = "README.md"
# the metrics a card lists first, when the run logged them
HEADLINE = ("reward/mean", "reward/std", "eval/reward/mean", "completion_length/mean", "kl", "loss", "step")


def _hub_id(name: str) -> str | None:
    """``name`` when it reads as a Hub id (``org/name``), not a local path: what ``base_model`` may hold."""
    return None if looks_local(name) or Path(name).expanduser().exists() or repo_id_problem(name) else name


def _number(value: Any) -> str:
    if isinstance(value, float):
        return "nan" if not math.isfinite(value) else f"{value:.6g}"
    return str(value)


def card_data(cfg: Any) -> Any:
    """The card's YAML metadata: base model and dataset (when they are Hub ids), library, tags."""
    from huggingface_hub import ModelCardData

    base = _hub_id(cfg.model.name_or_path)
    dataset = cfg.data.source if ":" not in cfg.data.source and _hub_id(cfg.data.source) else None
    tags = ["grpo", "grpo-toolkit", "reinforcement-learning"] + (["lora"] if cfg.lora.enabled else [])
    return ModelCardData(base_model=base, datasets=[dataset] if dataset else None,
                         library_name="peft" if cfg.lora.enabled else "transformers", tags=tags,
                         pipeline_tag="text-generation")


def card_text(cfg: Any, metrics: dict[str, Any], curves: bool, repo_id: str | None = None) -> str:
    """The card's Markdown body (see the module docs)."""
    how = "QLoRA (4-bit)" if cfg.quantization.load_in_4bit else "LoRA" if cfg.lora.enabled else "full fine-tuning"
    title = repo_id or Path(cfg.logging.output_dir).name
    lines = [f"# {title}", "",
             f"This model was trained from `{cfg.model.name_or_path}` with GRPO ({how}) by grpo-toolkit: "
             f"{cfg.grpo.max_steps} steps of {cfg.grpo.prompts_per_step} prompts x "
             f"{cfg.generation.num_generations} completions, loss `{cfg.grpo.loss_type}`, "
             f"learning rate {cfg.grpo.learning_rate:g}, beta {cfg.grpo.beta:g}.", "",
             "## Data", "",
             f"`{cfg.data.source}` (" + (f"config `{cfg.data.subset}`, " if cfg.data.subset else "")
             + f"split `{cfg.data.split}`, prompt column `{cfg.data.prompt_field}`"
             + (f", {cfg.data.limit} rows" if cfg.data.limit else "") + ")"
             + (f"; held out: `{cfg.data.eval_source}`" if cfg.data.eval_source else
                f"; {cfg.data.eval_size} rows held out" if cfg.data.eval_size else "") + ".", "",
             "## Rewards", "", "| reward | uses | weight | final mean |", "| --- | --- | --- | --- |"]
    for entry in cfg.rewards.entries:
        final = metrics.get(f"rewards/{entry.alias}")
        lines.append(f"| {entry.alias} | `{entry.use}` | {entry.weight:g} | "
                     f"{_number(final) if final is not None else ''} |")
    shown = [k for k in HEADLINE if k in metrics] + sorted(k for k in metrics if k.startswith("eval/")
                                                          and k not in HEADLINE)
    if shown:
        lines += ["", "## Final metrics", "", "| metric | value |", "| --- | --- |"]
        lines += [f"| {k} | {_number(metrics[k])} |" for k in dict.fromkeys(shown)]
    if curves:
        lines += ["", "## Training curves", "", f"![training curves]({CURVES_FILE})"]
    lines += ["", "## Run config", "", "```json", json.dumps(cfg.to_dict(), indent=2, default=str), "```", ""]
    return "\n".join(lines)


def write_model_card(model_dir: str | Path, cfg: Any, metrics: dict[str, Any], curves: str | Path | None = None,
                     repo_id: str | None = None) -> Path:
    """Write ``model_dir/README.md`` (and ``model_dir/curves.png`` from ``curves`` when it exists); returns
    the card's path. ``metrics``: the final step's (non-numbers are left out)."""
    from huggingface_hub import ModelCard

    model_dir = Path(model_dir)
    numbers = {k: v for k, v in metrics.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    has_curves = curves is not None and Path(curves).is_file()
    if has_curves:
        shutil.copyfile(curves, model_dir / CURVES_FILE)
    card = ModelCard(f"---\n{card_data(cfg).to_yaml()}\n---\n\n{card_text(cfg, numbers, has_curves, repo_id)}")
    path = model_dir / CARD_FILE
    with atomic_write(path) as fh:
        fh.write(str(card))
    return path
