"""``grpo train CONFIG [--set k=v]... [--resume] [--dry-run] [--nproc N]``, ``grpo config validate CONFIG``,
``grpo signal CONFIG [--prompts N]`` (grpo_core.reward_signal), ``grpo plot RUN_DIR`` and ``grpo eval MODEL``
(grpo_core.cli.eval_command); a plugin of its own
(entry point ``builtin_trainer_cli``), adding its commands through the ``grpo_register_commands`` hook as any
third party does. Heavy imports stay inside the commands.

Bad input raises the layer's error (``ConfigError``, ``DataError``, ``RunFolderError``); the ``grpo`` shell
prints one line per problem and exits 2. Everything a run would trip over that can be known without the
model is checked before it loads (:func:`preflight`): the config, every row of a local data file, the run
folder (``grpo train`` refuses one holding an earlier run unless given ``--resume`` or ``--overwrite``).

``grpo train CONFIG --nproc N`` checks all that once, then starts ``torchrun --standalone --nproc_per_node N -m
grpo_core train CONFIG ...`` (:func:`launch`); under torchrun (``WORLD_SIZE`` set) each rank runs
``cmd_train``, rank 0 alone checking and clearing the run folder and printing.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from grpo_core.cli import eval_command
from grpo_core.cli.argument_types import at_least
from grpo_core.config import SECTIONS, SOURCE_SCHEME, load_config, looks_local
from grpo_core.data import is_builder, missing_reward_columns, train_eval_rows
from grpo_core.quiet import quiet_libraries
from grpo_core.reward_signal import measure_signal, no_signal, signal_table
from grpo_core.row_stream import StreamedRows
from grpo_core.run_folder.checkpoints import (
    CheckpointError,
    RunFolderError,
    check_run_dir,
    checkpoints_dir,
    clear_run_dir,
    earlier_run,
    load_latest_checkpoint,
)
from grpo_core.run_folder.plotting import plot_run
from grpo_rewards.errors import ConfigError, UserError
from grpo_rewards.hookspecs import hookimpl
from grpo_rewards.plugins import get_registry


def _add_overrides(p: argparse.ArgumentParser) -> None:
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override a config value (TOML syntax, else a bare string); repeatable")


@hookimpl
def grpo_register_commands(subparsers: Any) -> None:
    p = subparsers.add_parser("train", help="train with GRPO from a run config (TOML)")
    p.add_argument("config", help="run config: [model] [data] [generation] [grpo] [lora] ... [rewards.*]")
    _add_overrides(p)
    how = p.add_mutually_exclusive_group()
    how.add_argument("--resume", action="store_true", help="continue from the newest checkpoint in the run folder")
    how.add_argument("--overwrite", action="store_true",
                     help="replace an earlier run in the run folder (its checkpoints and records are deleted)")
    p.add_argument("--dry-run", action="store_true",
                   help="validate, print the peak-memory estimate and the plan; load nothing, train nothing")
    p.add_argument("--nproc", type=_process_count, default=1, metavar="N",
                   help="train on N processes, data-parallel (starts torchrun --nproc_per_node N; see [distributed])")
    p.set_defaults(func=cmd_train)

    config = subparsers.add_parser("config", help="check run configs")
    csub = config.add_subparsers(dest="config_command", metavar="SUBCOMMAND", required=True)
    p = csub.add_parser("validate", help="check a run config without running it (no network)")
    p.add_argument("config")
    _add_overrides(p)
    p.add_argument("--print", dest="print_config", action="store_true", help="print the resolved config as JSON")
    p.add_argument("--data", dest="check_data", action="store_true",
                   help="also load rows from the hub or a plugin source (a local file's rows are always checked)")
    p.set_defaults(func=cmd_config_validate)

    p = subparsers.add_parser("signal", help="sample groups from the run's model and show which rewards vary "
                                             "within a group (what GRPO can learn from); trains nothing")
    p.add_argument("config")
    _add_overrides(p)
    p.add_argument("--prompts", type=at_least(1), default=8, metavar="N", help="groups to sample [8]")
    p.add_argument("--show", type=at_least(0), default=0, metavar="N", help="also print the first N completions")
    p.set_defaults(func=cmd_signal)

    p = subparsers.add_parser("plot", help="draw a run's metric curves to a PNG")
    p.add_argument("run_dir")
    p.add_argument("--out", help="PNG path (default RUN_DIR/curves.png)")
    p.set_defaults(func=cmd_plot)

    eval_command.add_arguments(subparsers.add_parser("eval", help=eval_command.HELP))


def _process_count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= 4096:
        raise argparse.ArgumentTypeError(f"expected a number of processes (1 or more), got {text!r}")
    return value


LAUNCHED = "GRPO_LAUNCHED"  # set for the ranks started by ``grpo train --nproc``


def launch(args: argparse.Namespace) -> int:
    """Run this ``grpo train`` on ``args.nproc`` processes through ``torch.distributed.run``; its exit status
    (torchrun's: 0, or 1 when a rank failed, each rank printing its own error first), 130 after a Ctrl-C.

    torchrun is started with SIGINT ignored and told not to handle it (``--signals-to-handle`` without SIGINT);
    its ranks run in sessions of their own, so a Ctrl-C reaches this process and torchrun only, and this
    process hands it to the ranks (torchrun's children), which stop as one process does: they finish the
    step, checkpoint and exit (a second Ctrl-C stops them at once). The ranks
    then exit with 0 (``GRPO_LAUNCHED`` tells them torchrun was started here), so torchrun does not report a
    failure, and this returns 130."""
    import contextlib
    import os
    import signal
    import subprocess

    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={args.nproc}",
               "--signals-to-handle=SIGTERM,SIGHUP,SIGQUIT", "-m", "grpo_core", "train", args.config]
    for override in args.overrides:
        command += ["--set", override]
    command += ["--resume"] if args.resume else ["--overwrite"] if args.overwrite else []
    import threading

    if threading.current_thread() is threading.main_thread():  # started with SIGINT ignored (a shell's background
        signal.signal(signal.SIGINT, signal.default_int_handler)  # job, CI), Ctrl-C still stops it as it does a rank
    proc = subprocess.Popen(command, env={**os.environ, LAUNCHED: "1"},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    interrupted = False
    while True:
        try:
            code = proc.wait()
            break
        except KeyboardInterrupt:  # hand it to the ranks: they finish the step, checkpoint and exit
            interrupted = True
            for pid in child_pids(proc.pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGINT)
    return 130 if interrupted else code


def child_pids(parent: int) -> list[int]:
    """The processes whose parent is ``parent`` (Linux ``/proc``; none found elsewhere)."""
    import os
    from pathlib import Path

    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        if int(fields[1]) == parent:
            found.append(int(stat.parent.name))
    return [pid for pid in found if pid != os.getpid()]


LARGEST_ACCELERATOR_GIB = 288  # the largest single accelerator's memory today (AMD MI355X); a dry run warns above it


def _error(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def summary(cfg: Any) -> str:
    g, o = cfg.generation, cfg.grpo
    mode = "QLoRA (4-bit NF4)" if cfg.quantization.load_in_4bit else "LoRA" if cfg.lora.enabled else "full fine-tune"
    rewards = ", ".join(f"{e.alias}={e.use} x{e.weight:g}" for e in cfg.rewards.entries)
    return (f"{cfg.path}: model {cfg.model.name_or_path} ({mode}, {cfg.model.dtype}); data {cfg.data.source} "
            f"[{cfg.data.split}]; {o.max_steps} steps x {o.prompts_per_step} prompts x {g.num_generations} "
            f"generations; loss {o.loss_type}, beta {o.beta:g}; rewards: {rewards}; run folder {cfg.logging.output_dir}")


STREAM_CHECKED = 1000  # rows of a streamed source read by the checks before a run


def _is_local(source: str | None) -> bool:
    from pathlib import Path

    return bool(source) and not SOURCE_SCHEME.match(source) and (Path(source).expanduser().exists()
                                                                 or is_builder(source))  # "json" + data_files


def _hub_reachable(timeout: float = 3.0) -> bool:
    """Whether the Hugging Face hub answers a TCP connection within ``timeout`` seconds (DNS included)."""
    import os
    import socket
    import threading
    from urllib.parse import urlparse

    url = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    result: list[bool] = []

    def probe() -> None:
        try:
            with socket.create_connection((url.hostname or "huggingface.co", url.port or 443), timeout=timeout):
                result.append(True)
        except OSError:
            result.append(False)

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(timeout + 0.5)
    return bool(result and result[0])


def model_source_problem(cfg: Any) -> str | None:
    """Why the model cannot be fetched, found in a second instead of after the hub's retries: not a local
    folder, not in the Hugging Face cache, and the hub offline (``HF_HUB_OFFLINE``) or unreachable."""
    import os
    from pathlib import Path

    m = cfg.model
    if not m.name_or_path or Path(m.name_or_path).expanduser().exists() or getattr(m, "gguf_file", None):
        return None
    if looks_local(m.name_or_path):
        return f"folder not found: {m.name_or_path} (a path, not a hub id)"
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    try:
        cached = try_to_load_from_cache(m.name_or_path, "config.json", revision=m.revision)
    except Exception:  # noqa: BLE001 (a name the cache cannot even look up: let the loader say why)
        return None
    if isinstance(cached, str):
        return None
    switched_off = any(os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on")
                       for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))
    if switched_off:
        return (f"{m.name_or_path!r} is not a local folder and not in the Hugging Face cache, and the hub is "
                "switched off (HF_HUB_OFFLINE)")
    if not _hub_reachable():
        return (f"{m.name_or_path!r} is not a local folder and not in the Hugging Face cache, and the hub "
                "cannot be reached (offline?)")
    return None


def preflight(cfg: Any, *, resume: bool = False, overwrite: bool = False, all_sources: bool = False,
              run_folder: bool = True, model: bool = False, outputs: bool = True, data: bool = True
              ) -> list[dict[str, Any]] | None:
    """What a run would fail on, checked before any model loads: the trackers and the hub push (``outputs``:
    grpo_core.outputs), the run folder (``run_folder``), then every
    row of the training (and held-out) data when it is a local file (any source with ``all_sources``).
    With ``model``, also whether the model can be fetched at all (:func:`model_source_problem`).
    Raises the layer's error; returns the training rows when they were loaded."""

    if outputs:
        from grpo_core.outputs import check_outputs, deprecations

        for line in deprecations(cfg):
            print(f"warning: {line}", file=sys.stderr)
        check_outputs(cfg)
    if run_folder:
        check_run_dir(cfg.logging.output_dir, resume=resume, overwrite=overwrite, file=cfg.path)
        if resume and cfg.trainer.backend == "grpo_core" and load_latest_checkpoint(cfg.logging.output_dir) is None:
            raise RunFolderError(f"no checkpoint in {checkpoints_dir(cfg.logging.output_dir)}", file="--resume")
    d, rows = cfg.data, None
    if data and (all_sources or (_is_local(d.source) and (not d.eval_source or _is_local(d.eval_source)))):
        rows, _ = train_eval_rows(d)
        if isinstance(rows, StreamedRows):  # a stream is not read through: its first rows are checked
            rows = list(rows.head(STREAM_CHECKED))
        for warning in missing_reward_columns(cfg, rows):
            print(f"warning: {warning}", file=sys.stderr)
    if model and (why := model_source_problem(cfg)):
        raise ConfigError(why, file=cfg.path, key="model.name_or_path")
    return rows


def key_line(cfg: Any, *key: str) -> int | None:
    """The line of ``key`` in the run file (None for a dict config or a key it does not hold)."""
    from grpo_rewards.tomlfile import load_toml

    try:
        return load_toml(cfg.path).line_of(*key)
    except Exception:  # noqa: BLE001 (no file to point into: the message names the key alone)
        return None


def hub_dataset_problem(cfg: Any) -> list[tuple[str, str]]:
    """``(key, why)`` for each hub dataset of ``[data]`` that cannot be fetched, found in seconds (the cache, then
    a TCP probe of the hub) instead of after ``datasets``' retries."""
    import os

    from grpo_core.config import SOURCE_SCHEME

    out = []
    for key in ("source", "eval_source"):
        source = getattr(cfg.data, key, None)
        if not source or SOURCE_SCHEME.match(source) or _is_local(source):
            continue
        try:
            from huggingface_hub import scan_cache_dir

            cached = any(r.repo_id == source and r.repo_type == "dataset" for r in scan_cache_dir().repos)
        except Exception:  # noqa: BLE001 (no cache yet)
            cached = False
        if cached:
            continue
        if any(os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on")
               for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")):
            out.append((key, f"hub dataset {source!r} is not in the cache and the hub is switched off (HF_HUB_OFFLINE)"))
        elif not _hub_reachable():
            out.append((key, f"hub dataset {source!r} is not in the cache and the hub cannot be reached (offline?)"))
    return out


def run_checks(cfg: Any, *, resume: bool = False, overwrite: bool = False, processes: int = 1,
               all_sources: bool = False, validate: bool = False, run_folder: bool = True) -> list[dict[str, Any]] | None:
    """Every check made before any model loads, the same for ``grpo config validate`` (``validate``) and
    ``grpo train`` (``--dry-run`` too): the engine and process count, the run folder (validate: an earlier run
    is a warning, as it cannot know --resume or --overwrite), the model (found, a model folder, fetchable), hub
    datasets reachable, and the data rows when local (any source with ``all_sources``). Returns the training rows
    when they were loaded. Raises the layer's one-line errors."""
    from grpo_core.parallel.deepspeed import check_trainable
    from grpo_core.parallel.distributed import check_world
    from grpo_core.run_folder.checkpoints import check_run_dir
    from grpo_rewards.errors import ConfigError, Problem

    check_trainable(cfg)
    check_world(cfg, processes)
    if run_folder and not validate:
        preflight(cfg, resume=resume, overwrite=overwrite, run_folder=True, all_sources=False, data=False)
    if validate and run_folder:
        check_run_dir(cfg.logging.output_dir, overwrite=True, file=cfg.path)  # a file in the way, no access
        if what := earlier_run(cfg.logging.output_dir):
            print(f"warning: {cfg.path}: logging.output_dir: {cfg.logging.output_dir} holds an earlier run ({what}); "
                  "`grpo train` will need --resume or --overwrite", file=sys.stderr)
    outputs_checked = run_folder and not validate  # the trackers and the hub push: checked (and warned about) once
    rows = None if all_sources else preflight(cfg, run_folder=False, outputs=not outputs_checked)  # local rows first
    # the hub's reachability (a hub model's, a hub dataset's): the one check left to `grpo train` and --dry-run
    # (validate reads configs offline too; a model *path* is checked by both, in grpo_core.config)
    if not validate and (why := model_source_problem(cfg)):
        raise ConfigError(why, file=cfg.path, key="model.name_or_path")
    if not validate and (problems := hub_dataset_problem(cfg)):
        raise ConfigError([Problem(cfg.path, key_line(cfg, "data", key), f"data.{key}", why) for key, why in problems])
    if all_sources:
        return preflight(cfg, all_sources=True, run_folder=False, outputs=not outputs_checked)
    return rows


def cmd_config_validate(args: argparse.Namespace) -> int:
    import json

    cfg = load_config(args.config, args.overrides)
    rows = run_checks(cfg, all_sources=args.check_data, validate=True)
    if rows and args.check_data:
        first = str(rows[0][cfg.data.prompt_field]).replace("\n", " ")
        print(f"data: {len(rows)} rows from {cfg.data.source} [{cfg.data.split}]; columns {', '.join(map(str, rows[0]))}; "
              f"first prompt: {first[:80]!r}")
    print(f"ok: {summary(cfg)}")
    if args.print_config:
        print(json.dumps(cfg.to_dict(), indent=2, default=str))
    return 0


def memory_estimate(cfg: Any) -> Any:
    """Owner M's peak-memory estimate for ``cfg``; the model's config comes from ``AutoConfig`` (local
    folder or hub cache). Raises ``OSError`` with one clear line when the config cannot be fetched."""
    from transformers import AutoConfig

    m = cfg.model
    kwargs = {"revision": m.revision, "trust_remote_code": m.trust_remote_code}
    try:
        try:  # a local folder or the hub cache first: no network round trip
            model_config = AutoConfig.from_pretrained(m.name_or_path, local_files_only=True, **kwargs)
        except OSError:
            model_config = AutoConfig.from_pretrained(m.name_or_path, **kwargs)
    except (OSError, ValueError) as exc:
        raise OSError(f"model.name_or_path: cannot fetch the config of {m.name_or_path!r} (offline, or no such "
                      f"model?): {_first_line(exc)}") from None
    from grpo_core.policy.memory_model import estimate_peak_memory  # torch: loaded when the command runs

    dtype = cfg.quantization.compute_dtype if m.dtype == "auto" and cfg.quantization.load_in_4bit else m.dtype
    if dtype == "auto":
        dtype = str(getattr(model_config, "dtype", None) or getattr(model_config, "torch_dtype", None)
                    or "float32").removeprefix("torch.")
    return estimate_peak_memory(
        model_config,
        num_sequences=cfg.sequences_per_step // cfg.grpo.gradient_accumulation_steps,
        generation_sequences=cfg.sequences_per_step,
        prompt_length=cfg.data.max_prompt_length or 512,
        completion_length=cfg.generation.max_completion_length,
        dtype=dtype,
        lora_rank=cfg.lora.r if cfg.lora.enabled else 0,
        quantization_4bit=cfg.quantization.load_in_4bit,
        gradient_checkpointing=m.gradient_checkpointing,
        offload_activations=m.offload_activations,
        chunk_size=cfg.grpo.logprob_chunk_size,
        beta=cfg.grpo.beta,
        num_iterations=cfg.grpo.num_iterations,
        mlp_chunk_tokens="auto" if m.mlp_chunk_tokens is None else m.mlp_chunk_tokens,
        micro_batch_tokens=cfg.grpo.micro_batch_tokens,
    )


def cmd_train(args: argparse.Namespace) -> int:
    from grpo_core.parallel.distributed import world_from_env  # torch: loaded when the command runs

    cfg = load_config(args.config, args.overrides)
    quiet_libraries(cfg)  # library chatter that does not concern this run (grpo_core.quiet)
    world = world_from_env()
    if world.enabled:  # a rank: Ctrl-C raises KeyboardInterrupt until the trainer takes it over (see launch)
        import signal
        import threading

        from grpo_core.parallel.distributed import die_with_parent  # torch: loaded when the command runs

        die_with_parent()
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, signal.default_int_handler)
    if world.enabled and args.nproc > 1:
        raise ConfigError(f"already one of {world.size} processes started by torchrun (WORLD_SIZE is set)",
                          file="--nproc")
    import os

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
    if args.nproc > 1 and not args.dry_run:
        return launch(args)
    if args.dry_run:
        try:
            estimate = memory_estimate(cfg)
        except OSError as exc:
            return _error(str(exc))
        print(estimate.table())
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
    steps = result.get("step", result.get("steps")) if isinstance(result, dict) else None
    if world.is_main:
        print(f"done{f' at step {steps}' if steps is not None else ''}: {cfg.logging.output_dir}", file=sys.stderr)
    interrupted = isinstance(result, dict) and result.get("interrupted")
    return 130 if interrupted and not os.environ.get(LAUNCHED) else 0  # under `--nproc` the launcher says 130


def cmd_signal(args: argparse.Namespace) -> int:
    """``grpo signal CONFIG``: grpo_core.reward_signal's table; exit 1 when no reward varies in any group."""
    from grpo_core.trainer import Trainer  # torch: loaded when the command runs

    cfg = load_config(args.config, args.overrides)
    quiet_libraries(cfg)
    preflight(cfg, model=True, run_folder=False, outputs=False)  # trains nothing: no tracker, no push
    trainer = Trainer(cfg)
    signals, texts = measure_signal(trainer, args.prompts)
    for text in texts[: args.show]:
        print(f"--- {text!r}")
    print(signal_table(signals, args.prompts, cfg.generation.num_generations))
    flat = no_signal(signals)
    for name in flat:
        if name != "total":
            print(f"warning: {name} took the same value across every group: it gives GRPO nothing to learn "
                  "on this model", file=sys.stderr)
    return 1 if "total" in flat else 0


def cmd_plot(args: argparse.Namespace) -> int:
    out = plot_run(args.run_dir, args.out, warn=lambda line: print(f"warning: {line}", file=sys.stderr))
    print(out)
    return 0
