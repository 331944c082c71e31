"""What a backend shares to run multi-turn rollouts with tools: the tools themselves and the rollout around them.

:class:`ToolRolloutBackend` is a :class:`~grpo_core.generation.backend.TokenizerBackend` that also holds the
rollouts' tools (``[tools] names``, registered through ``grpo_register_tools``, and the Python API's functions:
:meth:`set_tools`) and runs a rollout (:meth:`rollout`): one loop for every backend,
:func:`~grpo_core.generation.multi_turn.multi_turn_rollout`, to which a backend gives only its way of sampling
one turn of the rows still running (a :data:`~grpo_core.generation.multi_turn.TurnSampler`): the transformers
backend samples from the policy, the vLLM backend sends each row's context to its engine as token ids.

A backend sets ``streams_groups`` when its ``generate`` can hand finished groups over
(:data:`~grpo_core.generation.backend.OnGroups`); with tools it hands nothing over (``hands_over_groups`` is
False): a multi-turn batch is scored whole, once every row ended. :meth:`tool_sampling_problem` is a backend's
refusal of sampling settings its rollouts cannot run with (None: none).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from grpo_core.generation.backend import Generation, TokenizerBackend
from grpo_core.generation.multi_turn import RolloutLimits, TurnSampler, multi_turn_rollout, to_generation
from grpo_core.generation.tools.formats import resolve_format
from grpo_core.generation.tools.toolset import ToolSet
from grpo_rewards.errors import UserError
from grpo_rewards.plugins import get_registry

if TYPE_CHECKING:
    from grpo_core.config import RunConfig


class ToolRolloutBackend(TokenizerBackend):
    """A backend whose completions may be conversations of model and tool turns (module docs)."""

    streams_groups = False  # generate can take on_groups (set by a backend that hands groups over)

    def __init__(self, config: RunConfig, model: Any, tokenizer: Any):
        super().__init__(config, model, tokenizer)
        self.tools_cfg = config.tools
        self.tools: ToolSet | None = None  # [tools] names and the Python API's functions: multi-turn rollouts
        self.tool_format = "hermes"
        self.last_rollout_seconds: dict[str, float] = {}  # where the last rollout's time went (tool metrics)

    def tool_sampling_problem(self) -> str | None:
        """Why this backend's rollouts cannot sample with ``[generation]`` as set; None when they can."""
        return None

    def set_tools(self, functions: list[Any]) -> None:
        """The rollouts' tools: those ``[tools] names`` picks (registered through ``grpo_register_tools``) and
        ``functions`` (any Python functions, as TRL's ``tools=``); none: one model turn per completion."""
        t = self.tools_cfg
        registry = get_registry() if t.names else None  # loaded only when tools are named
        chosen = [registry.get("tools", name) for name in t.names] + list(functions) if registry else list(functions)
        problem = self.tool_sampling_problem() if chosen else None
        if problem:
            raise UserError(problem)
        self.tools = ToolSet(chosen, timeout_s=t.timeout_s, max_output_chars=t.max_output_chars) if chosen else None
        self.hands_over_groups = self.streams_groups and self.tools is None
        if self.tools is not None:
            self.tool_format = resolve_format(t.format, getattr(self.tokenizer, "chat_template", None))

    @property
    def tool_schemas(self) -> list[dict[str, Any]] | None:
        """The tools' JSON schemas, as the chat template renders them into the prompt; None without tools."""
        return self.tools.schemas if self.tools is not None else None

    def rollout(self, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor, k: int, sample: TurnSampler, *,
                max_context: int, sampler_is_policy: bool) -> Generation:
        """``k`` conversations for each left-padded prompt (each prompt's group consecutive), ``sample`` drawing
        each turn of the rows still running; the batch the trainer takes (:func:`to_generation`), with the
        sampler's log-probs of the model's tokens."""
        assert self.tools is not None
        pad, t = self.tokenizer.pad_token_id, self.tools_cfg
        rows_ids, rows_mask = prompt_ids.repeat_interleave(k, dim=0), prompt_mask.repeat_interleave(k, dim=0)
        prompts = [ids[m.bool()].tolist() for ids, m in zip(rows_ids.cpu(), rows_mask.cpu(), strict=True)]
        limits = RolloutLimits(self.gen.max_completion_length, max_context, t.max_tool_calling_iterations,
                               t.max_rollout_seconds)
        out = multi_turn_rollout(prompts, sample, self.tokenizer, self.tools, eos_ids=self.eos_ids, limits=limits,
                                 format_name=self.tool_format)
        self.last_rollout_seconds = out.seconds
        return to_generation(out, rows_ids, rows_mask, pad, self.tokenizer, sampler_is_policy=sampler_is_policy)
