"""Pushes that name only the blocks that changed, without vLLM warning about every block they leave alone.

vLLM's in-place reload (``reload_weights``) keeps the tensors of every layer the reload names no weights for,
and says so: ``<Layer>: Failed to load weights`` for each such layer, then one ``Following weights were not
loaded from checkpoint: {...}`` line listing them all. With LoRA merged on the fly, every step's push
(:mod:`grpo_core.generation.vllm.weights`) leaves the norms, the embeddings, the rotary cache and a tied head as
they are, which is what it means to do: on SmolLM2-135M that was 64 lines and one very long line per step.
:func:`quiet_partial_reload` drops those two messages from vLLM's reload loggers while a push loads; every
other message passes.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

_RELOAD = "vllm.model_executor.model_loader.reload"
KEPT_LAYER_MESSAGES = {  # logger -> the text of its message that reports kept layers
    f"{_RELOAD}.layerwise": "Failed to load weights",
    f"{_RELOAD}.inplace": "Following weights were not loaded from checkpoint",
}


def _reports_kept_layers(record: logging.LogRecord) -> bool:
    text = KEPT_LAYER_MESSAGES.get(record.name)
    return text is None or text not in str(record.msg)


@contextmanager
def quiet_partial_reload() -> Iterator[None]:
    """While open, vLLM's reload does not log the layers a push left alone (see the module docs)."""
    loggers = [logging.getLogger(name) for name in KEPT_LAYER_MESSAGES]
    for logger in loggers:
        logger.addFilter(_reports_kept_layers)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeFilter(_reports_kept_layers)
