"""``[logging] report_to`` (grpo_core.outputs.trackers): the names, the refusals before training, and each
tracker written for real in its offline or local mode and read back with its own reader (tensorboard's
EventAccumulator, MlflowClient on a local sqlite store, wandb's offline run file, trackio's local database,
comet_ml's offline archive)."""

from __future__ import annotations

import importlib.util
import json
import os
import struct
import zipfile
from pathlib import Path
from typing import Any

import pytest

from grpo_core.config import LoggingConfig, config_from_dict
from grpo_core.outputs import trackers
from grpo_core.run_folder.metrics import MetricsLogger
from grpo_rewards.errors import ConfigError

CONFIG = {"grpo": {"beta": 0.0, "learning_rate": 1e-6}, "rewards": {"correct": {"use": "x", "weight": 2.0}},
          "lora": {"target_modules": ["q_proj", "v_proj"]}, "model": {"revision": None}}
STEPS = {1: {"reward/mean": 0.25, "rewards/correct": 0.5, "rewards/correct/failures": 0, "kl": float("nan"),
             "note": "text"},
         2: {"reward/mean": 0.75, "rewards/correct": 1.0, "rewards/correct/failures": 1, "kl": 0.125}}


def needs(module: str) -> Any:
    return pytest.mark.skipif(importlib.util.find_spec(module) is None,
                              reason=f"{module} is not installed (pip install 'grpo-toolkit[...]')")


def log_run(run_dir: Path, report_to: Any, **logging: Any) -> None:
    cfg = LoggingConfig(progress=False, plot=False, report_to=report_to, **logging)
    with MetricsLogger(run_dir, cfg, config=CONFIG) as logger:
        for step, metrics in STEPS.items():
            logger.log(step, metrics)


def base(**logging: Any) -> dict[str, Any]:
    return {"model": {"name_or_path": "m"}, "data": {"source": "hub/x"}, "rewards": {"a": {"use": "core_len"}},
            "logging": logging}


# ------------------------------------------------------------------------- names ----

def test_the_names_are_accelerates() -> None:
    from accelerate.tracking import LOGGER_TYPE_TO_CLASS

    assert set(trackers.KNOWN) == set(LOGGER_TYPE_TO_CLASS)


def test_report_to_takes_transformers_spellings(core_registry: Any) -> None:
    for value, names in (("none", []), ([], []), ("tensorboard", ["tensorboard"]),
                         (["mlflow", "wandb"], ["mlflow", "wandb"])):
        cfg = config_from_dict(base(report_to=value), registry=core_registry)
        assert trackers.requested(cfg.logging) == (names, True)
    cfg = config_from_dict(base(report_to="all"), registry=core_registry)
    assert trackers.requested(cfg.logging) == (trackers.installed(), False)  # installed ones, none required
    # the older spellings still run: they name their tracker
    cfg = config_from_dict(base(wandb=True, tensorboard=True, wandb_project="p"), registry=core_registry)
    assert trackers.requested(cfg.logging) == (["wandb", "tensorboard"], True) and cfg.logging.project == "p"


def test_bad_report_to_values_are_config_errors(core_registry: Any) -> None:
    cases = {"tensorbord": "unknown tracker 'tensorbord'; did you mean 'tensorboard'?",
             ("none", "wandb"): '"none" stands alone',
             ("all", "mlflow"): '"all" stands alone'}
    for value, why in cases.items():
        with pytest.raises(ConfigError) as info:
            config_from_dict(base(report_to=list(value) if isinstance(value, tuple) else value), registry=core_registry)
        assert str(info.value).startswith("<dict>: logging.report_to: ") and why in str(info.value)
    with pytest.raises(ConfigError, match="logging.wandb_project: is the older spelling of project"):
        config_from_dict(base(project="a", wandb_project="b"), registry=core_registry)


# -------------------------------------------------------------- refused early ----

MISSING = next((name for name in ("dvclive", "swanlab", "clearml", "aim") if not trackers.is_installed(name)), None)


@pytest.mark.skipif(MISSING is None, reason="every tracker is installed")
def test_a_named_tracker_that_is_not_installed_is_refused_before_anything(tmp_path: Path, core_registry: Any,
                                                                          use_core_registry: Any,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from grpo_rewards.command_line import main

    config = tmp_path / "run.toml"
    config.write_text(f'[model]\nname_or_path = "org/not-fetched"\n[data]\nsource = "hub/x"\n'
                      f'[logging]\noutput_dir = "{tmp_path / "run"}"\nreport_to = ["{MISSING}"]\n'
                      '[rewards.a]\nuse = "core_len"\n')
    line = f"{config}: logging.report_to: {MISSING!r} is not installed"
    for argv in (["config", "validate", str(config)], ["train", str(config), "--dry-run"], ["train", str(config)]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err[-1].startswith(line) and sum(line in e for e in err) == 1, argv  # one line, before the model
        assert not [e for e in err if "Traceback" in e or "internal error" in e]
    assert not (tmp_path / "run").exists()
    # "all" takes what is installed: nothing missing, nothing refused
    cfg = config_from_dict(base(report_to="all"), registry=core_registry)
    assert MISSING not in trackers.requested(cfg.logging)[0] and not trackers.tracker_problems(cfg.logging)
    # the older spelling is a named tracker too: no longer a warning
    if not trackers.is_installed("wandb"):
        assert trackers.tracker_problems(LoggingConfig(wandb=True)) == [
            "'wandb' is not installed (pip install 'grpo-toolkit[wandb]')"]


@needs("mlflow")
def test_a_tracker_that_fails_to_start_stops_the_run_before_its_files(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WANDB_MODE", "sideways")
    with pytest.raises(ConfigError) as info:
        log_run(tmp_path / "a", ["wandb"])
    assert str(info.value) == ("logging.report_to: wandb: WANDB_MODE='sideways' is not one of online, offline, "
                               "disabled, dryrun, run, shared")
    # a local store that is a file: known before anything starts
    (tmp_path / "store").write_text("x")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", str(tmp_path / "store"))
    assert trackers.tracker_problems(LoggingConfig(report_to="mlflow")) == [
        f"mlflow: MLFLOW_TRACKING_URI: {tmp_path / 'store'} is a file, not a folder"]
    # mlflow cannot open this store (a file where its folder should be): found when it starts
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'store' / 'db.sqlite'}")
    with pytest.raises(ConfigError) as info:
        log_run(tmp_path / "b", ["tensorboard", "mlflow"] if trackers.is_installed("tensorboard") else ["mlflow"])
    assert str(info.value).startswith("logging.report_to: mlflow could not start: ")
    assert len(str(info.value).splitlines()) == 1
    assert not (tmp_path / "b" / "metrics.jsonl").exists()  # nothing written: the run did not start


# ------------------------------------------------------------- read back ----

@needs("tensorboard")
def test_tensorboard_event_files_hold_the_metrics_and_the_config(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import plugin_data_pb2

    log_run(tmp_path, "tensorboard")
    assert f"tracker tensorboard: {tmp_path / 'tensorboard'}" in capsys.readouterr().err.splitlines()  # where it wrote
    events = EventAccumulator(str(tmp_path / "tensorboard"))
    events.Reload()
    assert [(e.step, e.value) for e in events.Scalars("reward/mean")] == [(1, 0.25), (2, 0.75)]
    assert [(e.step, e.value) for e in events.Scalars("rewards/correct")] == [(1, 0.5), (2, 1.0)]
    assert [(e.step, e.value) for e in events.Scalars("kl")] == [(2, 0.125)]  # NaN left out
    assert "note" not in events.Tags()["scalars"]
    hparams = {}
    for folder in (tmp_path / "tensorboard").iterdir():
        if folder.is_dir():
            acc = EventAccumulator(str(folder))
            acc.Reload()
            try:
                contents = acc.PluginTagToContent("hparams").values()
            except KeyError:  # a folder without the hparams summary
                continue
            for content in contents:
                data = plugin_data_pb2.HParamsPluginData.FromString(content)
                if data.HasField("session_start_info"):
                    hparams = {k: v.WhichOneof("kind") and getattr(v, v.WhichOneof("kind"))
                               for k, v in data.session_start_info.hparams.items()}
    assert hparams["grpo.beta"] == 0.0 and hparams["rewards.correct.weight"] == 2.0
    assert hparams["lora.target_modules"] == '["q_proj", "v_proj"]' and hparams["model.revision"] == "none"


@needs("mlflow")
@needs("sqlalchemy")
def test_mlflow_local_store_holds_the_metrics_and_params_and_a_resume_continues_its_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    run_dir = tmp_path / "run"
    log_run(run_dir, "mlflow", project="exp", run_name="first")
    client = MlflowClient(tracking_uri=uri)
    [experiment] = [e for e in client.search_experiments() if e.name == "exp"]
    [run] = client.search_runs([experiment.experiment_id])
    assert f"tracker mlflow: {uri} (run {run.info.run_id})" in capsys.readouterr().err.splitlines()
    assert run.info.run_name == "first" and run.info.status == "FINISHED"
    assert [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, "reward/mean")] == [(1, 0.25), (2, 0.75)]
    assert [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, "rewards/correct/failures")] == [
        (1, 0.0), (2, 1.0)]
    assert run.data.params["grpo.learning_rate"] == "1e-06" and run.data.params["rewards.correct.weight"] == "2.0"
    assert json.loads((run_dir / "trackers.json").read_text()) == {"mlflow": run.info.run_id}
    # a resumed run logs on into the same MLflow run
    cfg = LoggingConfig(progress=False, plot=False, report_to="mlflow", project="exp", run_name="first")
    with MetricsLogger(run_dir, cfg, start_step=2) as logger:
        logger.log(3, {"reward/mean": 1.0})
    assert len(client.search_runs([experiment.experiment_id])) == 1
    assert [m.step for m in client.get_metric_history(run.info.run_id, "reward/mean")] == [1, 2, 3]


def wandb_records(path: Path) -> list[Any]:
    """The records of a wandb run file (a LevelDB-style log of ``wandb_internal_pb2.Record`` protobufs: a 7-byte
    ``:W&B`` header, then 32 KiB blocks of chunks, each with a 7-byte header: CRC32, length, type)."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B"
    pos, block, records, pending = 7, 32768, [], b""
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if kind == 0 and length == 0:
            pos += left
            continue
        pending += data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # a whole record, or a record's last chunk
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            records.append(record)
            pending = b""
    return records


@needs("wandb")
def test_wandb_offline_run_holds_the_metrics_and_the_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    log_run(tmp_path, ["wandb"], project="proj", run_name="named")
    import wandb

    [said] = [line for line in capsys.readouterr().err.splitlines() if line.startswith("tracker wandb: ")]
    assert said.startswith(f"tracker wandb: {tmp_path / 'wandb'}{os.sep}offline-run-") and "(offline" in said, said

    wandb.teardown()  # the run file is written by wandb's service process: wait until it has flushed and exited
    [run_file] = (tmp_path / "wandb").glob("offline-run-*/run-*.wandb")
    records = wandb_records(run_file)
    [run] = [r.run for r in records if r.WhichOneof("record_type") == "run"]
    assert (run.project, run.display_name) == ("proj", "named")
    assert json.loads((tmp_path / "trackers.json").read_text()) == {"wandb": run.run_id}
    history = [{key: json.loads(i.value_json) for i in r.history.item
                if not (key := i.key or "/".join(i.nested_key)).startswith("_")}
               for r in records if r.WhichOneof("record_type") == "history"]
    assert history == [{"reward/mean": 0.25, "rewards/correct": 0.5, "rewards/correct/failures": 0},
                       {"reward/mean": 0.75, "rewards/correct": 1.0, "rewards/correct/failures": 1, "kl": 0.125}]
    config = {i.key or "/".join(i.nested_key): json.loads(i.value_json) for r in records if r.WhichOneof("record_type") == "config"
              for i in r.config.update}
    assert config["grpo.beta"] == 0.0 and config["rewards.correct.weight"] == 2.0


TRACKIO_SCRIPT = """
import json, sys
from tests.core.test_trackers import log_run
from pathlib import Path
from trackio.sqlite_storage import SQLiteStorage
log_run(Path(sys.argv[1]), "trackio", project="grpo-test", run_name="r1")
print("RESULT", json.dumps({"logs": SQLiteStorage.get_logs("grpo-test", "r1"),
                  "config": SQLiteStorage.get_run_config("grpo-test", "r1")}, default=str))
"""


@needs("trackio")
def test_trackio_local_database_holds_the_metrics_and_the_config(tmp_path: Path) -> None:
    """In a process of its own: trackio reads TRACKIO_DIR (its local database's folder) when imported."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "TRACKIO_DIR": str(tmp_path / "trackio"), "PYTHONPATH": os.pathsep.join(
        [str(Path(__file__).parents[2]), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", TRACKIO_SCRIPT, str(tmp_path / "run")], env=env, text=True,
                         capture_output=True, timeout=240)
    assert out.returncode == 0, out.stderr[-2000:]
    read = json.loads(next(line for line in out.stdout.splitlines() if line.startswith("RESULT "))[7:])
    assert [(r["step"], r["reward/mean"], r["rewards/correct"]) for r in read["logs"]] == [(1, 0.25, 0.5),
                                                                                         (2, 0.75, 1.0)]
    assert read["config"]["grpo.beta"] == 0.0 and read["config"]["rewards.correct.weight"] == 2.0
    assert (tmp_path / "trackio" / "grpo-test.db").is_file()
    assert f"tracker trackio: {tmp_path / 'trackio'}" in out.stderr.splitlines()


@needs("comet_ml")
def test_comet_offline_archive_holds_the_metrics(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMET_START_ONLINE", "false")
    monkeypatch.setenv("COMET_OFFLINE_DIRECTORY", str(tmp_path / "comet"))
    monkeypatch.setenv("COMET_DISABLE_AUTO_LOGGING", "1")
    log_run(tmp_path / "run", "comet_ml", project="proj")
    [archive] = (tmp_path / "comet").glob("*.zip")
    with zipfile.ZipFile(archive) as zf:
        messages = [json.loads(line) for line in zf.read("messages.json").splitlines() if line.strip()]
    metrics = [(m["payload"]["metric"]["metricName"], m["payload"]["metric"]["metricValue"],
                m["payload"]["metric"]["step"]) for m in messages if m["type"] == "metric_msg"]
    assert ("reward/mean", 0.25, 1) in metrics and ("reward/mean", 0.75, 2) in metrics
    assert ("rewards/correct", 1.0, 2) in metrics


ALL_SCRIPT = """
from tests.core.test_trackers import log_run
from pathlib import Path
import sys
log_run(Path(sys.argv[1]), "all")
"""


@needs("tensorboard")
@needs("wandb")
def test_all_reports_to_the_installed_trackers_and_leaves_out_one_that_fails(tmp_path: Path) -> None:
    """``"all"``: every installed tracker, none required: one that cannot start (wandb with a bad mode here) is a
    warning line and the others report (in a process of its own, each tracker writing under tmp_path)."""
    import os
    import subprocess
    import sys

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    env = {**os.environ, "WANDB_MODE": "sideways", "WANDB_SILENT": "true", "TRACKIO_DIR": str(tmp_path / "trackio"),
           "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}", "COMET_START_ONLINE": "false",
           "COMET_OFFLINE_DIRECTORY": str(tmp_path / "comet"),
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[2]), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", ALL_SCRIPT, str(tmp_path / "run")], env=env, text=True,
                         capture_output=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    warned = [line for line in out.stderr.splitlines() if line.startswith("warning: logging.report_to: wandb could")]
    assert len(warned) == 1 and warned[0].endswith("going on without it")
    events = EventAccumulator(str(tmp_path / "run" / "tensorboard"))
    events.Reload()
    assert [(e.step, e.value) for e in events.Scalars("reward/mean")] == [(1, 0.25), (2, 0.75)]
    started = json.loads((tmp_path / "run" / "trackers.json").read_text())
    assert "wandb" not in started and ("mlflow" in started) == trackers.is_installed("mlflow")


@needs("tensorboard")
def test_the_older_spellings_still_run_with_a_warning(tmp_path: Path, use_core_registry: Any,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from grpo_rewards.command_line import main

    config = tmp_path / "run.toml"
    config.write_text('[model]\nname_or_path = "org/not-fetched"\n[data]\nsource = "hub/x"\n'
                      '[logging]\ntensorboard = true\nwandb_project = "old"\n[rewards.a]\nuse = "core_len"\n')
    assert main(["config", "validate", str(config), "--print"]) == 0
    out, err = capsys.readouterr()
    assert err.splitlines() == [
        f'warning: {config}: logging.tensorboard is deprecated: use logging.report_to = ["tensorboard"]',
        f"warning: {config}: logging.wandb_project is deprecated: use logging.project"]
    resolved = json.loads(out[out.index("{"):])
    assert resolved["logging"]["project"] == "old" and resolved["logging"]["tensorboard"] is True
    log_run(tmp_path / "run", "none", tensorboard=True)  # the older spelling starts tensorboard
    assert list((tmp_path / "run" / "tensorboard").glob("events.out.tfevents.*"))


@needs("tensorboard")
def test_overwrite_removes_the_earlier_runs_tracker_files(tmp_path: Path) -> None:
    from grpo_core.run_folder.checkpoints import clear_run_dir

    log_run(tmp_path, "tensorboard")
    (tmp_path / "trackers.json").write_text('{"mlflow": "earlier"}')
    clear_run_dir(tmp_path)
    assert not (tmp_path / "tensorboard").exists() and not (tmp_path / "trackers.json").exists()


@pytest.mark.parametrize(("name", "variable"), sorted(trackers.FOLDER_VARIABLES.items()))
def test_a_tracker_folder_that_cannot_be_written_is_refused_before_anything(
        name: str, variable: str, tmp_path: Path, core_registry: Any, use_core_registry: Any,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from grpo_rewards.command_line import main

    if not trackers.is_installed(name):
        pytest.skip(f"{name} is not installed")
    (tmp_path / "a-file").write_text("x")
    config = tmp_path / "run.toml"
    config.write_text(f'[model]\nname_or_path = "org/not-fetched"\n[data]\nsource = "hub/x"\n'
                      f'[logging]\noutput_dir = "{tmp_path / "run"}"\nreport_to = ["{name}"]\n'
                      '[rewards.a]\nuse = "core_len"\n')
    for where, why in ((tmp_path / "a-file", "is a file, not a folder"),
                       (tmp_path / "a-file" / "logs", f"{tmp_path / 'a-file'} (above {tmp_path / 'a-file' / 'logs'}) is a file")):
        monkeypatch.setenv(variable, str(where))
        line = f"{config}: logging.report_to: {name}: {variable}: " + (f"{where} {why}" if where.name == "a-file" else why)
        for argv in (["train", str(config), "--dry-run"], ["train", str(config)]):
            assert main(argv) == 2
            err = capsys.readouterr().err.strip().splitlines()
            assert err[-1] == line, err
    monkeypatch.setenv(variable, str(tmp_path / "new" / "logs"))  # made when missing: no problem
    assert trackers.tracker_problems(LoggingConfig(report_to=name)) == []
    assert not (tmp_path / "run").exists()
