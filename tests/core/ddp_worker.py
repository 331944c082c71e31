"""Worker of tests/core/test_distributed.py: trains the run configs listed in a JSON file, one after the
other, in this process (torchrun starts it once per rank; ``python ddp_worker.py runs.json`` is one process).

Sampling is made independent of how prompts are spread over processes by the ``seeded`` generation backend:
each prompt's group is sampled alone, from a generator seeded by the prompt's text and the call number, then
the groups are padded together. So a 2-process run draws the very completions a 1-process run draws, and
the two runs can be compared weight for weight.
"""

from __future__ import annotations

import json
import os
import sys
import zlib
from typing import Any

import torch

from grpo_rewards import hookimpl
from grpo_rewards.specs import RewardSpec


def merge(parts: list[Any], pad_id: int) -> Any:
    """One Generation from several (prompts left-padded, completions right-padded to the longest)."""
    from grpo_core.generation.transformers_backend import Generation

    p = max(g.prompt_ids.size(1) for g in parts)
    k = max(g.completion_ids.size(1) for g in parts)
    pad = torch.nn.functional.pad

    def left(t: torch.Tensor, value: int) -> torch.Tensor:
        return pad(t, (p - t.size(1), 0), value=value)

    def right(t: torch.Tensor, value: float) -> torch.Tensor:
        return pad(t, (0, k - t.size(1)), value=value)

    logps = None
    if all(g.sampling_logps is not None for g in parts):
        logps = torch.cat([right(g.sampling_logps, 0.0) for g in parts])
    return Generation(
        torch.cat([left(g.prompt_ids, pad_id) for g in parts]), torch.cat([left(g.prompt_mask, 0) for g in parts]),
        torch.cat([right(g.completion_ids, pad_id) for g in parts]),
        torch.cat([right(g.completion_mask, 0) for g in parts]),
        [t for g in parts for t in g.completions_text], torch.cat([g.truncated for g in parts]), logps,
        sampler_is_policy=all(g.sampler_is_policy for g in parts))


class SeededBackend:
    """The transformers backend, each prompt's group sampled from a generator seeded by (prompt, call), and
    handed over to be scored as soon as it is sampled (``on_groups``)."""

    hands_over_groups = True

    def __init__(self, config: Any, model: Any, tokenizer: Any):
        from grpo_core.generation.transformers_backend import TransformersBackend

        self.inner = TransformersBackend(config, model, tokenizer)
        self.pad_id = tokenizer.pad_token_id
        self.calls = 0

    def generate(self, prompts: list[str], num_generations: int, *, greedy: bool = False,
                 on_groups: Any = None) -> Any:
        self.calls += 1
        parts = []
        for i, prompt in enumerate(prompts):
            with torch.random.fork_rng():
                torch.manual_seed(zlib.crc32(prompt.encode()) + 1_000_003 * self.calls)
                parts.append(self.inner.generate([prompt], num_generations, greedy=greedy))
            if on_groups is not None:
                on_groups(i, parts[-1])
        return merge(parts, self.pad_id)


class RaggedBackend(SeededBackend):
    """The ``seeded`` backend, its completions right-padded with 16 masked columns on rank 1 alone: the ranks'
    sequences differ in length (so do their forward counts), the loss does not (causal attention)."""

    def generate(self, prompts: list[str], num_generations: int, *, greedy: bool = False,
                 on_groups: Any = None) -> Any:
        batch = super().generate(prompts, num_generations, greedy=greedy, on_groups=on_groups)
        if os.environ.get("RANK") != "1":
            return batch
        from grpo_core.generation.transformers_backend import Generation

        pad = torch.nn.functional.pad
        return Generation(batch.prompt_ids, batch.prompt_mask, pad(batch.completion_ids, (0, 16), value=self.pad_id),
                          pad(batch.completion_mask, (0, 16), value=0), batch.completions_text, batch.truncated,
                          None if batch.sampling_logps is None else pad(batch.sampling_logps, (0, 16), value=0.0),
                          sampler_is_policy=batch.sampler_is_policy)


class OtherSamplerBackend(SeededBackend):
    """The ``seeded`` backend posing as another sampler (vLLM): not the policy, its log-probs the policy's plus
    noise drawn from each completion's text (the same on any rank), so the trainer corrects the batch."""

    def generate(self, prompts: list[str], num_generations: int, *, greedy: bool = False,
                 on_groups: Any = None) -> Any:
        import dataclasses

        batch = super().generate(prompts, num_generations, greedy=greedy, on_groups=on_groups)
        width = batch.completion_ids.size(1)
        noise = torch.stack([torch.randn(64, generator=torch.Generator().manual_seed(zlib.crc32(text.encode())))
                             [:width] for text in batch.completions_text])
        logps = (batch.sampling_logps + 0.3 * noise) * batch.completion_mask
        return dataclasses.replace(batch, sampling_logps=logps, sampler_is_policy=False)


class _Plugin:
    @hookimpl
    def grpo_register_generation_backends(self, register: Any) -> None:
        register("seeded", SeededBackend)
        register("ragged", RaggedBackend)
        register("other_sampler", OtherSamplerBackend)

    @hookimpl
    def grpo_register_rewards(self, register: Any) -> None:
        def ddp_len(scale: float = 0.1) -> Any:
            def fn(completions: list[Any], **_: Any) -> list[float | None]:
                return [-scale * len(str(c)) + sum(ch.isdigit() for ch in str(c)) for c in completions]
            return fn

        register(RewardSpec("ddp_len", ddp_len))


def registry() -> Any:
    """The installed plugins plus the ``seeded`` backend and the ``ddp_len`` reward."""
    from grpo_rewards.plugins import load_registry

    return load_registry(extra_plugins=[("ddp_test", _Plugin())])


def main(path: str) -> None:
    from grpo_core.config import config_from_dict
    from grpo_core.parallel.distributed import destroy_process_group, init_process_group
    from grpo_core.trainer import Trainer

    init_process_group("gloo")  # once for all the runs (a Trainer uses an existing group and leaves it be)
    reg = registry()
    with open(path, encoding="utf-8") as fh:
        runs = json.load(fh)
    for run in runs:
        cfg = config_from_dict(run["config"], registry=reg)
        Trainer(cfg, resume=run.get("resume", False), registry=reg).train()
    destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
