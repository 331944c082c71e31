"""Pushes that name only the blocks that changed, without vLLM warning about every block they leave alone.

vLLM's in-place reload (``reload_weights``) keeps the tensors of every layer the reload names no weights for,
and logs ``<Layer>: Failed to load weights`` for each of them: with LoRA merged on the fly, every step's push
(:mod:`grpo_core.generation.vllm.weights`) leaves the norms, the embeddings, the rotary cache and a tied head as
they are, which is what it means to do, so each push would log a line per such layer (61 norms on
SmolLM2-135M). :func:`quiet_partial_reload` drops that one message from vLLM's reload logger while a push
loads; every other message passes.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

RELOAD_LOGGER = "vllm.model_executor.model_loader.reload.layerwise"
_KEPT = "Failed to load weights"


def _not_kept_layer(record: logging.LogRecord) -> bool:
    return not str(record.msg).endswith(_KEPT)


@contextmanager
def quiet_partial_reload() -> Iterator[None]:
    """While open, vLLM's reload does not log the layers a push left alone (see the module docs)."""
    logger = logging.getLogger(RELOAD_LOGGER)
    logger.addFilter(_not_kept_layer)
    try:
        yield
    finally:
        logger.removeFilter(_not_kept_layer)
