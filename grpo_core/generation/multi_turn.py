"""A multi-turn rollout: model turns and tool turns alternate until each row answers or hits a limit.

``multi_turn_rollout(prompts, sample, tokenizer, tools, ...) -> Rollout`` over ``N`` rows (token id lists,
no padding). Each turn samples the rows still running together (``sample(turn, rows, contexts,
max_new_tokens)``, the backend's: one batched call per turn), then, for each row:

* its turn ends at its first end-of-turn id (``eos_ids``); with none within its budget the row stops
  (``stop = "length"``, truncated);
* a turn without tool calls is the answer (``"answer"``);
* a row that has had ``max_tool_calling_iterations`` tool turns stops with its calls unanswered (``"turns"``),
  as does every row once ``max_seconds`` of wall time have passed (``"time"``);
* otherwise its calls (every running row's, at once: :meth:`ToolSet.run`) are answered: the tool messages
  are rendered by the chat template alone (:func:`~grpo_core.generation.tools.formats.tool_suffix_ids`) and their
  ids appended; a row whose tool output would leave no room for another model token, within
  ``max_completion_length`` or the model's context, stops there without it (``"context"``; TRL drops it too).

Token ids are carried, never re-tokenized: a row's completion is its sampled tokens and the tool ids, in
order. ``model_mask`` is 1 on the model's own tokens and 0 on the tools' (TRL's ``tool_mask``): the tool tokens
are in the context of later turns but the trainer leaves them out of the loss, KL and entropy. ``logps`` holds
the sampler's log-prob of each model token (0 on tool tokens). ``conversations`` is each row's turns in TRL's
conversational format (assistant messages with their parsed ``tool_calls`` and, for calls that could not be
read, ``invalid_tool_calls``; tool messages with ``name`` and ``content``) and ``facts`` its counts: ``turns``, ``tool_calls``, ``tool_errors`` and ``stop``.

Python loops here go over rows and turns, never over tokens (a turn's end is found on tensors).
:func:`to_generation` makes the rollout a :class:`~grpo_core.generation.backend.Generation` (``tool_mask``,
``conversations``, ``tool_facts`` set); :func:`left_pad` is how a backend batches the contexts of a turn.
Each backend's sampler is its own; the loop is this one (:mod:`grpo_core.generation.tool_rollouts`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from grpo_core.generation.backend import Generation, completion_mask_from_eos
from grpo_core.generation.tools.formats import ToolCall, parse_tool_calls, strip_calls, tool_suffix_ids
from grpo_core.generation.tools.toolset import ToolSet

# (turn, rows, contexts, max_new_tokens) -> (ids [len(rows), K], logps [len(rows), K]): each context's next turn
TurnSampler = Callable[[int, list[int], list[list[int]], int], tuple[torch.Tensor, torch.Tensor]]
STOPS = ("answer", "length", "turns", "time", "context")


@dataclass
class RolloutLimits:
    max_completion_length: int  # tokens of a row's whole completion: its model turns and the tool outputs
    max_context: int  # prompt and completion tokens the model takes (its position limit)
    max_tool_calling_iterations: int | None = None  # tool turns per row; None: no limit
    max_seconds: float | None = None  # wall time after which no tool turn starts; None: no limit


@dataclass
class Rollout:
    completion_ids: list[list[int]]
    model_mask: list[list[int]]
    logps: list[list[float]]
    truncated: list[bool]
    conversations: list[list[dict[str, Any]]]
    facts: list[dict[str, Any]]
    seconds: dict[str, float] = field(default_factory=dict)  # "model" and "tools": where the rollout's time went


def _assistant(text: str, calls: list[ToolCall], format_name: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": strip_calls(text, format_name) if calls else text}
    valid = [c for c in calls if not c.error]
    if valid:
        message["tool_calls"] = [{"type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                                 for c in valid]
    if len(valid) < len(calls):  # calls that could not be read: the turn called tools all the same, not an answer
        message["invalid_tool_calls"] = [{"text": c.text, "error": c.error} for c in calls if c.error]
    return message


def multi_turn_rollout(prompts: list[list[int]], sample: TurnSampler, tokenizer: Any, tools: ToolSet, *,
                       eos_ids: list[int], limits: RolloutLimits, format_name: str = "hermes",
                       chat_template: str | None = None) -> Rollout:
    """Run every row's turns to its end (module docs)."""
    n = len(prompts)
    comp: list[list[int]] = [[] for _ in range(n)]
    keep: list[list[int]] = [[] for _ in range(n)]
    logps: list[list[float]] = [[] for _ in range(n)]
    conversations: list[list[dict[str, Any]]] = [[] for _ in range(n)]
    facts = [{"turns": 0, "tool_calls": 0, "tool_errors": 0, "stop": ""} for _ in range(n)]
    truncated = [False] * n
    seconds = {"model": 0.0, "tools": 0.0}
    started = time.monotonic()
    running, turn = list(range(n)), 0
    while running:
        budget = torch.tensor([min(limits.max_completion_length - len(comp[r]),
                                   limits.max_context - len(prompts[r]) - len(comp[r])) for r in running]).clamp(min=0)
        tick = time.monotonic()
        ids, turn_logps = sample(turn, running, [prompts[r] + comp[r] for r in running], max(1, int(budget.max())))
        seconds["model"] += time.monotonic() - tick
        mask, no_eos = completion_mask_from_eos(ids, eos_ids)
        lengths = mask.sum(1).cpu()
        over = lengths > budget  # a row given fewer tokens than the batch's turn: cut at its budget
        ended = ~(no_eos.cpu() | over)
        lengths = torch.minimum(lengths, budget).tolist()
        ids_rows, logp_rows = ids.tolist(), turn_logps.float().tolist()
        pending: list[tuple[int, list[ToolCall]]] = []
        for j, r in enumerate(running):
            turn_ids = ids_rows[j][: lengths[j]]
            comp[r] += turn_ids
            keep[r] += [1] * len(turn_ids)
            logps[r] += logp_rows[j][: lengths[j]]
            facts[r]["turns"] += 1
            calls = parse_tool_calls(tokenizer.decode(turn_ids, skip_special_tokens=False), format_name) \
                if ended[j] else []
            conversations[r].append(_assistant(tokenizer.decode(turn_ids, skip_special_tokens=True), calls,
                                               format_name))
            if not ended[j]:
                facts[r]["stop"], truncated[r] = "length", True
            elif not calls:
                facts[r]["stop"] = "answer"
            elif limits.max_tool_calling_iterations is not None and turn >= limits.max_tool_calling_iterations:
                facts[r]["stop"] = "turns"
            elif limits.max_seconds is not None and time.monotonic() - started > limits.max_seconds:
                facts[r]["stop"] = "time"
            else:
                pending.append((r, calls))
        tick = time.monotonic()
        results = tools.run([call for _, calls in pending for call in calls], [r for r, calls in pending for _ in calls])
        seconds["tools"] += time.monotonic() - tick
        running, at = [], 0
        for r, calls in pending:
            answered, at = results[at: at + len(calls)], at + len(calls)
            facts[r]["tool_calls"] += len(calls)
            facts[r]["tool_errors"] += sum(res.error for res in answered)
            messages = [{"role": "tool", "name": res.name, "content": res.content} for res in answered]
            suffix = tool_suffix_ids(tokenizer, messages, eos_ids, chat_template)
            room = min(limits.max_completion_length - len(comp[r]), limits.max_context - len(prompts[r]) - len(comp[r]))
            if len(suffix) >= room:  # no room left for a model token after the tool output
                facts[r]["stop"] = "context"
                continue
            comp[r] += suffix
            keep[r] += [0] * len(suffix)
            logps[r] += [0.0] * len(suffix)
            conversations[r] += messages
            running.append(r)
        turn += 1
    return Rollout(comp, keep, logps, truncated, conversations, facts, seconds)


def left_pad(rows: list[list[int]], pad_id: int, device: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """``(ids, mask)`` ``[len(rows), longest]``, each row on the right (a prompt batch, as the samplers take)."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, row in enumerate(rows):  # one copy per row
        if row:
            ids[i, width - len(row):] = torch.tensor(row, dtype=torch.long)
            mask[i, width - len(row):] = 1
    return ids.to(device), mask.to(device)


def to_generation(rollout: Rollout, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, pad_id: int,
                  tokenizer: Any, *, sampler_is_policy: bool = True) -> Generation:
    """The rollout as the trainer takes a batch: right-padded completions whose mask covers every token of the
    conversation, ``tool_mask`` the model's own, the sampler's log-probs (``sampler_is_policy``: the policy's
    own, as the transformers backend's; otherwise the trainer corrects for them, as for vLLM's), the
    conversations and the facts."""
    n, width = len(rollout.completion_ids), max(1, max(len(c) for c in rollout.completion_ids))
    ids = torch.full((n, width), pad_id, dtype=torch.long)
    mask = torch.zeros((n, width), dtype=torch.long)
    model = torch.zeros((n, width), dtype=torch.long)
    logps = torch.zeros((n, width), dtype=torch.float32)
    for i, row in enumerate(rollout.completion_ids):  # one copy per row
        if row:
            ids[i, : len(row)] = torch.tensor(row, dtype=torch.long)
            mask[i, : len(row)] = 1
            model[i, : len(row)] = torch.tensor(rollout.model_mask[i], dtype=torch.long)
            logps[i, : len(row)] = torch.tensor(rollout.logps[i], dtype=torch.float32)
    device = prompt_ids.device
    texts = tokenizer.batch_decode(ids, skip_special_tokens=True)
    return Generation(prompt_ids, prompt_mask, ids.to(device), mask.to(device), texts,
                      torch.tensor(rollout.truncated, device=device), logps.to(device), sampler_is_policy=sampler_is_policy,
                      tool_mask=model.to(device), conversations=rollout.conversations, tool_facts=rollout.facts)


def tool_metrics(facts: list[dict[str, Any]], seconds: dict[str, float] | None = None) -> dict[str, float]:
    """A batch's rollout numbers: TRL's ``tools/call_frequency`` (calls per completion) and
    ``tools/failure_frequency`` (errors per call), turns per completion, the share of rows each stop ended, and
    the seconds the rollout spent in the model and in the tools."""
    n = max(1, len(facts))
    calls = sum(f["tool_calls"] for f in facts)
    out = {"tools/call_frequency": calls / n,
           "tools/failure_frequency": sum(f["tool_errors"] for f in facts) / calls if calls else 0.0,
           "tools/turns_mean": sum(f["turns"] for f in facts) / n}
    out.update({f"tools/stop_{stop}": sum(f["stop"] == stop for f in facts) / n for stop in STOPS})
    for part, value in (seconds or {}).items():
        out[f"tools/{part}_seconds"] = value
    return out

