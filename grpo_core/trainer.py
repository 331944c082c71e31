"""The GRPO loop, to be read top to bottom (nanoGPT style).

    for each step:
        1. sample prompts            ``prompts_per_step`` rows, in a seeded order that survives resume
        2. generate a group each     ``num_generations`` completions per prompt (a generation backend); with
                                     tools, each a conversation of model and tool turns whose tool tokens
                                     the loss leaves out (grpo_core.generation.multi_turn, ``tool_mask``)
        3. score                     the composed rewards: a total and one column per reward (each run of
                                     finished groups as it arrives, while the rest generates, where the
                                     backend hands groups over: ``generation.score_during_generation``)
        4. advantages                ``(R - group mean) / (group std + 1e-4)`` (grpo_core.algorithm.advantages)
        5. policy update             ``num_iterations`` passes over this batch, each an optimizer step per slice
                                     of it (one slice unless ``steps_per_generation`` says more), each over
                                     ``gradient_accumulation_steps`` micro-batches (grpo_core.algorithm.loss)
        then metrics, samples, checkpoint; every ``eval_every`` steps (and at the end) the held-out
        rows get one greedy completion each, scored by the same rewards (``eval/...`` metrics);
        ``eval_on_start`` adds one before the first update (step 0)

Memory: each forward/backward sees at most the step plan's ``micro_batch_tokens`` padded tokens (whole rows; a row
longer than that runs alone), so activation memory is bounded by that budget, not by the group size.

``max_steps`` counts loop steps (generation batches); with ``num_iterations = mu`` and ``k`` slices the
optimizer and the LR schedule take ``mu * k`` steps per loop step. Old log-probs (``mu * k > 1``) are computed
once per batch, before the first update; reference log-probs (beta != 0) come from
``models.reference_model`` (with LoRA: the same model, adapter disabled).

Precision: forwards run under the autocast of ``models.compute_dtype`` (a 16-bit checkpoint fully
fine-tuned keeps fp32 master weights); gradients through fp16 activations are loss-scaled
(``torch.amp.GradScaler``). Old-policy and reference log-probs are computed in eval mode.

Prompts longer than ``data.max_prompt_length`` tokens are counted at load and dropped (with a warning),
refused, or cut from the left, as ``data.overlong_prompts`` says.

``peak_memory_gb`` in the metrics is the peak of that step alone (CUDA peak statistics, or the peak
resident set size on Linux, both reset at the start of each step); ``memory/parameters_gb`` and
``memory/optimizer_gb`` are the training state one process holds (``metrics.held_state_gb``: what sharding saves).

Why this module is over 600 lines: it is the loop, kept in one file so that a step reads top to bottom
(``train``, then ``_update`` and its parts); what is not the loop lives in the folders it calls.

SIGINT finishes the current step, writes a checkpoint and returns (``interrupted: True``); a second
SIGINT stops at once.

Several processes (``torchrun --nproc_per_node N -m grpo_core train``; grpo_core.parallel.distributed): every rank
computes the same step 1 and takes its contiguous share of the prompts (whole groups); the rewards of the
whole step are gathered before step 4, so the advantages are those of one process; in step 5 each row's
loss is divided by the global denominators of its micro-batch (the ``gradient_accumulation_steps`` slices
of the step's sequences in the single-process order), so the per-rank losses add up to the single-process
loss and DDP sums the gradients (synchronised by the last backward of each optimizer step, ``no_sync``
before it). Metrics are reduced over the ranks; only rank 0 logs, writes samples, checkpoints (with every
rank's RNG state) and the model, and calls the plugin hooks; a SIGINT on any rank stops all of them after
the same step. ``Trainer(cfg, resume=True)`` restores weights, optimizer, scheduler, RNG and the
data position from the newest checkpoint, so the run continues as if never stopped.

``[distributed] engine = "fsdp2"`` shards the model with torch's ``fully_shard`` instead of DDP (grpo_core.parallel.fsdp;
its :class:`~grpo_core.parallel.fsdp.FSDP2Engine`): the gradients are reduce-scattered, summed, on every backward,
and since each sharded forward/backward is a collective, a rank with fewer passes in an optimizer step adds
passes that contribute nothing; generation, evaluation and the old/reference log-probs run on the whole model,
gathered once around them (the engine's ``whole_model``); checkpoints and the saved model hold the full,
unsharded weights, gathered on rank 0.

``[distributed] engine = "deepspeed"`` (one process or several) runs the update through DeepSpeed's ZeRO engine
(grpo_core.parallel.deepspeed): its optimizer (partitioned over the ranks, optionally on the CPU) clips, steps and
steps the schedule; each backward goes through the engine with the loss times the number of processes (DeepSpeed
averages), the last one of an optimizer step marked as its accumulation boundary, and every rank runs as many
passes (ZeRO-2 reduces on each backward). The weights stay whole on every rank (stages 0-2), so generation and
the no-grad passes use the model as they do without an engine; checkpoints gather each rank's optimizer partition.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import os
import signal
import statistics
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from grpo_core.adapter import loaded_line as adapter_loaded_line
from grpo_core.algorithm.advantages import compute_advantages
from grpo_core.algorithm.entropy import EntropyControl, entropy_threshold, high_entropy_mask
from grpo_core.algorithm.loss import grpo_loss
from grpo_core.algorithm.sampler_correction import importance_ratio, metric_weights
from grpo_core.atomic_folders import is_disk_full
from grpo_core.config import RunConfig, as_run_config
from grpo_core.context import TrainerState, TrainingContext
from grpo_core.data import epoch_permutation, format_prompt, train_eval_rows
from grpo_core.generation.backend import Generation, build_backend
from grpo_core.generation.multi_turn import tool_metrics
from grpo_core.generation.tools.environments import EnvironmentPool, with_observation
from grpo_core.generation.tools.facts import conversation_inputs
from grpo_core.generation.transformers_backend import sampling_autocast
from grpo_core.outputs import check_outputs
from grpo_core.outputs.hub import HubPusher
from grpo_core.parallel.distributed import (
    LogProbModule,
    all_gather_objects,
    all_reduce,
    barrier,
    check_world,
    init_process_group,
    share,
    world_from_env,
)
from grpo_core.parallel.engine import engine_class
from grpo_core.policy.logprobs import check_chunked_head, check_shared_prompts, completion_logprobs
from grpo_core.policy.memory_model import count_parameters
from grpo_core.policy.models import (
    base_config,
    has_active_dropout,
    load_model_and_tokenizer,
    reference_model,
    save_model,
    trainable_parameters,
)
from grpo_core.policy.reference_sync import reference_sync
from grpo_core.policy.router_loss import RouterLoss, RouterStep
from grpo_core.policy.step_plan import apply_step_plan, describe_device, plan_for_config
from grpo_core.prompt_fit import fit_prompts, fit_rows
from grpo_core.row_stream import StreamedRows
from grpo_core.run_folder.checkpoints import (
    CheckpointError,
    RunFolderError,
    describe_restored,
    disk_full_error,
    load_latest_checkpoint,
    restore,
    rng_state,
    save_checkpoint,
    write_error,
)
from grpo_core.run_folder.layout import CHECKPOINTS, MERGED_DIR, MODEL_DIR
from grpo_core.run_folder.lock import INHERITED, hold
from grpo_core.run_folder.metrics import MetricsLogger, held_state_gb, peak_memory_gb
from grpo_core.run_folder.overlap import check_run_dir_apart
from grpo_rewards.errors import UserError
from grpo_rewards.plugins import get_registry
from grpo_rewards.streaming import StreamingScore

# the micro-batch metrics that add up over a micro-batch's row slices (the others are token means)
LOSS_METRICS = ("loss", "policy_loss")

def _training_logprobs(model: Any, *args: Any, **kwargs: Any) -> tuple[torch.Tensor, Any]:
    """What the engine's log-prob module computes: :func:`completion_logprobs`, looked up at each call (so that
    the policy's passes and the no-grad ones run the same function, whatever patches this module)."""
    return completion_logprobs(model, *args, **kwargs)


def generation_split(rows: int, steps: int, world: Any) -> list[torch.Tensor]:
    """The rows of each of the ``steps`` optimizer steps of a generation batch of ``rows``, in the single-process
    order: part ``s`` of every rank's contiguous share of them, in rank order, as TRL splits each process's generation
    batch (so which rows train together depends on the number of processes; one step: every row)."""
    ranks = [share(rows, dataclasses.replace(world, rank=r)) for r in range(world.size)]
    parts = [torch.arange(r.start, r.stop).tensor_split(steps) for r in ranks]
    return [torch.cat([p[s] for p in parts]) for s in range(steps)]


def reward_means(total: torch.Tensor, columns: dict[str, list]) -> dict[str, float]:
    """``reward/mean`` over the scored completions (NaN total: unscored), and ``rewards/<alias>`` and
    ``rewards/<alias>/std`` (sample deviation, 0 for one value) over each reward's non-None values (NaN when
    none)."""
    scored = total[~torch.isnan(total)]
    out = {"reward/mean": scored.mean().item() if scored.numel() else math.nan}
    for alias, values in columns.items():
        present = [v for v in values if v is not None]
        out[f"rewards/{alias}"] = sum(present) / len(present) if present else math.nan
        out[f"rewards/{alias}/std"] = statistics.stdev(present) if len(present) > 1 else 0.0 if present else math.nan
    return out


def reset_peak_memory(device: Any) -> None:
    """Start a new peak: CUDA's peak statistics, or Linux's peak RSS (``/proc/self/clear_refs``)."""
    if torch.device(device).type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        return
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


def peak_memory_since_reset_gb(device: Any) -> float:
    """Peak memory since :func:`reset_peak_memory` in GiB (CUDA allocated, else Linux's VmHWM; elsewhere
    the process-lifetime peak of ``metrics.peak_memory_gb``)."""
    if torch.device(device).type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**30
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 2**20  # kB
    except OSError:
        pass

    return peak_memory_gb(device)


def rows_per_slice(sequence_length: int, micro_batch_tokens: int) -> int:
    """Rows of ``sequence_length`` padded tokens per forward/backward under the token budget (>= 1;
    a budget of 0 means no slicing)."""
    if micro_batch_tokens <= 0:
        return 1 << 62
    return max(1, micro_batch_tokens // max(1, sequence_length))


class _NoLogger:
    """What ranks other than 0 log with: nothing."""

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        pass

    def log_samples(self, step: int, rows: list[dict[str, Any]]) -> None:
        pass

    def console_print(self, *objects: Any) -> None:
        pass

    def phase(self, text: str) -> None:
        pass

    def close(self) -> None:
        return None


def _totals(total: list[float | None]) -> torch.Tensor:
    """The total reward per completion as a tensor, NaN where no reward scored it."""
    return torch.tensor([math.nan if t is None else t for t in total], dtype=torch.float32)


def _rows_in(parts: list[Generation]) -> int:
    return sum(len(p.completions_text) for p in parts)


def _check_handed(handed: list[Generation], batch: Generation, backend: str) -> None:
    """The groups a backend handed over must be its batch's rows (what was scored is what trains)."""
    start = 0
    for part in handed:
        end, width = start + len(part.completions_text), part.completion_mask.size(1)
        mask, ids = batch.completion_mask[start:end], batch.completion_ids[start:end]
        same = (width <= mask.size(1) and torch.equal(mask[:, :width], part.completion_mask)
                and not mask[:, width:].any()
                and torch.equal(ids[:, :width] * mask[:, :width], part.completion_ids * part.completion_mask))
        if not same or part.completions_text != batch.completions_text[start:end]:
            raise RuntimeError(f"generation backend {backend!r} handed over rows {start}-{end - 1} that differ from "
                               "the batch it returned")
        start = end


def _to_floats(records: list[dict[str, torch.Tensor]]) -> list[dict[str, float]]:
    """Each record's tensors as floats, read off the device at once (one host sync for the lot)."""
    keys = [(i, key) for i, record in enumerate(records) for key in record]
    if not keys:
        return [{} for _ in records]
    values = torch.stack([records[i][key].reshape(()).double() for i, key in keys]).tolist()
    out: list[dict[str, float]] = [{} for _ in records]
    for (i, key), value in zip(keys, values, strict=True):
        out[i][key] = value
    return out


def _concat(parts: list[list[Any]]) -> list[Any]:
    return [item for part in parts for item in part]


def reduce_weighted(parts: list[tuple[dict[str, float], dict[str, int]]]) -> dict[str, float]:
    """Per-rank ``(metrics, weights)`` -> one dict: ``.../min`` and ``.../max`` keys by min and max, the others
    as means weighted by how many values each rank's number summarises (ranks with none left out; 0.0 when
    no rank has any)."""
    out: dict[str, float] = {}
    for key in parts[0][0]:
        pairs = [(m[key], w.get(key, 0)) for m, w in parts if w.get(key, 0) > 0]
        if not pairs:
            out[key] = 0.0
        elif key.endswith("/min"):
            out[key] = min(v for v, _ in pairs)
        elif key.endswith("/max"):
            out[key] = max(v for v, _ in pairs)
        else:
            out[key] = sum(v * w for v, w in pairs) / sum(w for _, w in pairs)
    return out


class _Correction:
    """The sampler correction of one batch (grpo_core.algorithm.sampler_correction): ``ratio(logps, rows)`` for
    the whole batch against the old-policy pass, or slice by slice from the training forwards' own log-probs
    (the old policy being the policy: one optimizer step, no dropout); then ``metrics()``, those of the whole
    batch over the ranks, as one ``importance_ratio`` call over every rank's rows gives them."""

    def __init__(self, batch: Generation, gen: Any, world: Any):
        self.batch, self.gen, self.world = batch, gen, world
        self.parts: list[tuple[dict[str, float], dict[str, int]]] = []

    def ratio(self, logps: torch.Tensor, rows: torch.Tensor) -> torch.Tensor | None:
        mask = self.batch.completion_mask[rows]
        if self.batch.tool_mask is not None:  # the tools' tokens were not sampled: nothing to correct there
            mask = mask * self.batch.tool_mask[rows].to(mask.dtype)
        rho, metrics = importance_ratio(logps, self.batch.sampling_logps[rows], mask,  # type: ignore[index]
                                        self.gen.importance_sampling, self.gen.importance_sampling_min,
                                        self.gen.importance_sampling_max)
        self.parts.append((metrics, metric_weights(metrics, self.gen.importance_sampling, int(mask.sum()),
                                                   len(rows))))
        return rho

    def metrics(self) -> dict[str, float]:
        parts = self.parts
        if self.world.enabled:
            parts = _concat(all_gather_objects(parts, self.world))
        if len(parts) == 1:  # one call's metrics, as it gave them
            return parts[0][0]
        return reduce_weighted(parts) if parts else {}


class _EntropyMasks:
    """``top_entropy_quantile``'s high-entropy tokens of each micro-batch (grpo_core.algorithm.entropy), the threshold
    taken over the whole micro-batch, every slice and every rank of it, as TRL takes it over its micro-batch on every
    process. ``entropies`` (``[rows, K]``, this rank's, at the weights of this optimizer step) come from one no-grad
    pass; without them (one process running each micro-batch as one slice) each slice's own forward gives them, at
    no extra pass. ``of`` answers ``(token mask, the micro-batch's tokens the bonus averages over)``."""

    def __init__(self, quantile: float | None, plan: _Plan, entropies: torch.Tensor | None, world: Any):
        self.quantile, self.mask, self.tokens = quantile, None, []
        if quantile is None or entropies is None:
            return
        rows = [torch.cat(parts) if len(parts) else torch.arange(0) for parts in plan.slices]
        mine = [entropies[r][plan.mask[r].bool()].float().cpu() for r in rows]
        every = all_gather_objects(mine, world)  # per rank, per micro-batch: its tokens' entropies
        self.mask = torch.zeros(plan.mask.shape, dtype=torch.float32, device=entropies.device)
        for i, r in enumerate(rows):
            values = torch.cat([theirs[i] for theirs in every])
            threshold = entropy_threshold(values, quantile)
            self.tokens.append(0 if threshold is None else int((values >= threshold).sum()))
            if len(r):
                self.mask[r] = high_entropy_mask(entropies[r], plan.mask[r], threshold)

    def of(self, micro: int, part: torch.Tensor, entropy: torch.Tensor | None, mask: torch.Tensor,
           group_tokens: torch.Tensor) -> tuple[torch.Tensor | None, Any]:
        if self.quantile is None or entropy is None:
            return None, group_tokens
        if self.mask is None:  # this slice is the whole micro-batch
            return high_entropy_mask(entropy, mask, entropy_threshold(entropy.detach()[mask.bool()], self.quantile)), None
        return self.mask[part], self.tokens[micro]


@dataclass
class _Plan:
    """How one step's update runs on this rank: the sequences, the loss mask, the micro-batches' slices."""

    input_ids: torch.Tensor  # [rows, P + K] prompt and completion
    attention_mask: torch.Tensor
    k: int  # completion length
    mask: torch.Tensor  # [rows, K] the completion tokens the loss counts
    num_items: torch.Tensor  # the whole step's count of them
    slices: list[Any]  # per micro-batch: this rank's rows, in slices of one forward/backward each
    group_sizes: list[tuple[int, torch.Tensor]]  # per micro-batch: its global rows and tokens
    sampling_logps: torch.Tensor | None = None  # [rows, K] the sampler's own log-probs, when it reports them

    @property
    def passes(self) -> int:
        return sum(len(parts) for parts in self.slices)

    @property
    def idle_rows(self) -> torch.Tensor:
        """What a pass that contributes nothing runs: one row of the last micro-batch this rank holds rows of."""
        return self.slices[max(i for i, parts in enumerate(self.slices) if parts)][0][:1]


class Trainer:
    """``Trainer(config).train() -> dict`` (see the module docs); ``config`` is a RunConfig, a TOML path
    or a dict of sections (the Python API); ``tools``: Python functions the model may call, beside ``[tools]
    names`` (TRL's ``tools=``); ``environment_factory``: TRL's, one stateful environment per rollout whose
    methods are tools (grpo_core.generation.tools.environments); ``environments`` holds the last batch's."""

    def __init__(self, config: RunConfig | str | Path | dict[str, Any], *, resume: bool = False,
                 registry: Any = None, tools: list[Any] | None = None, environment_factory: Any = None):
        config = as_run_config(config)
        check_run_dir_apart(config, RunFolderError)  # before anything loads: the run never writes into its inputs
        self.cfg = config
        self.registry = registry or get_registry()
        self.run_dir = Path(config.logging.output_dir)
        self.resume = resume
        engine_cls = engine_class(config, world_from_env(), self.registry)
        engine_cls.check(config)  # refused before anything loads: e.g. deepspeed not installed, 4-bit weights
        check_world(config, world_from_env().size)
        self.world, owns_group = init_process_group(config.distributed.backend)
        self.engine = engine_cls(config, self.world, owns_group)
        torch.manual_seed(config.grpo.seed)  # LoRA init and the first sampling draws (the same on every rank)

        self.model, self.tokenizer = self._load_policy()
        if torch.cuda.is_available() and not config.quantization.load_in_4bit:
            self.model.to("cuda")
        self.device = next(self.model.parameters()).device
        # micro-batches, checkpointing, MLP tiles, head chunks, prompt sharing, autocast: planned once for this
        # device and budget (grpo_core.policy.step_plan), the keys the user set kept as set
        self.step_plan = plan_for_config(config, base_config(self.model), describe_device(self.device),
                                         processes=self.world.size, counts=count_parameters(None, self.model))
        apply_step_plan(self.model, self.step_plan, offload_activations=config.model.offload_activations)
        if self.world.is_main:
            if config.model.adapter:
                print(adapter_loaded_line(self.model, config.model.adapter), file=sys.stderr, flush=True)
            print(self.step_plan.table(), file=sys.stderr, flush=True)
        self._check_head()
        self.backend = build_backend(config, self.model, self.tokenizer, self.registry)
        self.entropy = EntropyControl(config.grpo)  # the entropy options and the adaptive coefficient's state
        self.router = RouterLoss.of(self.model, config)  # an MoE model's load-balancing loss (router_aux_loss_coef)
        # TRL's environment_factory: an environment per rollout, its methods tools (last batch's: self.environments)
        self._environment_pool = environment_factory if isinstance(environment_factory, EnvironmentPool) else \
            EnvironmentPool(environment_factory) if environment_factory is not None else None
        self.environments: list[Any] | None = None
        if self._environment_pool is not None:
            tools = [*(tools or []), *self._environment_pool.tools()]
        if tools:  # TRL's tools=[callables]: with [tools] names, the rollouts' tools (grpo_core.generation.multi_turn)
            if not hasattr(self.backend, "set_tools"):
                raise UserError(f"generation backend {config.generation.backend!r} runs no tools (use \"transformers\" "
                                "or \"vllm\")")
            self.backend.set_tools(list(tools))
        schemas = getattr(self.backend, "tool_schemas", None)  # rendered into each prompt by the chat template

        d = config.data
        if schemas and not d.chat_template:
            raise UserError("tools need the chat template (data.chat_template = true): it renders them for the model")
        rows, eval_rows = self._load_rows()
        special = not d.chat_template  # as the generation backend tokenizes
        # the training rows stay lazy: a row is read, and its prompt formatted, when a step uses it
        self.rows, self.prompts = fit_rows(rows, d, self.tokenizer, special, "training", schemas)
        eval_rows = list(eval_rows)  # held-out rows: few, held in memory
        self.eval_prompts, self.eval_rows = fit_prompts(
            [format_prompt(r, d, self.tokenizer, schemas) for r in eval_rows], eval_rows, self.tokenizer,
            d.max_prompt_length, d.overlong_prompts, special, "held-out")
        self._order: tuple[int, Any] = (-1, None)  # the current epoch's row order (grpo_core.data.epoch_permutation)

        # the engine wraps the module whose forward computes the training log-probs, then builds the optimizer
        self.engine.setup(self.model, LogProbModule(self.model, _training_logprobs), trainable_parameters)
        self.params, self.optimizer, self.scheduler = self.engine.params, self.engine.optimizer, self.engine.scheduler
        # called after each optimizer step with its number over the run (None: nothing to call): the moving KL
        # reference, [grpo] sync_ref_model (grpo_core.policy.reference_sync)
        self._after_optimizer_step = reference_sync(config, self.model, self.engine.whole_model)
        self.step, self.epoch, self.position = 0, 0, 0
        self._hub = HubPusher.of(config) if self.world.is_main else None  # [hub] push_to_hub (grpo_core.outputs.hub)
        self._stop = threading.Event()
        self._started = time.monotonic()  # the time-based checkpoint cadence counts from here
        if self.world.rank > 0:  # rank 0 draws as one process would; the others from their own streams
            torch.manual_seed(config.grpo.seed + self.world.rank)

    @property
    def scaler(self) -> torch.amp.GradScaler:
        """The loss scaler of fp16 gradients (disabled for bf16 and fp32)."""
        return self.engine.scaler

    # ------------------------------------------------------------------ the loop ----

    def train(self) -> dict[str, Any]:
        """Train to ``[grpo] max_steps`` (or a Ctrl-C); the run folder is this run's alone while it lasts
        (grpo_core.run_folder.lock: another run writing it is a RunFolderError)."""
        owner = self.world.is_main and not (self.world.enabled and os.environ.get(INHERITED))
        with hold(self.run_dir, error=RunFolderError, file=self.cfg.path) if owner else contextlib.nullcontext():
            return self._train()

    def _train(self) -> dict[str, Any]:
        cfg, g = self.cfg, self.cfg.grpo
        check_outputs(cfg)  # a named tracker that is not installed, a push without a token: before the first step
        if self.resume:
            self._restore()
        main, k = self.world.is_main, cfg.generation.num_generations
        self.logger: Any = (MetricsLogger(self.run_dir, cfg.logging, total_steps=g.max_steps, start_step=self.step,
                                          config={**cfg.to_dict(), "step_plan": self.step_plan.to_dict()})
                       if main else _NoLogger())
        hook = self.registry.hook
        if main:
            hook.grpo_on_train_start(context=self._context(), trainer=self)
        metrics: dict[str, Any] = {}
        if cfg.logging.eval_on_start and self.eval_rows and self.step == 0:
            self.logger.log(0, self._evaluate())  # the untrained policy: the baseline of the eval curve
        previous_handler = self._install_sigint()
        try:
            while self.step < g.max_steps and not self._stop.is_set():
                reset_peak_memory(self.device)
                start = time.perf_counter()
                rows = self.next_rows()                                       # 1. sample prompts
                rows = rows[share(len(rows), self.world)]                     #    (this rank's share)
                self.logger.phase(f"step {self.step + 1}: generating {len(rows)} prompts x {k}, scoring")
                batch, rewards, columns = self.sample_and_score(rows)         # 2. a group per prompt, 3. rewards
                rows_data = [self.rows[i] for i in rows]
                all_rewards, all_columns = self._gather_rewards(rewards, columns)
                advantages, adv_stats = compute_advantages(                   # 4. group-relative advantages
                    all_rewards, all_columns, cfg.rewards.weights, k, g.scale_rewards, g.multi_objective_aggregation,
                )
                advantages = advantages[share(len(all_rewards), self.world)]
                samples = self._sample_rows(rows_data, batch, rewards, columns, advantages)
                if self.world.enabled:
                    samples = _concat(all_gather_objects(samples, self.world))
                if main:
                    hook.grpo_on_rewards_scored(context=self._context(), step=self.step + 1, rows=samples, trainer=self)
                self.logger.phase(f"step {self.step + 1}: updating the policy")
                update = self._update(batch, advantages.to(self.device))      # 5. policy update
                self.step += 1

                metrics = self._metrics(batch, all_rewards, all_columns, adv_stats, update,
                                        time.perf_counter() - start)
                every = cfg.logging.eval_every
                if every and self.eval_rows and (self.step % every == 0 or self.step == g.max_steps):
                    self.logger.phase(f"step {self.step}: evaluating {len(self.eval_rows)} held-out rows")
                    metrics.update(self._evaluate())
                self.logger.log(self.step, metrics)
                self.logger.log_samples(self.step, samples)
                self.last_metrics = metrics
                if main:
                    hook.grpo_on_step_end(context=self._context(), step=self.step, metrics=metrics, trainer=self)
                if self.world.enabled and all_reduce(torch.tensor([float(self._stop.is_set())]), self.world,
                                                     "max").item():
                    self._stop.set()  # a SIGINT on any rank: every rank stops after this same step
                if self.step < g.max_steps and self._checkpoint_due():
                    self._checkpoint()
            self._checkpoint()
            self._save_model()
        except Exception as exc:  # a full disk (not always an OSError): one line saying which checkpoint is good
            if is_disk_full(exc, self.run_dir):
                raise disk_full_error(self.run_dir, exc) from exc
            if (unwritable := write_error(self.run_dir, exc)) is not None:  # made read-only or replaced mid-run
                raise unwritable from exc
            raise
        finally:
            self._restore_sigint(previous_handler)
            plot = self.logger.close()
            self.engine.close()
            if callable(close_rewards := getattr(self.cfg.rewards, "close", None)):
                close_rewards()  # the rewards' worker and model processes end with the run
        interrupted = self._stop.is_set() and self.step < g.max_steps
        summary = {**metrics, "step": self.step, "interrupted": interrupted, "run_dir": str(self.run_dir),
                   "plot": str(plot) if plot else None}
        if main:
            hook.grpo_on_train_end(context=self._context(), metrics=summary, trainer=self)
        if self._hub is not None and not interrupted:  # last: a failed push leaves the run folder complete
            summary["hub_url"] = self._hub.on_end(self.run_dir, metrics)
        return summary

    # ------------------------------------------------------------------ the steps ----

    def next_rows(self) -> list[int]:
        """The next ``prompts_per_step`` training row indices of the seeded per-epoch order (a resume recomputes
        it), the data position moving past them."""
        d, n = self.cfg.data, self.cfg.grpo.prompts_per_step
        if isinstance(self.rows, StreamedRows):  # a stream: its own epochs and position (grpo_core.row_stream)
            out, self.epoch, self.position = self.rows.take(n, self.epoch, self.position)
            return out
        out: list[int] = []
        while len(out) < n:
            if self._order[0] != self.epoch:
                self._order = (self.epoch, epoch_permutation(len(self.rows), self.epoch, seed=d.seed,
                                                             shuffle=d.shuffle))
            order = self._order[1]
            take = order[self.position : self.position + n - len(out)].tolist()
            out += take
            self.position += len(take)
            if self.position >= len(order):
                self.epoch, self.position = self.epoch + 1, 0
        return out

    def sample_and_score(self, rows: list[int]) -> tuple[Generation, torch.Tensor, dict[str, list]]:
        """Steps 2 and 3 of the loop for the training rows ``rows`` (indices): a group of ``num_generations``
        completions per prompt from the generation backend, the total reward of each (NaN: unscored) and each
        reward's column. No update (``grpo signal`` measures the rewards' signal with it).

        With ``generation.score_during_generation`` and a backend that hands over finished groups
        (``hands_over_groups``, grpo_core.generation.backend), each run of groups is scored on worker threads as
        it arrives (grpo_rewards.streaming), while the rest generates; the scores are joined before returning and
        are those of scoring the whole batch afterwards (same rows, same order, same columns)."""
        prompts, data = [self.prompts[i] for i in rows], [self.rows[i] for i in rows]
        k = self.cfg.generation.num_generations
        if not (self.cfg.generation.score_during_generation and getattr(self.backend, "hands_over_groups", False)):
            with self.engine.whole_model():
                batch = self._generate(prompts, data, k)
            rewards, columns = self._score(data, batch)
            return batch, rewards, columns
        handed: list[Generation] = []
        with StreamingScore(self.cfg.rewards) as stream:
            def on_groups(first: int, part: Generation) -> None:
                done = _rows_in(handed) // k
                if first != done or len(part.completions_text) % k:
                    raise RuntimeError(f"generation backend {self.cfg.generation.backend!r} handed over groups "
                                       f"from {first} ({len(part.completions_text)} rows) after {done} groups")
                handed.append(part)
                completions, columns = self._reward_inputs(data[first : first + len(part.completions_text) // k],
                                                           part, k)
                stream.add(completions, **columns)

            with self.engine.whole_model():
                batch = self.backend.generate(prompts, k, on_groups=on_groups)
            done = _rows_in(handed)
            _check_handed(handed, batch, self.cfg.generation.backend)
            if done < len(batch.completions_text):  # what the backend did not hand over: scored now
                rest = batch.rows(done)
                completions, columns = self._reward_inputs(data[done // k:], rest, k)
                stream.add(completions, **columns)
            scores = stream.result()
        return batch, _totals(scores.total), scores.columns

    def _generate(self, prompts: list[str], rows: list[dict[str, Any]], k: int, **options: Any) -> Generation:
        """``k`` completions of each prompt; with environments (TRL's ``environment_factory``), each rollout's own
        instance is reset with its row and bound to its tools first, and a rollout whose ``reset`` returned text
        gets its prompt with that text appended (grpo_core.generation.tools.environments)."""
        pool = self._environment_pool
        if pool is None:
            return self.backend.generate(prompts, k, **options)
        each = [row for row in rows for _ in range(k)]
        self.environments = pool.draw(len(each))
        observations = pool.reset(self.environments, each)
        if getattr(self.backend, "tools", None) is not None:  # an environment with no methods has no tools to bind
            self.backend.tools.bind(pool.bindings(self.environments))
        if all(seen is None for seen in observations):
            return self.backend.generate(prompts, k, **options)
        field, schemas = self.cfg.data.prompt_field, self.backend.tool_schemas
        own = [prompts[i // k] if seen is None else
               format_prompt({**row, field: with_observation(row[field], seen)}, self.cfg.data, self.tokenizer, schemas)
               for i, (row, seen) in enumerate(zip(each, observations, strict=True))]
        return self.backend.generate(own, 1, **options)  # a prompt per rollout: the groups' rows in order

    def _reward_inputs(self, rows: list[dict[str, Any]], batch: Generation, k: int
                       ) -> tuple[list[Any], dict[str, list]]:
        """What the rewards get for ``batch`` (``k`` completions per row): the completions and the columns. When
        the rows' prompts are chat messages the rewards get each completion as ``[{"role": "assistant",
        "content": text}]`` and the prompts as messages, as ``trl.GRPOTrainer`` passes them (trl 1.16.0,
        ``grpo_trainer.py`` ``_generate``)."""
        prompt_field = self.cfg.data.prompt_field
        columns = {key: [r[key] for r in rows for _ in range(k)] for key in rows[0] if key != prompt_field}
        columns["prompts"] = [r[prompt_field] for r in rows for _ in range(k)]
        columns["completion_ids"] = [ids[m.bool()].tolist() for ids, m in zip(batch.completion_ids,
                                                                              batch.completion_mask, strict=True)]
        columns["trainer_state"] = TrainerState(self.step, self.cfg.grpo.max_steps, getattr(self, "epoch", 0))
        completions: list[Any] = batch.completions_text
        if isinstance(rows[0][prompt_field], list):  # conversational rows: chat messages, as TRL passes them
            completions = [[{"role": "assistant", "content": text}] for text in completions]
        if self.environments is not None and len(self.environments) == len(completions):
            columns["environments"] = self.environments  # TRL's: each completion's environment instance
        # a multi-turn rollout: its conversations, as TRL passes them, and its facts as columns
        return conversation_inputs(batch, completions, columns), columns

    def _score(self, rows: list[dict[str, Any]], batch: Generation, k: int | None = None
               ) -> tuple[torch.Tensor, dict[str, list]]:
        """Total reward per completion (NaN where every reward is None) and each reward's column; ``k``
        completions per row (default: ``num_generations``)."""
        completions, columns = self._reward_inputs(rows, batch, k or self.cfg.generation.num_generations)
        scores = self.cfg.rewards.score(completions, **columns)
        return _totals(scores.total), scores.columns

    def _gather_rewards(self, rewards: torch.Tensor, columns: dict[str, list]
                        ) -> tuple[torch.Tensor, dict[str, list]]:
        """The whole step's rewards and reward columns, in the single-process order (this rank's, alone)."""
        if not self.world.enabled:
            return rewards, columns
        parts = all_gather_objects((rewards.tolist(), columns), self.world)
        total = torch.tensor(_concat([r for r, _ in parts]), dtype=torch.float32)
        return total, {alias: _concat([c[alias] for _, c in parts]) for alias in columns}

    def _update(self, batch: Generation, advantages: torch.Tensor) -> dict[str, float]:
        """``num_iterations`` passes over one generation batch, each an optimizer step per slice of it (one slice,
        the whole batch, unless ``steps_per_generation`` says more); returns averaged loss metrics.

        Each of the ``gradient_accumulation_steps`` micro-batches (the loss normalisation unit, as in
        TRL) runs as row slices of at most ``micro_batch_tokens`` padded tokens, one forward/backward
        each, with the same loss and gradients as the whole micro-batch at once (grpo_core.algorithm.loss). With several
        processes the micro-batches are those of the whole step, each rank running the rows it holds against the
        micro-batch's global row and token counts (the module docs).

        With ``steps_per_generation = k * gradient_accumulation_steps`` the batch is generated once for ``k``
        optimizer steps, each on its slice (TRL's ``_prepare_inputs``), and, as in TRL, the old policy's log-probs
        are computed once, before the first of them, whenever the batch trains more than one optimizer step."""
        g, gen = self.cfg.grpo, self.cfg.generation
        plans = self._plans(batch)  # one per optimizer step of a pass over the batch
        # a sampler other than the policy that reports its log-probs (vLLM) is corrected against the trainer's own
        sampled = batch.sampling_logps is not None and not batch.sampler_is_policy and gen.importance_sampling != "none"
        # one optimizer step on the batch and a forward that draws no random numbers: the old policy's log-probs
        # are the training forward's own, and the correction is read off each forward (no extra pass; TRL runs one)
        correction = _Correction(batch, gen, self.world) if sampled else None
        one_step = g.num_iterations == 1 and len(plans) == 1
        fused = correction is not None and one_step and not has_active_dropout(self.model)
        old, ref = self._fixed_logps(plans, need_old=not one_step or (sampled and not fused), need_ref=g.beta != 0.0)
        is_ratio = None
        if correction is not None and not fused:  # against the old-policy pass, the whole batch at once
            is_ratio = correction.ratio(old, torch.arange(old.size(0)))  # type: ignore[union-attr]
        # FSDP2 and ZeRO: each forward/backward is a collective; a rank with fewer passes adds passes that
        # contribute nothing
        idle = [self.engine.idle_passes(plan.passes) for plan in plans]
        records: list[dict[str, float]] = []  # per (iteration, micro-batch): this rank's share of its metrics
        grad_norms: list[float] = []
        for iteration in range(g.num_iterations):
            for plan, idle_passes in zip(plans, idle, strict=True):
                records += self._accumulate(plan, advantages, old, ref, is_ratio, idle_passes,
                                            with_entropy=iteration == 0, correction=correction if fused else None,
                                            masks=self._entropy_masks(plan), router=self._router_step(plan))
                grad_norms.append(self.engine.optimizer_step())
                self.entropy.step(functools.partial(all_reduce, world=self.world))  # the adaptive coefficient moves
                if self._after_optimizer_step is not None:
                    self._after_optimizer_step(self.step * self.cfg.optimizer_steps_per_step + len(grad_norms))
        is_metrics = correction.metrics() if correction is not None else {}
        sums: dict[str, float] = {}
        counts_of: dict[str, int] = {}
        for record in self._reduce_records(records):
            for key, value in record.items():
                sums[key] = sums.get(key, 0.0) + value
                counts_of[key] = counts_of.get(key, 0) + 1
        out = {key: sums[key] / counts_of[key] for key in sums}
        out["grad_norm"] = sum(grad_norms) / len(grad_norms)  # the same on every rank (summed gradients)
        return {**out, **is_metrics, **self.entropy.metrics()}

    def _plans(self, batch: Generation) -> list[_Plan]:
        """The step's sequences, the loss mask, and this rank's rows of each micro-batch cut into slices: one plan
        per optimizer step of a pass over the batch. With several optimizer steps per generation batch
        (``steps_per_generation``), each process's rows are cut into that many consecutive parts, as TRL splits
        each process's generation batch, and step ``s`` takes part ``s`` of every process, its micro-batches cut
        from those rows in the single-process order; the dapo-style normalisers count the batch's tokens divided by
        the number of steps (TRL's ``num_items_in_batch * gradient_accumulation_steps / steps_per_generation``)."""
        g, steps = self.cfg.grpo, self.cfg.optimizer_steps_per_generation
        input_ids = torch.cat([batch.prompt_ids, batch.completion_ids], dim=1)
        attention_mask = torch.cat([batch.prompt_mask, batch.completion_mask], dim=1)
        mask = batch.completion_mask.clone()
        if batch.tool_mask is not None:  # the tools' tokens are context, not the policy's: out of loss, KL, entropy
            mask = mask * batch.tool_mask.to(mask.dtype)
        if g.mask_truncated_completions:
            mask = mask * (~batch.truncated).unsqueeze(1).to(mask.dtype)
        counts = mask.sum(1)
        if self.world.enabled:  # every row's completion tokens, the whole step's
            counts = torch.tensor(_concat(all_gather_objects(counts.tolist(), self.world)), dtype=counts.dtype,
                                  device=counts.device)
        mine = share(counts.numel(), self.world)
        step_rows = generation_split(counts.numel(), steps, self.world)
        items = counts.sum() if steps == 1 else counts.sum() / steps
        per_slice = rows_per_slice(input_ids.size(1), self.step_plan.micro_batch_tokens)
        plans = []
        for rows_of_step in step_rows:
            micro, group_sizes = [], []  # this rank's rows of each micro-batch; its global rows and tokens
            for rows in rows_of_step.tensor_split(g.gradient_accumulation_steps):
                micro.append(rows[(rows >= mine.start) & (rows < mine.stop)] - mine.start)
                group_sizes.append((len(rows), counts[rows].sum()))
            slices = [idx.split(per_slice) if len(idx) else () for idx in micro]
            plans.append(_Plan(input_ids, attention_mask, batch.completion_ids.size(1), mask, items, slices,
                               group_sizes, batch.sampling_logps))
        return plans

    def _logps(self, model: Any, plan: _Plan, idx: torch.Tensor, with_entropy: bool = False,
               entropy_grad: bool = False, router_logits: bool = False) -> tuple[Any, ...]:
        """The completion log-probs (and entropies, differentiable with ``entropy_grad``; and with ``router_logits``
        an MoE model's router logits) of rows ``idx`` under ``model``: the policy through the engine (``model``
        None), whose wrapped module reduces the gradients, or another model as it is."""
        step = self.step_plan
        forward = self.engine.forward if model is None else functools.partial(completion_logprobs, model)
        router = {"router_logits": True} if router_logits else {}
        with sampling_autocast(self.model):
            return forward(plan.input_ids[idx], plan.attention_mask[idx], plan.k,
                           temperature=self.cfg.generation.temperature, chunk_size=step.logprob_chunk_size,
                           with_entropy=with_entropy, entropy_grad=entropy_grad, share_prompts=step.share_prompts,
                           **router)

    def _fixed_logps(self, plans: list[_Plan], need_old: bool, need_ref: bool
                     ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """The old policy's and the reference model's log-probs of the step's rows (no gradients, eval mode: no
        dropout, LoRA's included), each only when needed; ``plans`` cover this rank's rows in order."""
        old = ref = None
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad(), self.engine.whole_model() if need_old or need_ref else contextlib.nullcontext():
                plan = plans[0]  # the sequences every plan shares
                everything = [part for p in plans for parts in p.slices for part in parts]

                def of_every_row(model: Any) -> torch.Tensor:  # [rows, K], each slice's rows where they are
                    out = torch.zeros(plan.mask.shape, device=self.device)
                    for rows in everything:
                        out[rows] = self._logps(model, plan, rows)[0].to(self.device)
                    return out

                if need_old:
                    old = of_every_row(self.model)
                if need_ref:
                    with reference_model(self.model, self.cfg) as ref_model:
                        ref = of_every_row(ref_model)
        finally:
            self.model.train(was_training)
        return old, ref

    def _entropy_masks(self, plan: _Plan) -> _EntropyMasks:
        """``top_entropy_quantile``'s token masks for this optimizer step: from a no-grad pass at its weights where a
        micro-batch spans several slices or ranks (its threshold needs all of it before its first backward)."""
        if not self.entropy.masks_tokens:
            return _EntropyMasks(None, plan, None, self.world)
        if not self.world.enabled and all(len(parts) <= 1 for parts in plan.slices):
            return _EntropyMasks(self.entropy.quantile, plan, None, self.world)
        entropies = torch.zeros(plan.mask.shape, device=self.device)
        with torch.no_grad(), self.engine.whole_model():
            for part in [part for parts in plan.slices for part in parts]:
                entropies[part] = self._logps(self.model, plan, part, with_entropy=True)[1].to(self.device)
        return _EntropyMasks(self.entropy.quantile, plan, entropies, self.world)

    def _router_step(self, plan: _Plan) -> RouterStep:
        """The load-balancing loss of this optimizer step (grpo_core.policy.router_loss): the router logits of every
        row of a micro-batch from a no-grad pass at its weights where it spans several slices or ranks."""
        def router_logits(rows: torch.Tensor) -> Any:
            with torch.no_grad(), self.engine.whole_model():
                return self._logps(self.model, plan, rows, router_logits=True)[2]

        gather = functools.partial(all_gather_objects, world=self.world) if self.world.enabled else None
        return self.router.step(plan.slices, plan.attention_mask, router_logits, gather, self.world.rank)

    def _accumulate(self, plan: _Plan, advantages: torch.Tensor, old: torch.Tensor | None, ref: torch.Tensor | None,
                    is_ratio: torch.Tensor | None, idle: int, with_entropy: bool,
                    correction: _Correction | None = None, masks: _EntropyMasks | None = None,
                    router: RouterStep | None = None) -> list[dict[str, float]]:
        """The forward/backwards of one optimizer step (every slice, then ``idle`` passes that contribute
        nothing); returns each micro-batch's metrics, this rank's share. With ``correction``, each slice's
        sampler correction comes from its own forward's log-probs; ``masks``: the high-entropy tokens; ``router``:
        the load-balancing loss."""
        g, cfg = self.cfg.grpo, self.cfg
        loss_type = self.registry.get("loss_types", g.loss_type)(cfg)  # registered through grpo_register_loss_types
        records: list[dict[str, torch.Tensor]] = []  # tensors until the end: no host sync per pass
        done = 0  # backwards so far in this optimizer step; the last one syncs the gradients
        masks = masks or _EntropyMasks(None, plan, None, self.world)
        router = router or RouterStep(self.router, None, self.world.rank)
        for micro, (parts, (group_rows, group_tokens)) in enumerate(zip(plan.slices, plan.group_sizes, strict=True)):
            micro_metrics: dict[str, torch.Tensor] = {}
            for index, part in enumerate(parts):
                done += 1
                with self.engine.accumulating(done == plan.passes + idle):
                    lp, entropy, *routed = self._logps(None, plan, part,
                                                       with_entropy=with_entropy or self.entropy.needs_entropy,
                                                       entropy_grad=self.entropy.needs_grad,
                                                       router_logits=self.router.enabled)
                    ratio = is_ratio[part] if is_ratio is not None else None
                    if correction is not None:
                        ratio = correction.ratio(lp, part)
                    loss, m = grpo_loss(
                        lp, plan.mask[part], advantages[part],
                        old_per_token_logps=None if old is None else old[part],
                        ref_per_token_logps=None if ref is None else ref[part],
                        loss_type=loss_type, epsilon=g.epsilon, epsilon_high=g.epsilon_high, delta=g.delta,
                        beta=g.beta, max_completion_length=cfg.generation.max_completion_length,
                        num_items_in_batch=plan.num_items, grad_accum_steps=g.gradient_accumulation_steps,
                        group_rows=group_rows, group_tokens=group_tokens,
                        importance_sampling_ratio=ratio, importance_sampling_level=g.importance_sampling_level,
                        kl_bias_correction=g.use_bias_correction_kl,
                        off_policy_mask_threshold=g.off_policy_mask_threshold,
                        sampling_per_token_logps=None if plan.sampling_logps is None else plan.sampling_logps[part],
                        entropy=self.entropy.loss_inputs(entropy, plan.mask[part],
                                                         *masks.of(micro, part, entropy, plan.mask[part], group_tokens)),
                    )
                    loss = router.add(loss, m, micro, index, len(part), group_rows, plan.attention_mask[part], *routed)
                    self.engine.backward(loss)
                if entropy is not None:
                    m["entropy"] = (entropy.detach() * plan.mask[part]).sum() / plan.mask[part].sum().clamp(min=1)
                # the slices' losses add up to the micro-batch's; the other metrics are token means
                part_share = plan.mask[part].sum() / group_tokens.clamp(min=1)
                for key, value in m.items():
                    value = value.detach().double() * (1.0 if key in LOSS_METRICS else part_share)
                    micro_metrics[key] = value if key not in micro_metrics else micro_metrics[key] + value
            records.append(micro_metrics)
        for _ in range(idle):
            done += 1
            with self.engine.accumulating(done == plan.passes + idle):
                lp, _ = self._logps(None, plan, plan.idle_rows, with_entropy=False)
                self.engine.backward(lp.sum() * 0.0)
        return _to_floats(records)

    def _reduce_records(self, records: list[dict[str, float]]) -> list[dict[str, float]]:
        """Each micro-batch's metrics summed over the ranks (each rank holds its share of each); a key counts
        for a micro-batch when some rank reported it."""
        if not self.world.enabled:
            return records
        keys = sorted(set(_concat(all_gather_objects(sorted({k for r in records for k in r}), self.world))))
        values = torch.tensor([[r.get(k, 0.0) for k in keys] for r in records], dtype=torch.float64)
        present = torch.tensor([[float(k in r) for k in keys] for r in records], dtype=torch.float64)
        all_reduce(values, self.world)
        all_reduce(present, self.world)
        return [{k: float(values[i, j]) for j, k in enumerate(keys) if present[i, j] > 0}
                for i in range(len(records))]

    def _evaluate(self) -> dict[str, float]:
        """One greedy completion per held-out row (``generation.num_generations_eval`` unset), or a group of that
        many sampled as training samples (TRL's ``num_generations_eval``), scored by the run's rewards:
        ``eval/reward/mean``, ``eval/rewards/<alias>`` and ``eval/completion_length/mean`` over every completion.
        Greedy decoding draws no random numbers, and sampling draws them from a copy of the generators' state, so
        evaluating does not change the training run."""
        group = self.cfg.generation.num_generations_eval
        if group is None:
            return self._evaluate_groups(1, greedy=True)
        devices = [self.device] if torch.device(self.device).type == "cuda" else []
        with torch.random.fork_rng(devices=devices):
            return self._evaluate_groups(group, greedy=False)

    def _evaluate_groups(self, group: int, greedy: bool) -> dict[str, float]:
        """:meth:`_evaluate` with ``group`` completions per held-out row."""
        per_call = max(1, self.cfg.sequences_per_step // group)  # prompts per generate call
        mine = share(len(self.eval_rows), self.world)  # each rank its share of the held-out rows
        prompts, rows = self.eval_prompts[mine], self.eval_rows[mine]
        totals: list[float] = []
        columns: dict[str, list] = {}
        lengths: list[float] = []
        with self.engine.whole_model():  # the ranks' shares may take different numbers of calls
            for start in range(0, len(rows), per_call):
                batch = self._generate(prompts[start : start + per_call], rows[start : start + per_call], group,
                                       greedy=greedy)
                total, cols = self._score(rows[start : start + per_call], batch, k=group)
                totals += total.tolist()
                lengths += batch.completion_mask.sum(1).float().tolist()
                for alias, values in cols.items():
                    columns.setdefault(alias, []).extend(values)
        if self.world.enabled:
            parts = all_gather_objects((totals, lengths, columns), self.world)
            totals, lengths = _concat([p[0] for p in parts]), _concat([p[1] for p in parts])
            columns = {a: _concat([p[2].get(a, []) for p in parts]) for a in set(_concat([list(p[2]) for p in parts]))}
        out = {f"eval/{key}": value for key, value in reward_means(torch.tensor(totals), columns).items()}
        out["eval/completion_length/mean"] = sum(lengths) / len(lengths)
        return out

    # ---------------------------------------------------------------- bookkeeping ----

    def _load_policy(self) -> tuple[Any, Any]:
        """The trainable model and its tokenizer, as ``[model]`` says (the Python API hands over objects)."""
        return load_model_and_tokenizer(self.cfg)

    def _load_rows(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The training and held-out rows, as ``[data]`` says (the Python API hands over dataset objects)."""
        return train_eval_rows(self.cfg.data, self.registry)


    def _check_head(self) -> None:
        """The chunked log-prob head against the model's own logits, and packed prompts against unpacked, once
        (grpo_core.policy.logprobs, grpo_core.policy.shared_prompts)."""
        probe = self.tokenizer("The quick brown fox jumps over the lazy dog. 12 + 7 = 19",
                               return_tensors="pt")["input_ids"]
        with sampling_autocast(self.model):  # as the training forwards run (a planned autocast's LoRA needs it)
            if probe.shape[1] >= 2:
                check_chunked_head(self.model, probe)
            if self.step_plan.share_prompts and probe.shape[1] >= 4:
                check_shared_prompts(self.model, probe)

    def _metrics(self, batch: Generation, rewards: torch.Tensor, columns: dict[str, list], adv: dict[str, float],
                 update: dict[str, float], seconds: float) -> dict[str, Any]:
        lengths = batch.completion_mask.sum(1).float()
        truncated = batch.truncated.float()
        tokens = batch.num_tokens + int(batch.prompt_mask.sum())
        peak = peak_memory_since_reset_gb(self.device)
        held = held_state_gb(self.model, self.optimizer)
        health = self._reward_health()
        if self.world.enabled:  # the whole step's numbers; the slowest rank's time, the largest peak and state
            parts = all_gather_objects((lengths.tolist(), truncated.tolist(), tokens, seconds, peak, health, held),
                                       self.world)
            lengths = torch.tensor(_concat([p[0] for p in parts]))
            truncated = torch.tensor(_concat([p[1] for p in parts]))
            tokens, seconds, peak = sum(p[2] for p in parts), max(p[3] for p in parts), max(p[4] for p in parts)
            health = {key: (sum if key.endswith("/failures") else lambda v: sum(v) / len(v))(
                [p[5][key] for p in parts if key in p[5]]) for key in health}
            held = (max(p[6][0] for p in parts), max(p[6][1] for p in parts))
        scored = rewards[~torch.isnan(rewards)]
        means = reward_means(rewards, columns)
        out: dict[str, Any] = {"reward/mean": means.pop("reward/mean"),
                               "reward/std": scored.std().item() if scored.numel() > 1 else 0.0, **means}
        out.update(health)
        out.update({f"advantages/{k.removeprefix('advantage_')}": v for k, v in adv.items()
                    if k.startswith("advantage_")})
        out["frac_reward_zero_std"] = adv["frac_reward_zero_std"]
        out["frac_unscored"] = adv["frac_unscored"]
        out.update(update)
        out.update({
            "completion_length/mean": lengths.mean().item(),
            "completion_length/min": lengths.min().item(),
            "completion_length/max": lengths.max().item(),
            "truncated_ratio": truncated.mean().item(),
            "learning_rate": self.scheduler.get_last_lr()[0],
            "step_time": seconds,
            "tokens_per_s": tokens / max(seconds, 1e-9),
            "peak_memory_gb": peak,
            "memory/parameters_gb": held[0],  # held by one process (the largest): a shard under FSDP2
            "memory/optimizer_gb": held[1],  # its optimizer state (a partition under FSDP2 and ZeRO)
            "epoch": self.epoch,
        })
        if batch.tool_facts is not None:  # a multi-turn rollout's (grpo_core.generation.multi_turn)
            facts = batch.tool_facts
            if self.world.enabled:
                facts = _concat(all_gather_objects(facts, self.world))
            out.update(tool_metrics(facts, getattr(self.backend, "last_rollout_seconds", None)))
        return out

    def _reward_health(self) -> dict[str, float]:
        """Failures so far of each reward (raised, hung, bad values) and any numbers the reward reports
        itself through a ``metrics()`` method (e.g. the code reward's sandbox error rate)."""
        out: dict[str, float] = {}
        for entry in self.cfg.rewards.entries:
            out[f"rewards/{entry.alias}/failures"] = entry.fn.stats.failures
            report = getattr(entry.fn, "metrics", None)
            for key, value in (report() if callable(report) else {}).items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    out[f"rewards/{entry.alias}/{key}"] = value
        return out

    def _sample_rows(self, rows: list[dict[str, Any]], batch: Generation, rewards: torch.Tensor,
                     columns: dict[str, list], advantages: torch.Tensor) -> list[dict[str, Any]]:
        """One dict per completion: prompt, completion, reference answer, each reward, total, advantage (and, with
        tools, the rollout's facts)."""
        k = self.cfg.generation.num_generations
        field = self.cfg.data.prompt_field
        out = []
        for i, text in enumerate(batch.completions_text):
            row = rows[i // k]
            sample = {"prompt": row[field], "completion": text}
            if "answer" in row:
                sample["answer"] = row["answer"]
            sample.update({alias: col[i] for alias, col in columns.items()})
            sample["total"] = None if math.isnan(rewards[i]) else float(rewards[i])
            sample["advantage"] = float(advantages[i])
            if batch.tool_facts is not None:  # a multi-turn rollout: its turns, calls, errors and how it stopped
                sample["tools"] = batch.tool_facts[i]
            out.append(sample)
        return out

    def _checkpoint_due(self) -> bool:
        """``[checkpoint]``: every ``every`` steps, and once ``every_minutes`` have passed since the last one (or
        the start); with several processes, when rank 0's clock says so."""
        ck = self.cfg.checkpoint
        due = bool(ck.every) and self.step % ck.every == 0
        since = time.monotonic() - getattr(self, "_last_checkpoint", self._started)
        due = due or (ck.every_minutes > 0 and since >= ck.every_minutes * 60)
        if self.world.enabled:  # rank 0's answer on every rank
            due = bool(all_gather_objects(due, self.world)[0])
        return due

    def _checkpoint(self) -> None:
        self._last_checkpoint = time.monotonic()

        states = all_gather_objects(rng_state(), self.world) if self.world.enabled else None
        model_state, optimizer_state = self.engine.checkpoint_state()  # None: the model's and optimizer's own
        if self.world.is_main:
            state = {"epoch": self.epoch, "position": self.position, "world_size": self.world.size,
                     "entropy": self.entropy.state_dict()}
            path = save_checkpoint(self.run_dir, self.step, model=self.model, optimizer=self.optimizer,
                                   scheduler=self.scheduler, state=state, keep_last=self.cfg.checkpoint.keep_last,
                                   rank_rng=states, model_state=model_state, optimizer_state=optimizer_state)
            self.registry.hook.grpo_on_checkpoint(context=self._context(), step=self.step, path=str(path), trainer=self)
            if self._hub is not None and self.step < self.cfg.grpo.max_steps:  # the end pushes the last one
                write = (lambda out: save_model(self.model, self.tokenizer, out)) if self.engine.holds_whole_model \
                    else None  # a sharded model is pushed at the end only
                self._hub.on_save(self.run_dir, self.step, path, write, getattr(self, "last_metrics", {}))
        barrier(self.world)

    def _context(self) -> TrainingContext:
        """What the training-event hooks are told about the run (see :mod:`grpo_core.context`)."""
        return TrainingContext("grpo_core", self.step, self.cfg.grpo.max_steps, self.run_dir, self.cfg,
                               getattr(self, "last_metrics", {}))

    def _restore(self) -> None:
        checkpoint = load_latest_checkpoint(self.run_dir)
        if checkpoint is None:
            raise FileNotFoundError(f"--resume: no checkpoint in {self.run_dir / CHECKPOINTS}")
        state = restore(checkpoint, self.model, self.optimizer, self.scheduler, rank=self.world.rank,
                        load_state=self.engine.state_loader())
        written_by = int(state.get("world_size", 1))
        if written_by != self.world.size:
            raise CheckpointError(f"{checkpoint.path} was written by {written_by} process(es); resume it with the "
                                  f"same number (this run has {self.world.size})")
        self.step, self.epoch, self.position = int(state["step"]), int(state["epoch"]), int(state["position"])
        self.entropy.load_state_dict(state.get("entropy"))
        if self.world.is_main:
            print(describe_restored(checkpoint, state), file=sys.stderr, flush=True)

    def _save_model(self) -> None:
        model = self.engine.plain_model()  # FSDP2: rank 0's plain copy holding the full weights
        if self.world.is_main:
            save_model(model, self.tokenizer, self.run_dir / MODEL_DIR)
            if self.cfg.checkpoint.save_merged:
                save_model(model, self.tokenizer, self.run_dir / MERGED_DIR, merged=True)
        barrier(self.world)

    def _install_sigint(self) -> Any:
        if threading.current_thread() is not threading.main_thread():
            return None

        signals = []  # this process's own Ctrl-Cs (with several ranks, another rank's may have set _stop first)

        def handler(signum: int, frame: Any) -> None:
            if signals:  # a second Ctrl-C: stop now
                raise KeyboardInterrupt
            signals.append(signum)
            self._stop.set()
            # a raw write: the handler may interrupt the console (rich, buffered io) in the middle of a print
            os.write(2, b"SIGINT: finishing this step, then checkpoint and exit (Ctrl-C again to stop now)\n")

        return signal.signal(signal.SIGINT, handler)

    def _restore_sigint(self, previous: Any) -> None:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
