"""Experiment trackers: ``[logging] report_to``, with transformers' meanings, run through accelerate's tracking.

``report_to`` is ``"none"`` (no tracker), one name (``"wandb"``), a list of names, or ``"all"`` (every tracker
accelerate finds installed, as transformers' ``"all"``). The names are accelerate's (:data:`KNOWN`);
``logging.wandb = true`` and ``logging.tensorboard = true`` are the older spellings of naming those two.

A tracker named (not one that ``"all"`` found: that one is left out with a warning line) that cannot start is an
error before the first step, never a warning: :func:`tracker_problems` says what is known without starting anything (not installed, a bad
``WANDB_MODE`` or ``MLFLOW_TRACKING_URI``, a ``WANDB_DIR`` or ``TRACKIO_DIR`` that cannot be written) for ``grpo config validate``, ``--dry-run`` and the checks before the
model loads; :func:`start_trackers` raises a :class:`~grpo_rewards.errors.ConfigError` naming
``logging.report_to`` when one fails to start (bad credentials, an unreachable server).

Where each writes by default: tensorboard to ``RUN_DIR/tensorboard``, wandb under ``RUN_DIR/wandb`` (online or,
with ``WANDB_MODE=offline``, a local run folder), mlflow to ``MLFLOW_TRACKING_URI`` (its own default when unset),
trackio to its local database (``TRACKIO_DIR``), comet_ml to its service (or ``COMET_START_ONLINE=false``:
offline archives). Each gets the resolved run config (flattened to ``section.key`` values) once and, every
``log_every`` steps, the step's numeric metrics (``reward/mean``, each reward's ``rewards/<alias>``, ...).
A resumed run continues the same wandb, mlflow and trackio run (their ids are kept in ``RUN_DIR/trackers.json``).

The trainers start trackers on the main process only (rank 0 logs); accelerate's own main-process test is
switched off on each tracker, so that none of them touches accelerate's process state.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from grpo_core.config import TRACKERS as KNOWN
from grpo_core.run_folder.layout import TRACKERS_FILE
from grpo_rewards.errors import ConfigError, Problem
from grpo_rewards.files import atomic_write

# the module accelerate looks for; the extra of this project that installs it, where it has one
MODULES = {"aim": "aim", "clearml": "clearml", "comet_ml": "comet_ml", "dvclive": "dvclive", "mlflow": "mlflow",
           "swanlab": "swanlab", "tensorboard": "tensorboard", "trackio": "trackio", "wandb": "wandb"}
EXTRAS = {"comet_ml": "comet", "mlflow": "mlflow", "tensorboard": "tensorboard", "trackio": "trackio",
          "wandb": "wandb"}
WANDB_MODES = ("online", "offline", "disabled", "dryrun", "run", "shared")
STATE_FILE = TRACKERS_FILE
KEY = "logging.report_to"


def names_of(report_to: str | list[str]) -> list[str]:
    """``report_to`` as a list of names; ``"none"`` -> ``[]``; ``"all"`` stays ``["all"]``."""
    names = [report_to] if isinstance(report_to, str) else list(report_to)
    return [] if names in (["none"], []) else names


def requested(logging_cfg: Any) -> tuple[list[str], bool]:
    """The trackers a run asks for and whether they were named (``False`` for ``"all"``: only those installed,
    none of them required). The older booleans ``wandb`` / ``tensorboard`` name theirs."""
    names = names_of(logging_cfg.report_to)
    if names == ["all"]:
        return installed(), False
    for old in ("wandb", "tensorboard"):
        if getattr(logging_cfg, old, False) and old not in names:
            names.append(old)
    return names, True


def is_installed(name: str) -> bool:
    """Whether ``name``'s package can be imported (accelerate's test, without importing it)."""
    if name == "tensorboard":  # accelerate writes through torch.utils.tensorboard, which needs tensorboard itself
        return importlib.util.find_spec("tensorboard") is not None
    return importlib.util.find_spec(MODULES[name]) is not None


def installed() -> list[str]:
    """The known trackers whose package is installed: what ``report_to = "all"`` means."""
    return [name for name in KNOWN if is_installed(name)]


def install_hint(name: str) -> str:
    extra = EXTRAS.get(name)
    return f"pip install 'grpo-toolkit[{extra}]'" if extra else f"pip install {name}"


def tracker_problems(logging_cfg: Any) -> list[str]:
    """Why a named tracker cannot start, found without starting it: not installed, or a setting that names no
    mode or store (``WANDB_MODE``, ``MLFLOW_TRACKING_URI``). Unknown names are the config's to report."""
    names, named = requested(logging_cfg)
    if not named:  # "all": only what is installed, none of it required (a failing start is a warning then)
        return []
    out = []
    for name in names:
        if name not in KNOWN:
            continue
        if not is_installed(name):
            out.append(f"{name!r} is not installed ({install_hint(name)})")
        elif name == "wandb" and os.environ.get("WANDB_MODE", "online") not in WANDB_MODES:
            out.append(f"wandb: WANDB_MODE={os.environ['WANDB_MODE']!r} is not one of {', '.join(WANDB_MODES)}")
        elif name == "mlflow" and (why := _mlflow_uri_problem(os.environ.get("MLFLOW_TRACKING_URI", ""))):
            out.append(f"mlflow: MLFLOW_TRACKING_URI: {why}")
        elif (variable := FOLDER_VARIABLES.get(name)) and os.environ.get(variable) and \
                (why := folder_problem(Path(os.environ[variable]).expanduser())):
            out.append(f"{name}: {variable}: {why}")
    return out


FOLDER_VARIABLES = {"wandb": "WANDB_DIR", "trackio": "TRACKIO_DIR"}  # where each writes, when set


def folder_problem(path: Path) -> str | None:
    """Why a tracker could not write into the folder ``path`` (made when missing), known before it starts: a file
    there or above it, or a folder (the nearest existing one) this process cannot write into."""
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return f"{path} is a file, not a folder" if existing == path else f"{existing} (above {path}) is a file"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{path} is not writable" if existing == path else f"{existing} (above {path}) is not writable"
    return None


def _mlflow_uri_problem(uri: str) -> str | None:
    """Why a tracking URI cannot be a store MLflow writes to, known without MLflow: a local folder that is a
    file, or a database store without SQLAlchemy (mlflow-skinny alone). Anything else MLflow says when it starts."""
    if not uri:
        return None
    scheme, sep, rest = uri.partition(":")
    if not sep or len(scheme) == 1 or scheme == "file":  # a plain path (C:\\ too), or file:
        return folder_problem(Path(rest.removeprefix("//") if scheme == "file" else uri).expanduser())
    if scheme.partition("+")[0] in ("sqlite", "postgresql", "mysql", "mssql") and \
            importlib.util.find_spec("sqlalchemy") is None:
        return f"a database store ({scheme}) needs SQLAlchemy: {install_hint('mlflow')}"
    return None


def flat_config(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"grpo": {"beta": 0.0}}`` -> ``{"grpo.beta": 0.0}``: what every tracker takes as hyper-parameters
    (tensorboard's take scalars and strings only: lists become JSON, ``None`` ``"none"``)."""
    out: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flat_config(value, name + "."))
        elif value is None:
            out[name] = "none"
        elif isinstance(value, (bool, int, float, str)):
            out[name] = value
        else:
            out[name] = json.dumps(value, default=str)
    return out


def numeric(metrics: Mapping[str, Any]) -> dict[str, float]:
    """The finite numbers of a step's metrics (booleans, text and NaN left out)."""
    return {k: v for k, v in metrics.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}


class Trackers:
    """The started trackers of one run: ``log(step, metrics)`` and ``finish()``; each an accelerate
    ``GeneralTracker`` (``.trackers``)."""

    def __init__(self, trackers: list[Any]):
        self.trackers = trackers

    @property
    def names(self) -> list[str]:
        return [t.name for t in self.trackers]

    def locations(self) -> list[str]:
        """``name: where it writes`` for each started tracker (what a run says when it starts)."""
        return [f"{t.name}: {location(t)}" for t in self.trackers]

    def log(self, step: int, metrics: Mapping[str, Any]) -> None:
        values = numeric(metrics)
        if values:
            for tracker in self.trackers:
                tracker.log(values, step=step)

    def finish(self) -> None:
        for tracker in self.trackers:
            tracker.finish()
        self.trackers = []


def _read_state(run_dir: Path) -> dict[str, Any]:
    try:
        state = json.loads((run_dir / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


def _construct(name: str, run_dir: Path, project: str, run_name: str, resumed: dict[str, Any]) -> Any:
    """accelerate's tracker ``name`` as ``Accelerator.init_trackers`` builds it, with this run's places and names."""
    from accelerate.tracking import LOGGER_TYPE_TO_CLASS

    cls = LOGGER_TYPE_TO_CLASS[name]
    if name == "tensorboard":
        return cls("tensorboard", run_dir)  # RUN_DIR/tensorboard
    if name == "wandb":
        kwargs: dict[str, Any] = {"dir": str(run_dir), "name": run_name}
        if resumed.get("wandb"):
            kwargs.update(id=resumed["wandb"], resume="allow")
        return cls(project, **kwargs)
    if name == "mlflow":
        return cls(experiment_name=project, run_name=run_name, run_id=resumed.get("mlflow"))
    if name == "trackio":
        return cls(project, name=run_name, resume="allow" if resumed.get("trackio") else "never")
    if cls.requires_logging_directory:
        return cls(project, run_dir)
    return cls(project)


def location(tracker: Any) -> str:
    """Where a started tracker writes: its folder, store or run page, as the tracker itself reports it."""
    name = tracker.name
    if name == "tensorboard":
        return str(getattr(tracker, "logging_dir", "") or getattr(tracker, "logging_dir_param", ""))
    if name == "wandb":
        run = tracker.run
        url = getattr(run, "url", None)
        folder = getattr(run, "dir", None)
        return f"{url} (local files in {folder})" if url else f"{folder} (offline: `wandb sync` uploads it)"
    if name == "mlflow":
        import mlflow

        return f"{mlflow.get_tracking_uri()} (run {tracker.active_run.info.run_id})"
    if name == "trackio":
        from trackio.utils import TRACKIO_DIR

        return str(os.environ.get("TRACKIO_DIR") or TRACKIO_DIR)
    folder = getattr(tracker, "logging_dir", None)
    return str(folder) if folder else "its own service"


def _run_id(tracker: Any) -> str | None:
    """The id that continues this tracker's run on resume, where it has one."""
    if tracker.name == "wandb":
        return getattr(tracker.run, "id", None)
    if tracker.name == "mlflow":
        return tracker.active_run.info.run_id
    if tracker.name == "trackio":
        return tracker.run_name
    return None


def start_trackers(run_dir: str | Path, logging_cfg: Any, config: Mapping[str, Any] | None = None, *,
                   resume: bool = False) -> Trackers:
    """Start the trackers ``logging_cfg.report_to`` asks for and give each the run config; a named tracker that
    fails to start raises ``ConfigError`` (``logging.report_to``), the ones already started finished first."""
    names, named = requested(logging_cfg)
    if not names:
        return Trackers([])
    problems = tracker_problems(logging_cfg)
    if problems:
        raise ConfigError([Problem("", None, KEY, why) for why in problems])
    from accelerate.state import PartialState

    PartialState()  # accelerate's trackers log through its logger, which needs its state (an existing group is kept)
    run_dir = Path(run_dir)
    resumed = _read_state(run_dir) if resume else {}
    project = logging_cfg.project
    run_name = logging_cfg.run_name or run_dir.resolve().name
    started: list[Any] = []
    for name in dict.fromkeys(names):
        tracker = None
        try:
            tracker = _construct(name, run_dir, project, run_name, resumed)
            tracker.main_process_only = False  # the trainers call this on the main process alone
            tracker.start()
            if config is not None:
                tracker.store_init_configuration(flat_config(config))
            started.append(tracker)
        except Exception as exc:  # noqa: BLE001 (any failure of a tracker's own start: one line, before training)
            if tracker is not None and hasattr(tracker, "finish"):
                with contextlib.suppress(Exception):
                    tracker.finish()  # started, then failed on the config: ended, not left open
            text = str(exc).strip().splitlines()
            why = f"{name} could not start: {type(exc).__name__}: {text[0] if text else ''}"
            if not named:  # found by "all": not asked for by name, so not required
                print(f"warning: {KEY}: {why}; going on without it", file=sys.stderr)
                continue
            for done in started:  # already failing: the first error is the one to report
                with contextlib.suppress(Exception):
                    done.finish()
            raise ConfigError(why, key=KEY) from exc
    ids = {t.name: run_id for t in started if (run_id := _run_id(t))}
    if ids:
        with atomic_write(run_dir / STATE_FILE) as fh:
            fh.write(json.dumps({**resumed, **ids}, indent=2) + "\n")
    return Trackers(started)
