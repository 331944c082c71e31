"""Data-parallel training on ``torch.distributed``: who this process is, the process group, the step's share
of each rank, and the few collectives the trainer needs.

``torchrun --nproc_per_node N -m grpo_core train run.toml`` (or ``grpo train run.toml --nproc N``) starts N
processes; each reads ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK`` and ``LOCAL_WORLD_SIZE`` (:func:`world_from_env`)
and joins one process group (:func:`init_process_group`; ``[distributed] backend``: ``auto`` is ``nccl`` with
CUDA, ``gloo`` otherwise). A single process (no ``WORLD_SIZE``, or 1) is :data:`SINGLE` and never touches
``torch.distributed``.

The trainer's rules (grpo_core.trainer): every rank computes the same global step (the same prompts in the
same order) and takes its contiguous share (:func:`share`); the loss of each row is its exact share of the
single-process loss, so the gradients are *summed* across ranks (:func:`sum_gradients_hook`, a DDP comm hook
replacing DDP's average); :func:`wrap_ddp` wraps the module whose forward computes the log-probs, with
frozen parameters and buffers left out of DDP's start-up broadcast (they are loaded identically everywhere).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any

import torch

from grpo_rewards.errors import ConfigError, Problem


@dataclass(frozen=True)
class World:
    """This process's place among the training processes."""

    rank: int = 0
    size: int = 1
    local_rank: int = 0
    local_size: int = 1

    @property
    def enabled(self) -> bool:
        return self.size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


SINGLE = World()


def world_from_env(env: dict[str, str] | None = None) -> World:
    """The world torchrun describes in the environment (:data:`SINGLE` without ``WORLD_SIZE``)."""
    env = os.environ if env is None else env
    size = int(env.get("WORLD_SIZE", "1") or 1)
    if size <= 1:
        return SINGLE
    rank = int(env.get("RANK", "0"))
    local_size = int(env.get("LOCAL_WORLD_SIZE", str(size)))
    return World(rank=rank, size=size, local_rank=int(env.get("LOCAL_RANK", str(rank))), local_size=local_size)


def world_problems(cfg: Any, size: int) -> list[tuple[str, str]]:
    """``(config key, why)`` for each thing ``size`` processes cannot run with the config ``cfg`` (none for one)."""
    if size <= 1:
        return []
    out = []
    if cfg.grpo.prompts_per_step % size:
        out.append(("grpo.prompts_per_step", f"must be a multiple of the number of processes ({size}), got "
                                             f"{cfg.grpo.prompts_per_step}"))
    elif (cfg.sequences_per_step // size) % cfg.optimizer_steps_per_generation:
        out.append(("grpo.steps_per_generation", f"gives {cfg.optimizer_steps_per_generation} optimizer steps per "
                                                 f"generation batch, which must divide each process's "
                                                 f"{cfg.sequences_per_step // size} sequences"))
    if cfg.generation.backend == "vllm":
        out.append(("generation.backend", f"\"vllm\" runs in one process only for now, not {size}"))
    if cfg.trainer.backend != "grpo_core":
        out.append(("trainer.backend", f"{cfg.trainer.backend!r} runs in one process only for now, not {size} "
                                       "(multi-process training is the grpo_core trainer's)"))
    if cfg.distributed.engine == "fsdp2" and cfg.quantization.load_in_4bit:
        out.append(("quantization.load_in_4bit", "4-bit weights cannot be sharded by engine = \"fsdp2\"; use "
                                                 "engine = \"ddp\" or 16-bit weights"))
    return out


def check_world(cfg: Any, size: int) -> None:
    """Raise a ``ConfigError`` (one line per problem, naming the key) for :func:`world_problems`."""
    problems = world_problems(cfg, size)
    if problems:
        raise ConfigError([Problem(cfg.path, None, key, why) for key, why in problems])


def resolve_backend(backend: str) -> str:
    """``[distributed] backend``: ``auto`` is ``nccl`` when CUDA is available, else ``gloo``."""
    if backend == "auto":
        return "nccl" if torch.cuda.is_available() else "gloo"
    return backend


def usable_backend(backend: str) -> str:
    """:func:`resolve_backend`, refusing nccl without CUDA (``ValueError`` naming ``distributed.backend``)."""
    name = resolve_backend(backend)
    if name == "nccl" and not torch.cuda.is_available():
        raise ValueError("distributed.backend: \"nccl\" needs CUDA devices; use \"gloo\" (or \"auto\") on CPU")
    return name


def die_with_parent() -> None:
    """Linux: have this process killed when its parent (torchrun's agent) dies, so that a launcher killed with
    SIGKILL leaves no rank training on its own (torchrun starts each rank in a session of its own, out of
    reach of a signal to the launcher's process group). Elsewhere: nothing."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    pr_set_pdeathsig = 1
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0) != 0:
            return
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:  # the parent was already gone before the request
        os.kill(os.getpid(), signal.SIGKILL)


def init_process_group(backend: str = "auto") -> tuple[World, bool]:
    """Join the process group torchrun set up (a no-op for one process, or when a group already exists);
    returns the world and whether this call created the group (its creator destroys it). With CUDA, each
    process uses the device of its local rank. Each rank dies with its launcher (:func:`die_with_parent`).
    Raises ``ValueError`` naming ``distributed.backend`` for nccl without CUDA."""
    world = world_from_env()
    if not world.enabled:
        return world, False
    import torch.distributed as dist

    die_with_parent()

    if torch.cuda.is_available():
        torch.cuda.set_device(world.local_rank)
    if dist.is_initialized():
        return World(dist.get_rank(), dist.get_world_size(), world.local_rank, world.local_size), False
    name = usable_backend(backend)
    dist.init_process_group(backend=name)
    return world, True


def group_of_one(backend: str) -> bool:
    """A process group holding only this process, for an engine that needs one in a single process (DeepSpeed's;
    the world stays :data:`SINGLE`; an in-memory store: nothing listens on a port); whether it was created here
    (False when a group already exists)."""
    import torch.distributed as dist

    if dist.is_initialized():
        return False
    name = usable_backend(backend)
    dist.init_process_group(backend=name, store=dist.HashStore(), rank=0, world_size=1)
    return True


def destroy_process_group() -> None:
    """The process group destroyed, and DeepSpeed's references to it released where DeepSpeed was used: a later
    engine in the same process (a second trainer in a notebook) would otherwise look up the dead group."""
    import sys

    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()
        deepspeed_groups = sys.modules.get("deepspeed.utils.groups")
        release = getattr(deepspeed_groups, "_release_process_group_references", None)
        if release is not None:
            release(None)


def share(n: int, world: World) -> slice:
    """This rank's contiguous share of ``n`` items (``n`` a multiple of the world size for equal shares; the
    remainder goes to the first ranks otherwise)."""
    base, extra = divmod(n, world.size)
    start = world.rank * base + min(world.rank, extra)
    return slice(start, start + base + (1 if world.rank < extra else 0))

def passes_to_add(passes: int, world: Any) -> int:
    """How many empty forward/backward passes this rank adds so that every rank runs as many as the busiest."""
    most = all_reduce(torch.tensor([passes], dtype=torch.int64), world, "max")
    return int(most.item()) - passes


def all_gather_objects(obj: Any, world: World) -> list[Any]:
    """Every rank's ``obj`` (picklable), in rank order; ``[obj]`` for one process."""
    if not world.enabled:
        return [obj]
    import torch.distributed as dist

    out: list[Any] = [None] * world.size
    dist.all_gather_object(out, obj)
    return out


def all_reduce(tensor: torch.Tensor, world: World, op: str = "sum") -> torch.Tensor:
    """``tensor`` reduced over the ranks (``sum``, ``max`` or ``min``), in place; unchanged for one process."""
    if world.enabled:
        import torch.distributed as dist

        ops = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}
        device = torch.device("cuda") if dist.get_backend() == "nccl" else torch.device("cpu")
        moved = tensor.to(device)
        dist.all_reduce(moved, op=ops[op])
        tensor.copy_(moved.to(tensor.device))
    return tensor


def barrier(world: World) -> None:
    if world.enabled:
        import torch.distributed as dist

        dist.barrier()


def sum_gradients_hook(process_group: Any, bucket: Any) -> Any:
    """DDP comm hook: all-reduce each gradient bucket as a *sum* (DDP's default divides by the world size;
    the trainer's per-rank losses are already shares of the global loss)."""
    import torch.distributed as dist

    group = process_group if process_group is not None else dist.group.WORLD
    future = dist.all_reduce(bucket.buffer(), group=group, async_op=True).get_future()
    return future.then(lambda f: f.value()[0])


class LogProbModule(torch.nn.Module):
    """``forward(*args, **kwargs)`` = ``fn(model, *args, **kwargs)``: the policy's log-prob computation as one
    module, so that DDP sees the forward that produces the loss (the chunked head calls the backbone and the
    head weight directly, not ``model.forward``)."""

    def __init__(self, model: torch.nn.Module, fn: Any):
        super().__init__()
        self.model = model
        self.fn = fn

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(self.model, *args, **kwargs)


def wrap_ddp(module: torch.nn.Module, world: World) -> Any:
    """``DistributedDataParallel`` over ``module``'s trainable parameters, gradients summed across ranks
    (:func:`sum_gradients_hook`); frozen parameters and buffers are neither broadcast nor reduced."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    frozen = [n for n, p in module.named_parameters() if not p.requires_grad]
    frozen += [n for n, _ in module.named_buffers()]
    if hasattr(DDP, "_set_params_and_buffers_to_ignore_for_model"):
        DDP._set_params_and_buffers_to_ignore_for_model(module, frozen)
    device = next(module.parameters()).device
    import inspect

    # buffers are ignored above (never synced); newer torch names the switch forward_sync_buffers
    no_sync = ("forward_sync_buffers" if "forward_sync_buffers" in inspect.signature(DDP.__init__).parameters
               else "broadcast_buffers")
    ddp = DDP(module, device_ids=[device.index] if device.type == "cuda" else None, find_unused_parameters=False,
              **{no_sync: False})
    import torch.distributed as dist

    # DDP checks the hook's annotations as objects (this module's are strings: postponed evaluation)
    sum_gradients_hook.__annotations__.update(bucket=dist.GradBucket, process_group=Any,
                                              **{"return": torch.futures.Future[torch.Tensor]})
    ddp.register_comm_hook(None, sum_gradients_hook)
    return ddp
