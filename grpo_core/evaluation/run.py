"""``grpo eval``'s work: which model a path names, the run config it evaluates under, sampling every prompt,
scoring with a rewards file, and the summary (per-reward mean with a bootstrap interval, pass@k).

A model is named by one of:
  * a folder with ``config.json``: a full or merged model (``model/`` of a full fine-tune, ``merged/``);
  * a folder with ``adapter_config.json``: a LoRA adapter, on its ``base_model_name_or_path`` (or ``--base``);
  * a training checkpoint with LoRA (``checkpoints/step_N`` holding ``adapter/``): that adapter;
  * anything else: a hub id.
A full fine-tune's training checkpoint holds only the trained tensors, not a loadable model: the run's
``model/`` folder is what evaluates it (refused with that hint).

Generation goes through the run config's generation backend (``transformers``, or ``vllm`` where installed:
the same ``build_backend`` the trainer uses). One sample per prompt is greedy; more are sampled at
``temperature``. Rewards get what they get in training (``prompts``, ``completion_ids``, ``trainer_state``,
every column by keyword).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from grpo_core.adapter import is_adapter_folder, read_adapter_config
from grpo_core.config import config_from_dict
from grpo_core.context import TrainerState
from grpo_core.data import format_prompt
from grpo_core.evaluation.stats import bootstrap_interval, is_binary, mean_pass_at_k
from grpo_core.generation.tools.facts import conversation_inputs
from grpo_core.policy.models import load_model_and_tokenizer
from grpo_rewards.errors import UserError


class EvalError(UserError, ValueError):
    """Bad ``grpo eval`` input (one line per problem, exit 2)."""


def resolve_model(path: str, base: str | None = None) -> tuple[str, str | None]:
    """``(name_or_path, adapter)`` for what ``path`` names (see the module docs)."""
    folder = Path(path).expanduser()
    if not folder.is_dir():
        if path.startswith(("/", "./", "../", "~")):
            raise EvalError(f"folder not found: {path}", file="MODEL")
        if base:
            raise EvalError("--base is for an adapter; MODEL is a hub id here", file="--base")
        return path, None
    adapter = folder if is_adapter_folder(folder) else folder / "adapter" if is_adapter_folder(folder / "adapter") \
        else None
    if adapter is not None:
        try:
            named = read_adapter_config(adapter).get("base_model_name_or_path")
        except ValueError as exc:
            raise EvalError(str(exc), file="MODEL") from None
        if not (base or named):
            raise EvalError(f"{adapter} names no base model; give it with --base", file="MODEL")
        return str(base or named), str(adapter)
    if base:
        raise EvalError(f"{path} is a model, not an adapter: --base does not apply", file="--base")
    if (folder / "config.json").is_file():
        return str(folder), None
    if (folder / "weights.safetensors").is_file():
        raise EvalError(f"{path} is a full fine-tune's training checkpoint (its trained tensors only): evaluate "
                        "the run's model/ folder", file="MODEL")
    raise EvalError(f"{path} holds no model (config.json), adapter (adapter_config.json) or checkpoint", file="MODEL")


def eval_config(model: str, adapter: str | None, data: dict[str, Any], rewards: Any, *, samples: int,
                max_new_tokens: int, temperature: float, backend: str, dtype: str, seed: int) -> Any:
    """The run config an evaluation runs under (validated as a TOML file is; problems name ``grpo eval``)."""
    return config_from_dict({
        "model": {"name_or_path": model, **({"adapter": adapter} if adapter else {}), "dtype": dtype,
                  "gradient_checkpointing": False},
        "data": data,
        "generation": {"backend": backend, "num_generations": max(2, samples),
                       "max_completion_length": max_new_tokens, "temperature": temperature},
        "grpo": {"seed": seed},
        "rewards": rewards,
    }, path="grpo eval")


def _score(cfg: Any, rows: list[dict[str, Any]], batch: Any, k: int) -> tuple[list[float | None], dict[str, list]]:
    """Each completion's total and each reward's column, with the columns the trainer gives rewards."""
    field = cfg.data.prompt_field
    columns: dict[str, Any] = {key: [r[key] for r in rows for _ in range(k)] for key in rows[0] if key != field}
    columns["prompts"] = [r[field] for r in rows for _ in range(k)]
    columns["completion_ids"] = [ids[m.bool()].tolist() for ids, m in zip(batch.completion_ids,
                                                                          batch.completion_mask, strict=True)]
    columns["trainer_state"] = TrainerState(0, 0, 0)
    completions: list[Any] = batch.completions_text
    if isinstance(rows[0][field], list):
        completions = [[{"role": "assistant", "content": text}] for text in completions]
    completions = conversation_inputs(batch, completions, columns)  # a multi-turn batch: its conversations
    scores = cfg.rewards.score(completions, **columns)
    return scores.total, scores.columns


def sample_and_score(cfg: Any, rows: list[dict[str, Any]], samples: int, *, batch_prompts: int = 8
                     ) -> list[dict[str, Any]]:
    """Load the model, sample ``samples`` completions of each row's prompt (rows: ``grpo_core.data.load_rows``),
    score them: one record per sample."""
    import torch

    from grpo_core.generation.transformers_backend import build_backend  # torch: once every input is checked
    from grpo_core.trainer import fit_prompts  # torch: once every input is checked

    d = cfg.data
    torch.manual_seed(cfg.grpo.seed)
    model, tokenizer = load_model_and_tokenizer(cfg)
    if torch.cuda.is_available() and not cfg.quantization.load_in_4bit:
        model.to("cuda")
    model.eval()
    backend = build_backend(cfg, model, tokenizer)
    schemas = getattr(backend, "tool_schemas", None)  # [tools]: the chat template renders them into each prompt
    prompts, rows = fit_prompts([format_prompt(r, d, tokenizer, schemas) for r in rows], rows, tokenizer,
                                d.max_prompt_length, d.overlong_prompts, not d.chat_template, "evaluation")
    records: list[dict[str, Any]] = []
    for start in range(0, len(rows), batch_prompts):
        chunk = rows[start : start + batch_prompts]
        with torch.no_grad():
            batch = backend.generate(prompts[start : start + batch_prompts], samples, greedy=samples == 1)
        total, columns = _score(cfg, chunk, batch, samples)
        lengths = batch.completion_mask.sum(1).tolist()
        for j, text in enumerate(batch.completions_text):
            row = chunk[j // samples]
            record = {"prompt_index": start + j // samples, "sample": j % samples, "prompt": row[d.prompt_field],
                      "completion": text}
            if "answer" in row:
                record["answer"] = row["answer"]
            record.update({alias: column[j] for alias, column in columns.items()})
            record.update({"total": total[j], "completion_tokens": int(lengths[j]),
                           "truncated": bool(batch.truncated[j])})
            records.append(record)
    return records


def summarize(records: list[dict[str, Any]], aliases: list[str], samples: int, ks: list[int], *,
              resamples: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Per reward (and ``total``): the mean over prompts of each prompt's mean (None left out), its
    bootstrap 95% interval over prompts, and pass@k for each k where the reward is binary (a None: not passed)."""
    by_prompt: dict[int, list[dict[str, Any]]] = {}
    for r in records:
        by_prompt.setdefault(r["prompt_index"], []).append(r)
    out: dict[str, Any] = {"prompts": len(by_prompt), "samples_per_prompt": samples, "rewards": {}}
    for alias in [*aliases, "total"]:
        per_prompt = []
        for group in by_prompt.values():
            values = [g[alias] for g in group if g[alias] is not None]
            if values:
                per_prompt.append(math.fsum(values) / len(values))
        mean = math.fsum(per_prompt) / len(per_prompt) if per_prompt else math.nan
        low, high = bootstrap_interval(per_prompt, resamples=resamples, seed=seed)
        entry: dict[str, Any] = {"mean": mean, "ci95": [low, high], "scored_prompts": len(per_prompt)}
        if alias != "total" and is_binary([r[alias] for r in records]):
            correct = [sum(1 for g in group if (g[alias] or 0) > 0) for group in by_prompt.values()]
            entry["pass@k"] = {str(k): mean_pass_at_k(correct, samples, k) for k in ks}
        out["rewards"][alias] = entry
    return out


def summary_table(summary: dict[str, Any]) -> str:
    """The summary as a few aligned lines."""
    lines = [f"{summary['prompts']} prompts x {summary['samples_per_prompt']} samples"]
    width = max(len(a) for a in summary["rewards"])
    for alias, entry in summary["rewards"].items():
        low, high = entry["ci95"]
        text = f"  {alias:<{width}}  mean {entry['mean']:.4f}  95% CI [{low:.4f}, {high:.4f}]"
        if "pass@k" in entry:
            text += "  " + "  ".join(f"pass@{k} {v:.4f}" for k, v in entry["pass@k"].items())
        lines.append(text)
    return "\n".join(lines)
