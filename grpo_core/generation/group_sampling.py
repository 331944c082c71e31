"""Sampling a group of completions per prompt: each prompt prefilled once, its KV cache shared by the group.

``sample_groups(model, prompt_ids, prompt_mask, k, ...) -> (completion_ids [P*k, K], logps [P*k, K])``

The same draw as ``model.generate(do_sample=True, temperature=T)`` with nothing else in the sampler
(no top-p/top-k/penalty: those go through ``generate``): every step samples each row's next token
from ``softmax(logits / T)`` (``argmax`` when greedy). What changes is the work done:

* the prompts are prefilled once per prompt, not once per completion: the cache of the ``P`` prompt
  rows is repeated ``k`` times (``DynamicCache.batch_repeat_interleave``) after the prefill;
* rows that ended (an EOS id) leave the batch (``batch_select_indices``), so the decode steps run on
  the rows still going, not on padding;
* position ids follow the attention mask (``cumsum(mask) - 1``), as in ``generate`` and the trainer.

It also returns each sampled token's log-probability under the sampler (fp32, at temperature T): the
numbers the trainer's log-probs must equal when training is on-policy.
Completion rows are right-padded with ``pad_id`` after their EOS; a row without EOS runs to
``max_new_tokens``.

``on_groups(ids, logps, first, end, steps)``, when given, is called as soon as groups ``first .. end - 1`` have
all their rows finished, in order (a group finishing before an earlier one waits for it): their rows of
``ids[:, :steps]`` and ``logps[:, :steps]`` are final then. ``ids`` and ``logps`` are the buffers the sampler
goes on writing (other rows only), so it must copy what it keeps; it must draw no random numbers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


def cache_argument(output: Any) -> str:
    """The name the installed transformers gives the KV cache, on a model output and as a forward argument:
    ``cache`` (newer releases, where ``past_key_values`` is deprecated) or ``past_key_values``."""
    return "cache" if "cache" in getattr(output, "__dataclass_fields__", {}) else "past_key_values"


def supports_shared_prefill(cache: Any) -> bool:
    """Whether a KV cache object can be repeated per group and shrunk as rows finish."""
    return hasattr(cache, "batch_repeat_interleave") and hasattr(cache, "batch_select_indices")


@torch.no_grad()
def sample_groups(
    model: Any,
    prompt_ids: torch.Tensor,
    prompt_mask: torch.Tensor,
    k: int,
    *,
    max_new_tokens: int,
    eos_ids: list[int],
    pad_id: int,
    temperature: float = 1.0,
    greedy: bool = False,
    on_groups: Callable[[torch.Tensor, torch.Tensor, int, int, int], None] | None = None,
) -> tuple[torch.Tensor, torch.Tensor] | None:
    """``k`` completions of each of the ``P`` left-padded prompts (rows ``i*k .. i*k+k-1`` for prompt ``i``)
    and the sampler's log-prob of each token; None when the model's cache cannot be shared this way."""
    device = prompt_ids.device
    n = prompt_ids.size(0) * k
    eos = torch.tensor(eos_ids, device=device)
    position = (prompt_mask.long().cumsum(-1) - 1).clamp(min=0)
    out = model(input_ids=prompt_ids, attention_mask=prompt_mask, position_ids=position, use_cache=True,
                logits_to_keep=1)
    cache_arg = cache_argument(out)
    cache = getattr(out, cache_arg)
    if not supports_shared_prefill(cache):
        return None
    cache.batch_repeat_interleave(k)
    logits = out.logits[:, -1].float().repeat_interleave(k, dim=0)
    mask = prompt_mask.repeat_interleave(k, dim=0)
    next_pos = position[:, -1].repeat_interleave(k, dim=0) + 1
    ids = torch.full((n, max_new_tokens), pad_id, dtype=torch.long, device=device)
    logps = torch.zeros(n, max_new_tokens, dtype=torch.float32, device=device)
    rows = torch.arange(n, device=device)  # original row of each row still in the batch
    going_per_group = torch.full((prompt_ids.size(0),), k, dtype=torch.long, device=device)
    handed = 0  # groups handed to on_groups so far
    steps = 0
    for t in range(max_new_tokens):
        steps = t + 1
        logp = torch.log_softmax(logits / temperature, dim=-1)
        token = logp.argmax(-1) if greedy else torch.multinomial(logp.exp(), 1).squeeze(1)
        ids[rows, t] = token
        logps[rows, t] = logp.gather(1, token.unsqueeze(1)).squeeze(1)
        going = ~torch.isin(token, eos)
        last = t == max_new_tokens - 1 or not going.any()
        if on_groups is not None:
            handed = _hand_over(on_groups, ids, logps, going_per_group, rows, going, last, handed, k, steps)
        if last:
            break
        if not going.all():  # finished rows leave the batch and the cache
            keep = going.nonzero().squeeze(1)
            cache.batch_select_indices(keep)
            rows, token, mask, next_pos = rows[keep], token[keep], mask[keep], next_pos[keep]
        mask = torch.cat([mask, mask.new_ones(mask.size(0), 1)], dim=1)
        out = model(input_ids=token.unsqueeze(1), attention_mask=mask, position_ids=next_pos.unsqueeze(1),
                    use_cache=True, **{cache_arg: cache})
        logits = out.logits[:, -1].float()
        next_pos = next_pos + 1
    return ids[:, :steps], logps[:, :steps]


def _hand_over(on_groups: Callable[..., None], ids: torch.Tensor, logps: torch.Tensor, going_per_group: torch.Tensor,
               rows: torch.Tensor, going: torch.Tensor, last: bool, handed: int, k: int, steps: int) -> int:
    """Count the rows that ended this step against their groups and hand the groups now finished, in order,
    to ``on_groups(ids, logps, first, end, steps)``; returns how many groups have been handed over."""
    ended = rows if last else rows[~going]
    if ended.numel() == 0:
        return handed
    going_per_group.index_add_(0, ended // k, torch.full_like(ended, -1))
    unfinished = going_per_group[handed:].nonzero()
    end = going_per_group.numel() if unfinished.numel() == 0 else handed + int(unfinished[0, 0])
    if end > handed:
        on_groups(ids, logps, handed, end, steps)
    return max(end, handed)
