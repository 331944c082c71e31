"""What the libraries a run imports print that does not concern the run, silenced for that run only.

* DeepSpeed logs the accelerator it picked ("Setting accelerator to CPU ...") when it is imported, and
  transformers and accelerate import it whenever it is installed (to unwrap a model before saving it, for
  an ``isinstance`` check). Unless the run's engine is DeepSpeed, its records below ERROR are dropped.
* bitsandbytes is imported by peft whenever it is installed, and logs about its GPU kernels then. Unless the
  run loads 4-bit weights, its loggers say only errors and its warnings are ignored.
* transformers' FutureWarnings for its rename of gradient checkpointing (``is_gradient_checkpointing``,
  ``gradient_checkpointing_disable``, ``TrainingArguments.gradient_checkpointing``) are raised inside
  peft's and TRL's calls, not by anything a user wrote (``model.gradient_checkpointing`` is our key).
* under the trl backend on a machine without an accelerator, torch says that the ``pin_memory`` TRL asks
  for cannot be used: nothing the run can change.
* transformers says that comet_ml is installed but not configured whenever TRL's trainer starts: unless
  the run reports to comet_ml (``logging.report_to``), that notice is dropped.

Each is matched by its logger or its message, so every other warning still shows.
"""

from __future__ import annotations

import logging
import warnings
from typing import Any

RENAMED_CHECKPOINTING = r"`(is_)?gradient_checkpointing\w*` is deprecated and will be removed"
NO_PIN_MEMORY = r"'pin_memory' argument is set as true but no accelerator is found"


class _NotAbout(logging.Filter):
    """Drops a logger's records whose message starts with ``prefix``."""

    def __init__(self, prefix: str):
        super().__init__()
        self.prefix = prefix

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(self.prefix)


class _BelowError(logging.Filter):
    """Drops a logger's records below ERROR (added once per logger)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR


def quiet_libraries(cfg: Any) -> None:
    """Silence, for a run of ``cfg``, what its libraries print that does not concern it (module docs)."""
    if getattr(cfg.distributed, "engine", "ddp") != "deepspeed":
        ds = logging.getLogger("DeepSpeed")  # the logger DeepSpeed makes at import keeps this filter
        if not any(isinstance(f, _BelowError) for f in ds.filters):
            ds.addFilter(_BelowError())
    if not cfg.quantization.load_in_4bit:
        logging.getLogger("bitsandbytes").setLevel(logging.ERROR)
        warnings.filterwarnings("ignore", module=r"bitsandbytes(\.|$)")
    warnings.filterwarnings("ignore", message=RENAMED_CHECKPOINTING, category=FutureWarning)
    if cfg.trainer.backend == "trl":
        warnings.filterwarnings("ignore", message=NO_PIN_MEMORY, category=UserWarning)
    report_to = cfg.logging.report_to
    if "comet_ml" not in ([report_to] if isinstance(report_to, str) else list(report_to)):
        hub = logging.getLogger("transformers.integrations.integration_utils")
        if not any(isinstance(f, _NotAbout) for f in hub.filters):
            hub.addFilter(_NotAbout("comet_ml "))
