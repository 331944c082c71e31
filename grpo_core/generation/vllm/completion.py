"""What a vLLM engine (colocated or server) returns for each sampled completion."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Completion:
    """One sampled completion: its token ids, the sampler's log-prob of each, and why it ended
    (``"length"``: the token limit)."""

    token_ids: list[int]
    logprobs: list[float]
    finish_reason: str | None
