"""What ``[generation] backend = "transformers"`` cannot do, as config problems (one line each); imports no torch.

Registered with the backend's factory (:mod:`grpo_core.plugin`), as each backend registers its own checks.
"""

from __future__ import annotations

from typing import Any


def transformers_problems(sections: dict[str, Any]) -> list[tuple[tuple[str, ...], str]]:
    """``[(key, message)]`` for the keys only another backend (vLLM) applies."""
    g = sections["generation"]
    out: list[tuple[tuple[str, ...], str]] = []
    if g.stop:
        out.append((("generation", "stop"), 'stop strings need backend = "vllm" (the transformers backend '
                                            "stops at EOS only)"))
    if g.min_p:
        out.append((("generation", "min_p"), 'needs backend = "vllm" (the transformers backend does not apply it)'))
    return out
