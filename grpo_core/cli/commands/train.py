"""``grpo train CONFIG [--set k=v]... [--resume | --overwrite] [--dry-run] [--nproc N]``: a run config trained
by the trainer its ``[trainer] backend`` names. Every check a run would trip over that can be known without
the model is made first (:func:`grpo_core.cli.checks.run_checks`, as ``grpo config validate`` makes them);
``--dry-run`` then prints the step plan and its peak-memory estimate (:func:`step_plan`) and stops, and ``--nproc N``
starts N processes through torchrun (:mod:`grpo_core.cli.launch`). Exit 0, 2 for bad input (one line per
problem), 130 after a Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
from typing import Any

from grpo_core.cli.argument_types import add_overrides
from grpo_core.cli.checks import ending, run_checks, summary
from grpo_core.cli.launch import LAUNCHED, launch
from grpo_core.config import SECTIONS, load_config
from grpo_core.quiet import quiet_libraries
from grpo_core.run_folder.checkpoints import CheckpointError, RunFolderError, clear_run_dir
from grpo_core.run_folder.lock import INHERITED, hold
from grpo_rewards.contract import RewardError
from grpo_rewards.errors import ConfigError, UserError
from grpo_rewards.plugins import get_registry

LARGEST_ACCELERATOR_GIB = 288  # the largest single accelerator's memory today (AMD MI355X); a dry run warns above it


def _error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def add_parser(subparsers: Any) -> None:
    """Add ``grpo train`` to the ``grpo`` command's subparsers."""
    p = subparsers.add_parser("train", help="train with GRPO from a run config (TOML)")
    p.add_argument("config", help="run config: [model] [data] [generation] [grpo] [lora] ... [rewards.*]")
    add_overrides(p)
    how = p.add_mutually_exclusive_group()
    how.add_argument("--resume", action="store_true", help="continue from the newest checkpoint in the run folder")
    how.add_argument("--overwrite", action="store_true",
                     help="replace an earlier run in the run folder (its checkpoints and records are deleted)")
    p.add_argument("--dry-run", action="store_true",
                   help="validate, print the peak-memory estimate and the plan; load nothing, train nothing")
    p.add_argument("--nproc", type=_process_count, default=1, metavar="N",
                   help="train on N processes, data-parallel (starts torchrun --nproc_per_node N; see [distributed])")
    p.set_defaults(func=cmd_train)


def _process_count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= 4096:
        raise argparse.ArgumentTypeError(f"expected a number of processes (1 or more), got {text!r}")
    return value



def model_config_of(cfg: Any, *, offline: bool = False) -> Any:
    """The transformers config of ``[model]`` (local folder or hub cache first; ``offline``: only those). Raises
    ``OSError`` with one clear line when it cannot be fetched."""
    from transformers import AutoConfig  # heavy: loaded when a dry run estimates

    m = cfg.model
    kwargs = {"revision": m.revision, "trust_remote_code": m.trust_remote_code}
    try:
        try:  # a local folder or the hub cache first: no network round trip
            return AutoConfig.from_pretrained(m.name_or_path, local_files_only=True, **kwargs)
        except OSError:
            if offline:
                raise
            return AutoConfig.from_pretrained(m.name_or_path, **kwargs)
    except (OSError, ValueError) as exc:
        raise OSError(f"model.name_or_path: cannot fetch the config of {m.name_or_path!r} (offline, or no such "
                      f"model?): {_first_line(exc)}") from None


def step_plan(cfg: Any, *, offline: bool = False, processes: int = 1) -> Any:
    """The step plan (grpo_core.policy.step_plan) ``cfg`` would train by on this machine, before anything loads."""
    from grpo_core.policy.step_plan import plan_for_config  # torch: loaded when the command runs

    return plan_for_config(cfg, model_config_of(cfg, offline=offline), processes=processes)


def memory_estimate(cfg: Any) -> Any:
    """The peak-memory estimate of the step ``cfg`` would train by on this machine: its step plan's."""
    return step_plan(cfg).estimate


def cmd_train(args: argparse.Namespace) -> int:
    from grpo_core.parallel.distributed import world_from_env  # torch: loaded when the command runs

    cfg = load_config(args.config, args.overrides)
    quiet_libraries(cfg)  # library chatter that does not concern this run (grpo_core.quiet)
    world = world_from_env()
    if world.enabled:  # a rank: Ctrl-C raises KeyboardInterrupt until the trainer takes it over (see launch)
        from grpo_core.parallel.distributed import die_with_parent  # torch: loaded when the command runs

        die_with_parent()
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, signal.default_int_handler)
    if world.enabled and args.nproc > 1:
        raise ConfigError(f"already one of {world.size} processes started by torchrun (WORLD_SIZE is set)",
                          file="--nproc")
    from grpo_core.parallel.deepspeed import check_trainable  # torch: loaded when the command runs
    from grpo_core.parallel.distributed import check_world  # torch: loaded when the command runs

    check_trainable(cfg)  # the engine's own refusals (also in run_checks): one line, before the run's summary
    check_world(cfg, max(world.size, args.nproc))
    if world.is_main and not (world.enabled and os.environ.get(LAUNCHED)):  # the launcher said it already
        print(summary(cfg) + (f"; {world.size if world.enabled else args.nproc} processes"
                              if world.enabled or args.nproc > 1 else ""), file=sys.stderr)
    # the checks `grpo config validate` makes, with the run folder's --resume/--overwrite rules; before --nproc
    # starts anything
    run_checks(cfg, resume=args.resume, overwrite=args.overwrite, processes=max(world.size, args.nproc),
               run_folder=world.is_main)
    if args.dry_run:
        return _dry_run(cfg, processes=max(world.size, args.nproc))
    # one run at a time in a run folder: held from before --overwrite clears it until the final model is written
    # (the ranks --nproc starts inherit the launcher's; a rank of torchrun started by hand: rank 0 takes it)
    owner = world.is_main and not (world.enabled and os.environ.get(INHERITED))
    with hold(cfg.logging.output_dir, error=RunFolderError, file=cfg.path) if owner else contextlib.nullcontext():
        if args.nproc > 1:
            return launch(args)
        return _train(cfg, args, world)


def _dry_run(cfg: Any, processes: int) -> int:
    try:
        plan = step_plan(cfg, processes=processes)
    except OSError as exc:
        return _error(str(exc))
    estimate = plan.estimate
    print(estimate.table())
    print(plan.table())
    if estimate.peak > LARGEST_ACCELERATOR_GIB * 2**30:
        print(f"warning: the estimated peak ({estimate.peak / 2**30:,.0f} GiB) is more than the largest single "
              f"accelerator holds ({LARGEST_ACCELERATOR_GIB} GiB): lower generation.num_generations, "
              "grpo.prompts_per_step, the prompt/completion lengths, or raise gradient_accumulation_steps",
              file=sys.stderr)
    if cfg.trainer.backend != "grpo_core":
        print(f"warning: this is the built-in trainer's peak; trainer.backend = {cfg.trainer.backend!r} has its "
              "own memory path (TRL: its fused LM head, no micro_batch_tokens slices, no MLP tiles)",
              file=sys.stderr)
    return 0


def _train(cfg: Any, args: argparse.Namespace, world: Any) -> int:
    if args.overwrite and world.is_main:  # before rank 0 builds its model: no rank has written anything yet
        clear_run_dir(cfg.logging.output_dir)

    backend = get_registry().get("trainer_backends", cfg.trainer.backend)  # [trainer] backend, checked at load

    try:
        trainer = backend(cfg, resume=args.resume)
    except (OSError, ImportError) as exc:
        return _error(_first_line(exc))
    except ValueError as exc:  # a rule that needs the loaded model, naming its config key

        if isinstance(exc, UserError):  # a DataError: already one line per problem
            raise

        text = _first_line(exc)
        if "target modules" in text.lower() or "target_modules" in text:  # peft: no module of that name
            raise ConfigError(f"{cfg.lora.target_modules!r} matches no module of {cfg.model.name_or_path}: {text}",
                              file=cfg.path, key="lora.target_modules") from None
        key, sep, why = text.partition(": ")
        if sep and key.partition(".")[0] in SECTIONS and "." in key and " " not in key:
            raise ConfigError(why, file=cfg.path, key=key) from None  # "model.dtype: ..." from the loader
        raise
    try:
        result = trainer.train()
    except CheckpointError as exc:
        return _error(f"--resume: {exc}")
    except RewardError as exc:  # a reward failing every call: the user's code or setup, not the trainer's
        return _error(f"{cfg.path}: {_first_line(exc)}")
    if world.is_main:
        print(ending(result, cfg.logging.output_dir), file=sys.stderr)
    interrupted = isinstance(result, dict) and result.get("interrupted")
    return 130 if interrupted and not os.environ.get(LAUNCHED) else 0  # under `--nproc` the launcher says 130
