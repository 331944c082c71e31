"""The step planner: how one GRPO update runs on this device, chosen once, before the first step.

``plan_step(device, model_config, batch, settings) -> StepPlan`` picks the five things that trade the update's
time against its memory:

  micro_batch_tokens      padded tokens per forward/backward (whole rows; 0: the micro-batch at once)
  gradient_checkpointing  keep only the decoder layers' inputs and recompute each layer in backward
  mlp_chunk_tokens        the MLP tile under checkpointing (0: untiled; grpo_core.policy.activations)
  logprob_chunk_size      tokens per tile of the chunked log-prob head (grpo_core.policy.logprobs)
  share_prompts           one copy of a group's prompt in the forward (grpo_core.policy.shared_prompts)

plus the kernel shared prompts are packed through and the autocast dtype the policy's forwards run under. Every
candidate is priced with the one memory model, :func:`grpo_core.policy.memory_model.estimate_peak_memory` (what
``--dry-run`` prints is the chosen candidate's estimate: the process's whole footprint, its loaded weights included),
and must fit the budget: ``[trainer] memory_budget_gb`` when set, else 90% of the memory this process may hold on the
accelerator (its free memory plus what the process holds already, the loaded policy among it, capped by torch's
per-process memory fraction), less what a colocated vLLM engine keeps during the update
(``vllm_gpu_memory_utilization`` of the device, unless it sleeps); on a CPU only a budget the user set bounds the plan
(its RAM is shared with the data, the rewards and the sandbox, so the machine's free memory is no promise).

The choices, by device:

- **CPU**: today's defaults, which measure best there (a 2-core CPU is compute-bound at any batch size, and
  dense packed-prompt attention saves the repeated prompt's FLOPs): 4,096-token passes, checkpointing, MLP tiles
  by the hidden size, 1,024-token head tiles, prompts shared through dense masks (torch runs no FlexAttention
  backward on a CPU). A budget only shrinks the passes.
- **CUDA** (and other accelerators): the fewest, largest passes that fit, because a GPU is launch-bound on small
  passes (a pass below :data:`SATURATION_TOKENS` tokens is priced as if it had that many); no checkpointing where
  the memory allows it (the recompute is a third of the step's FLOPs), then checkpointing without MLP tiles, then
  with them. Attention stays on the fused kernels: prompts are shared only through a packing kernel that is one
  (:data:`PACKING_KERNELS` in :data:`FUSED_KERNELS`: FlexAttention block masks, where torch has them), else not
  at all; the estimate prices the packed rows. LoRA and QLoRA run under autocast in the base weights' 16-bit
  dtype (peft keeps adapters in fp32, which otherwise takes every adapter GEMM out of the tensor cores), and the
  head with them. The head takes 4,096-token tiles (fewer, larger GEMMs; its memory barely changes, the vocabulary slice
  shrinks to keep a tile's size).

A key the user set (in the run file, ``--set`` or the Python API's dict) is never changed: the planner plans the
others around it. When no candidate fits, :class:`~grpo_rewards.errors.ConfigError` says so in one line naming
the key (``trainer.memory_budget_gb``, or the explicit key that rules every fitting plan out).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from grpo_core.policy.activations import (
    disable_gradient_checkpointing,
    enable_gradient_checkpointing,
    is_checkpointing,
    mlp_tile_tokens,
    tile_mlp,
    untile_mlp,
)
from grpo_core.policy.memory_model import (
    GiB,
    MemoryEstimate,
    ParamCounts,
    count_parameters,
    estimate_peak_memory,
)
from grpo_core.policy.models import set_compute_dtype
from grpo_core.policy.packed_attention import DENSE, FLEX, flex_available, use_flex_packing
from grpo_rewards.errors import ConfigError

if TYPE_CHECKING:
    from grpo_core.config import RunConfig

SATURATION_TOKENS = 8192  # tokens per pass under which a GPU pass is priced as if it had this many (launch-bound)
FREE_MEMORY_SHARE = 0.9  # of the memory the process may hold: the allocator's fragmentation and the CUDA context
RECOMPUTE_COST = 1 / 3  # checkpointing's extra forward, as a share of forward + backward
TILE_COST = 0.1  # the tiled MLP's extra MLP forward, as a share of the step
CPU_MICRO_BATCH_TOKENS = 4096
CPU_LOGPROB_CHUNK = 1024
CUDA_LOGPROB_CHUNK = 4096
# The kernels shared prompts are packed through (grpo_core.policy.packed_attention), preferred first: FlexAttention
# block masks (fused), a dense [rows, L, L] mask (takes sdpa off the flash and memory-efficient kernels). Varlen
# flash attention is fused but is not one: transformers' packed path attends within each sequence only, and a
# completion must see its prompt.
PACKING_KERNELS: tuple[str, ...] = (FLEX, DENSE)
FUSED_KERNELS = ("flash", "mem_efficient", FLEX, "flash_varlen")  # the attention kernels that keep scores on chip
PLANNED = ("grpo.micro_batch_tokens", "model.gradient_checkpointing", "model.mlp_chunk_tokens",
           "grpo.logprob_chunk_size", "grpo.share_prompts")


@dataclass(frozen=True)
class DeviceInfo:
    """What the planner knows of the device: its type, name, memory and the attention kernels it runs."""

    type: str  # "cpu", "cuda", ...
    name: str = ""
    total_bytes: int | None = None
    # what this process may hold in all: the device's free memory plus what the process holds already (the loaded
    # policy), no more than torch's per-process memory fraction of the total
    available_bytes: int | None = None
    kernels: frozenset[str] = frozenset()  # FUSED_KERNELS this device runs

    @property
    def is_cpu(self) -> bool:
        return self.type == "cpu"


def describe_device(device: Any = None) -> DeviceInfo:
    """The device the policy trains on (default: CUDA when available, else the CPU): the memory this process may
    hold there (its free memory plus the process's own reservation, which holds the loaded policy the estimate
    counts; capped by ``torch.cuda.set_per_process_memory_fraction``) and its attention kernels (flash needs compute
    capability 8.0+, flex_attention torch's module and 8.0+, varlen flash the ``flash_attn`` package)."""
    device = torch.device(device if device is not None else ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type != "cuda":
        return DeviceInfo(device.type, os.uname().machine if hasattr(os, "uname") else device.type)
    free, total = torch.cuda.mem_get_info(device)
    available = free + torch.cuda.memory_reserved(device)
    fraction = torch.cuda.get_per_process_memory_fraction(device)
    if fraction < 1.0:  # the caching allocator refuses to reserve more than this share of the total
        available = min(available, int(fraction * total))
    kernels = set()
    major, _ = torch.cuda.get_device_capability(device)
    if major >= 8 and torch.backends.cuda.flash_sdp_enabled():
        kernels.add("flash")
    if torch.backends.cuda.mem_efficient_sdp_enabled():
        kernels.add("mem_efficient")
    if flex_available() and major >= 8:  # its Triton kernels' shared memory: Ampere and later
        kernels.add(FLEX)
    if importlib.util.find_spec("flash_attn") is not None and major >= 8:
        kernels.add("flash_varlen")
    return DeviceInfo("cuda", torch.cuda.get_device_name(device), int(total), int(available), frozenset(kernels))


@dataclass(frozen=True)
class BatchShape:
    """One optimizer micro-batch as the update sees it on this process, and the whole step's generation."""

    rows: int  # sequences per micro-batch (the loss normalisation unit) on this process
    step_rows: int  # sequences the step generates on this process (prompts x group)
    prompt_length: int
    completion_length: int
    group_size: int

    @property
    def sequence_length(self) -> int:
        return self.prompt_length + self.completion_length


@dataclass(frozen=True)
class PlanSettings:
    """The run's own settings the estimate needs, and the planned keys the user set (``explicit``: dotted key ->
    value)."""

    dtype: str = "float32"
    lora_rank: int = 0
    quantization_4bit: bool = False
    offload_activations: bool = False
    beta: float = 0.0
    num_iterations: int = 1
    budget_gb: float | None = None  # [trainer] memory_budget_gb
    explicit: dict[str, Any] = field(default_factory=dict)
    # share of the device's total memory a colocated generation engine keeps through the update (vLLM's
    # gpu_memory_utilization when it does not sleep)
    colocated_share: float = 0.0
    policy_samples: bool = True  # the policy samples the completions itself (False: a vLLM engine or server does)


@dataclass
class StepPlan:
    """The chosen settings, the estimate of the chosen step, the budget it fits and why each value was chosen."""

    device: DeviceInfo
    micro_batch_tokens: int
    gradient_checkpointing: bool
    mlp_chunk_tokens: int  # 0: untiled
    logprob_chunk_size: int
    share_prompts: bool
    packing_kernel: str | None  # what shared prompts are packed through (None: not shared)
    autocast_dtype: str | None
    estimate: MemoryEstimate
    budget_bytes: int | None
    budget_source: str
    reasons: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for the run folder and the metrics."""
        return {"device": self.device.type, "device_name": self.device.name,
                "micro_batch_tokens": self.micro_batch_tokens, "gradient_checkpointing": self.gradient_checkpointing,
                "mlp_chunk_tokens": self.mlp_chunk_tokens, "logprob_chunk_size": self.logprob_chunk_size,
                "share_prompts": self.share_prompts, "packing_kernel": self.packing_kernel,
                "autocast_dtype": self.autocast_dtype,
                "estimated_peak_gb": round(self.estimate.peak / GiB, 4),
                "budget_gb": None if self.budget_bytes is None else round(self.budget_bytes / GiB, 4),
                "budget_source": self.budget_source, "reasons": dict(self.reasons)}

    def table(self) -> str:
        """The plan as printed at start, by ``grpo train --dry-run`` and ``grpo config validate``."""
        budget = "none" if self.budget_bytes is None else f"{self.budget_bytes / GiB:.2f} GiB ({self.budget_source})"
        lines = [f"step plan on {self.device.type}{f' ({self.device.name})' if self.device.name else ''}: "
                 f"estimated peak {self.estimate.peak / GiB:.3f} GiB, budget {budget}"]
        values = {"grpo.micro_batch_tokens": self.micro_batch_tokens,
                  "model.gradient_checkpointing": self.gradient_checkpointing,
                  "model.mlp_chunk_tokens": self.mlp_chunk_tokens,
                  "grpo.logprob_chunk_size": self.logprob_chunk_size,
                  "grpo.share_prompts": self.share_prompts,
                  "packing kernel": self.packing_kernel or "none",
                  "autocast": self.autocast_dtype or "none"}
        shown = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in values.items()}
        width, value_width = max(map(len, shown)), max(6, *map(len, shown.values()))
        lines += [f"  {k:<{width}}  {v:<{value_width}}  {self.reasons.get(k, '')}" for k, v in shown.items()]
        return "\n".join(lines)


@dataclass(frozen=True)
class _Candidate:
    micro_batch_tokens: int  # the value the trainer slices by (0: the micro-batch at once)
    rows_per_pass: int
    checkpointing: bool
    tile: int  # 0: untiled


def _autocast_dtype(device: DeviceInfo, settings: PlanSettings) -> str | None:
    """The 16-bit dtype the forwards run under on an accelerator: a LoRA/QLoRA base's own (bf16/fp16), or a
    16-bit checkpoint fully fine-tuned (fp32 master weights; ``settings.dtype`` names the checkpoint's)."""
    if device.is_cpu or settings.dtype not in ("bfloat16", "float16"):
        return None
    return settings.dtype


def _time(batch: BatchShape, c: _Candidate, device: DeviceInfo) -> float:
    """Relative time of one micro-batch's update: its tokens, each pass priced at no fewer than
    :data:`SATURATION_TOKENS` on an accelerator (on a CPU every schedule of the same tokens costs the same), times
    the recompute and tile surcharges."""
    seq, rows, per = batch.sequence_length, batch.rows, c.rows_per_pass
    floor = 1 if device.is_cpu else SATURATION_TOKENS
    full, rest = divmod(rows, per)
    tokens = full * max(per * seq, floor) + (max(rest * seq, floor) if rest else 0)
    return tokens * (1 + RECOMPUTE_COST * c.checkpointing + TILE_COST * bool(c.tile))


def _rows_of(micro_batch_tokens: int, batch: BatchShape) -> int:
    """Rows per pass the trainer runs under ``micro_batch_tokens`` (its ``rows_per_slice``) for this batch."""
    if micro_batch_tokens <= 0:
        return batch.rows
    return max(1, min(batch.rows, micro_batch_tokens // batch.sequence_length))


def _token_options(device: DeviceInfo, batch: BatchShape, explicit: dict[str, Any]) -> list[int]:
    """``micro_batch_tokens`` values to try: the user's; on a CPU the default, then passes of half as many rows
    down to one; elsewhere the micro-batch at once, then halving."""
    if "grpo.micro_batch_tokens" in explicit:
        return [int(explicit["grpo.micro_batch_tokens"])]
    first = CPU_MICRO_BATCH_TOKENS if device.is_cpu else 0
    out, rows = [first], _rows_of(first, batch)
    while rows > 1:
        rows //= 2
        out.append(rows * batch.sequence_length)
    return out


def plan_step(device: DeviceInfo, model_config: Any, batch: BatchShape, settings: PlanSettings,
              counts: ParamCounts | None = None) -> StepPlan:
    """The fastest step that fits the budget on ``device`` (see the module docs); explicit keys kept as set.
    Raises :class:`ConfigError` naming the key when nothing fits."""
    counts = counts or count_parameters(model_config)
    explicit = settings.explicit
    budget, source = _budget(device, settings)
    hidden_tile = mlp_tile_tokens(model_config, "auto") or 0
    tile_options = [explicit["model.mlp_chunk_tokens"]] if "model.mlp_chunk_tokens" in explicit else (
        [hidden_tile] if device.is_cpu else [0, hidden_tile])
    tile_options = [hidden_tile if t is None else int(t) for t in tile_options]
    ckpt_options = [bool(explicit["model.gradient_checkpointing"])] if "model.gradient_checkpointing" in explicit \
        else ([True] if device.is_cpu else [False, True])
    autocast = _autocast_dtype(device, settings)
    chunk = int(explicit.get("grpo.logprob_chunk_size", CPU_LOGPROB_CHUNK if device.is_cpu else CUDA_LOGPROB_CHUNK))
    share, kernel, share_why = _share_prompts(device, settings)

    def estimate(c: _Candidate) -> MemoryEstimate:
        return estimate_peak_memory(
            model_config, num_sequences=batch.rows, generation_sequences=batch.step_rows,
            prompt_length=batch.prompt_length, completion_length=batch.completion_length, dtype=settings.dtype,
            lora_rank=settings.lora_rank, quantization_4bit=settings.quantization_4bit,
            gradient_checkpointing=c.checkpointing, offload_activations=settings.offload_activations,
            chunk_size=chunk, beta=settings.beta, num_iterations=settings.num_iterations,
            mlp_chunk_tokens=c.tile or None, micro_batch_tokens=c.micro_batch_tokens, counts=counts,
            lora_autocast=autocast is not None, shared_prompts=kernel, group_size=batch.group_size,
            policy_samples=settings.policy_samples)

    candidates = [_Candidate(mbt, _rows_of(mbt, batch), ck, t if ck else 0) for ck in ckpt_options
                  for t in (tile_options if ck else [0]) for mbt in _token_options(device, batch, explicit)]
    candidates = list(dict.fromkeys(candidates))
    priced = sorted(((_time(batch, c, device), c) for c in candidates), key=lambda tc: (tc[0], -tc[1].rows_per_pass))
    chosen = chosen_est = None
    for _, c in priced:
        est = estimate(c)
        if budget is None or est.peak <= budget:
            chosen, chosen_est = c, est
            break
    if chosen is None or chosen_est is None:
        raise _no_fit(device, model_config, batch, settings, counts, budget, source, estimate, min(
            (estimate(c) for c in candidates), key=lambda e: e.peak))

    reasons = _reasons(device, explicit, chosen, batch, budget is not None)
    reasons.setdefault("grpo.share_prompts", share_why)
    reasons.setdefault("grpo.logprob_chunk_size", "the CPU default" if device.is_cpu else
                       "fewer, larger head GEMMs on an accelerator")
    reasons["autocast"] = (f"{'LoRA/QLoRA' if settings.lora_rank else 'fp32 master weights'} in the base's "
                           f"{autocast}" if autocast else "the weights' own dtype")
    reasons["packing kernel"] = {FLEX: "FlexAttention block masks: fused, the blocks no query sees skipped",
                                 DENSE: "a dense [rows, L, L] mask through sdpa or eager attention"}.get(
                                     kernel or "", "prompts not shared")
    return StepPlan(device, chosen.micro_batch_tokens, chosen.checkpointing, chosen.tile, chunk, share, kernel,
                    autocast, chosen_est, budget, source, reasons)


def _budget(device: DeviceInfo, settings: PlanSettings) -> tuple[int | None, str]:
    if settings.budget_gb is not None:
        return int(settings.budget_gb * GiB), "trainer.memory_budget_gb"
    if device.is_cpu or device.available_bytes is None:
        return None, "none on a CPU unless trainer.memory_budget_gb is set"
    budget, source = int(device.available_bytes * FREE_MEMORY_SHARE), f"{FREE_MEMORY_SHARE:.0%} of the device " \
        "memory this process may hold"
    if settings.colocated_share and device.total_bytes:
        budget -= int(settings.colocated_share * device.total_bytes)
        source += f", less the colocated vLLM engine's {settings.colocated_share:.0%}"
    return max(budget, 0), source


def _share_prompts(device: DeviceInfo, settings: PlanSettings) -> tuple[bool, str | None, str]:
    """(share prompts, the kernel they are packed through, why). A CPU packs through dense masks (torch has no
    FlexAttention backward there); an accelerator through the first fused packing kernel it runs, or not at all
    unless the user asked for sharing, which then takes the dense mask."""
    asked = settings.explicit.get("grpo.share_prompts")
    if asked is not None and not asked:
        return False, None, "set"
    if device.is_cpu:
        return True, DENSE, "set" if asked else "dense packed rows: the prompt's FLOPs once per group on a CPU"
    fused = [k for k in PACKING_KERNELS if k in FUSED_KERNELS and k in device.kernels]
    if fused:
        return True, fused[0], "set" if asked else f"packed through {fused[0]}: one copy of each prompt, attention " \
            "on a fused kernel"
    if asked:
        return True, DENSE, "set (a dense mask here, which takes attention off the fused kernels)"
    return False, None, "no fused packing kernel here (a dense mask takes attention off the fused kernels)"


def _reasons(device: DeviceInfo, explicit: dict[str, Any], c: _Candidate, batch: BatchShape,
             budgeted: bool) -> dict[str, str]:
    out = {key: "set" for key in PLANNED if key in explicit}
    fits = "fits the budget" if budgeted else "no budget"
    if device.is_cpu:
        out.setdefault("grpo.micro_batch_tokens", f"{c.rows_per_pass} of {batch.rows} rows per pass: "
                       + ("the CPU default" if c.micro_batch_tokens == CPU_MICRO_BATCH_TOKENS
                          else "the CPU default shrunk to fit the budget"))
        out.setdefault("model.gradient_checkpointing", "the CPU default")
        out.setdefault("model.mlp_chunk_tokens", "the CPU default (the hidden size, at least 4096)")
        return out
    out.setdefault("grpo.micro_batch_tokens", f"{c.rows_per_pass} of {batch.rows} rows per pass: the fewest "
                   f"passes that {fits}")
    out.setdefault("model.gradient_checkpointing", "needed to fit" if c.checkpointing else
                   f"off: the activations fit ({fits})")
    out.setdefault("model.mlp_chunk_tokens", "tiled to fit" if c.tile else "untiled (no extra MLP forward)")
    return out


def _no_fit(device: DeviceInfo, model_config: Any, batch: BatchShape, settings: PlanSettings, counts: ParamCounts,
            budget: int | None, source: str, estimate: Any, smallest: MemoryEstimate) -> ConfigError:
    """One line: the smallest plan's peak against the budget, naming the key to change."""
    need = f"{smallest.peak / GiB:.2f} GiB"
    have = f"{(budget or 0) / GiB:.2f} GiB"
    if settings.explicit:
        try:  # would the planner fit without the user's own planned keys? then those are what to change
            plan_step(device, model_config, batch, PlanSettings(**{**settings.__dict__, "explicit": {}}), counts)
        except ConfigError:
            pass
        else:
            keys = ", ".join(sorted(settings.explicit))
            return ConfigError(f"the step needs {need} as set but the budget is {have} ({source}); a plan "
                               "that leaves it to the planner fits", key=sorted(settings.explicit)[0] if len(
                                   settings.explicit) == 1 else keys)
    phase = "its generation's KV cache" if smallest.generation > smallest.training else "one row per pass"
    engine = (", lower generation.vllm_gpu_memory_utilization or let the engine sleep (generation.vllm_sleep_level)"
              if settings.colocated_share and settings.budget_gb is None else "")
    return ConfigError(f"the smallest step ({phase}) needs {need}, more than the {have} budget ({source}); "
                       f"raise it{engine}, or lower generation.max_completion_length, generation.num_generations or "
                       "grpo.prompts_per_step", key="trainer.memory_budget_gb")


# ------------------------------------------------------------------ from a run config ----

def explicit_settings(cfg: RunConfig) -> dict[str, Any]:
    """The planned keys the user set (file, ``--set`` or the Python API's dict), with their values."""
    out = {}
    for dotted in PLANNED:
        section, key = dotted.split(".")
        if cfg.is_set(section, key):
            out[dotted] = getattr(getattr(cfg, section), key)
    return out


def weights_dtype(cfg: RunConfig, model_config: Any) -> str:
    """The dtype the weights load in (a 4-bit model's compute dtype for the rest; ``auto``: the checkpoint's)."""
    m = cfg.model
    dtype = cfg.quantization.compute_dtype if m.dtype == "auto" and cfg.quantization.load_in_4bit else m.dtype
    if dtype == "auto":
        dtype = str(getattr(model_config, "dtype", None) or getattr(model_config, "torch_dtype", None)
                    or "float32").removeprefix("torch.")
    return dtype


def inputs_from_config(cfg: RunConfig, model_config: Any, processes: int = 1) -> tuple[BatchShape, PlanSettings]:
    """The batch one process updates and the run's settings, as the trainer will run them."""
    step_rows = max(1, cfg.sequences_per_step // processes)
    micro_batches = cfg.grpo.steps_per_generation or cfg.grpo.gradient_accumulation_steps  # per generation batch
    batch = BatchShape(rows=max(1, step_rows // micro_batches), step_rows=step_rows,
                       prompt_length=cfg.data.max_prompt_length or 512,
                       completion_length=cfg.generation.max_completion_length,
                       group_size=cfg.generation.num_generations)
    settings = PlanSettings(dtype=weights_dtype(cfg, model_config), lora_rank=cfg.lora.r if cfg.lora.enabled else 0,
                            quantization_4bit=cfg.quantization.load_in_4bit,
                            offload_activations=cfg.model.offload_activations, beta=cfg.grpo.beta,
                            # more than one optimizer step per generation batch: the old-policy pass runs
                            num_iterations=cfg.optimizer_steps_per_step, budget_gb=cfg.trainer.memory_budget_gb,
                            explicit=explicit_settings(cfg), colocated_share=colocated_engine_share(cfg),
                            policy_samples=cfg.generation.backend != "vllm")
    return batch, settings


def colocated_engine_share(cfg: RunConfig) -> float:
    """The share of the device a colocated vLLM engine keeps while the policy trains: its
    ``vllm_gpu_memory_utilization`` unless it sleeps between calls (level 1 and 2 free its KV cache and move or
    drop its weights); 0 for any other sampler."""
    g = cfg.generation
    if g.backend != "vllm" or g.vllm_mode != "colocate" or g.vllm_sleep_level:
        return 0.0
    return float(g.vllm_gpu_memory_utilization)


def plan_for_config(cfg: RunConfig, model_config: Any, device: DeviceInfo | None = None, processes: int = 1,
                    counts: ParamCounts | None = None) -> StepPlan:
    """:func:`plan_step` for a run config on ``device`` (default: :func:`describe_device` of this machine)."""
    batch, settings = inputs_from_config(cfg, model_config, processes)
    try:
        return plan_step(device or describe_device(), model_config, batch, settings, counts)
    except ConfigError as exc:  # the run file's name in front of the key
        raise ConfigError([dataclasses.replace(p, file=cfg.path) for p in exc.problems]) from None


def apply_step_plan(model: Any, plan: StepPlan, *, offload_activations: bool = False) -> None:
    """Make a loaded policy run as ``plan`` says: its layers checkpointed or not, its MLPs tiled or not, its
    forwards under the planned autocast, its packed rows through the planned kernel (the trainer slices, chunks
    and shares prompts by the plan itself)."""
    if plan.gradient_checkpointing:
        if not is_checkpointing(model):
            base = model.get_base_model() if hasattr(model, "get_base_model") else model
            if hasattr(model, "get_base_model"):
                base.enable_input_require_grads()  # frozen embeddings: checkpointed blocks still need a grad path
            enable_gradient_checkpointing(model, offload_to_cpu=offload_activations,
                                          mlp_chunk_tokens=plan.mlp_chunk_tokens)
        else:
            untile_mlp(model)
            if plan.mlp_chunk_tokens:
                tile_mlp(model, plan.mlp_chunk_tokens)
    elif is_checkpointing(model):
        disable_gradient_checkpointing(model)
    if plan.autocast_dtype:
        set_compute_dtype(model, plan.autocast_dtype)
    use_flex_packing(model, plan.share_prompts and plan.packing_kernel == FLEX)
