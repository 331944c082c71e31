"""``[distributed] engine = "ddp"`` with several processes: DistributedDataParallel over the log-prob module,
gradients summed (:func:`grpo_core.parallel.distributed.wrap_ddp`), kept local (``no_sync``) but on each
optimizer step's last backward. With one process the base :class:`~grpo_core.parallel.engine.Engine` runs."""

from __future__ import annotations

import contextlib
from typing import Any, ClassVar

import torch

from grpo_core.parallel.distributed import wrap_ddp
from grpo_core.parallel.engine import Engine


class DDPEngine(Engine):
    needs_processes: ClassVar[bool] = True

    def wrap(self, module: torch.nn.Module) -> torch.nn.Module:
        return wrap_ddp(module, self.world)

    def accumulating(self, last: bool) -> Any:
        return contextlib.nullcontext() if last else self.module.no_sync()
