"""What rewards see of a multi-turn batch: its conversations and its facts as columns. Imports no torch (the
evaluation command reads it before the model loads)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from grpo_core.generation.backend import Generation


FACT_COLUMNS = ("turns", "tool_calls", "tool_errors")  # each a reward column, as num_<fact>


def conversation_inputs(batch: Generation, completions: list[Any], columns: dict[str, list]) -> list[Any]:
    """What rewards get from a multi-turn batch: its conversations as the completions (TRL's format) and its
    facts as the columns ``num_turns``, ``num_tool_calls``, ``num_tool_errors`` (added to ``columns``);
    ``completions`` as they are for a batch of one turn each."""
    if batch.conversations is None:
        return completions
    for key in FACT_COLUMNS:
        columns[f"num_{key}"] = [facts[key] for facts in batch.tool_facts or []]
    return batch.conversations
