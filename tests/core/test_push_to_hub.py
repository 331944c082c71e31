"""``[hub] push_to_hub`` (grpo_core.outputs.hub) against a loopback stand-in for the Hub (tests/core/hub_server.py:
repo creation, branch, preupload, LFS batch and PUT, commit), through huggingface_hub itself with
``HF_HUB_DISABLE_XET=1``: the bytes the server received equal the run's model folder, the card loads with
``ModelCard.load``; the hub strategies; a failed push leaves the run folder whole; and a real short training
reporting to tensorboard and mlflow and pushing, end to end. The Xet upload path and real authentication are
not exercised here (no hub is reachable)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from grpo_core.config import config_from_dict
from grpo_rewards.errors import ConfigError, ServiceError
from tests.core.hub_server import USER, FakeHub


def point_at(monkeypatch: pytest.MonkeyPatch, server: FakeHub) -> None:
    """huggingface_hub reads HF_ENDPOINT and HF_HUB_DISABLE_XET once, when imported (earlier in this process)."""
    import huggingface_hub.constants as constants

    monkeypatch.setattr(constants, "ENDPOINT", server.url)
    monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", server.url + "/{repo_id}/resolve/{revision}/{filename}")
    monkeypatch.setattr(constants, "HF_HUB_DISABLE_XET", True)


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Any:
    with FakeHub(lifetime=240) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        monkeypatch.setenv("HF_HUB_DISABLE_XET", "1")
        monkeypatch.setenv("HF_TOKEN", "hf_loopback_token")
        monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
        point_at(monkeypatch, server)
        yield server


def folder_files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def run_config(run_dir: Path, registry: Any, **hub: Any) -> Any:
    return config_from_dict({
        "model": {"name_or_path": "HuggingFaceTB/SmolLM2-135M-Instruct"}, "data": {"source": "openai/gsm8k"},
        "rewards": {"short": {"use": "core_len", "weight": 0.5}, "match": {"use": "core_match", "weight": 2.0}},
        "lora": {"enabled": True}, "logging": {"output_dir": str(run_dir)}, "hub": {"push_to_hub": True, **hub},
    }, registry=registry)


def fake_run(run_dir: Path) -> None:
    """A finished run folder: model/ (weights, config, tokenizer file), curves.png, metrics.jsonl."""
    model = run_dir / "model"
    model.mkdir(parents=True)
    (model / "adapter_model.safetensors").write_bytes(bytes(range(256)) * 40)
    (model / "adapter_config.json").write_text('{"r": 16}')
    (model / "tokenizer.json").write_text('{"version": "1.0"}')
    (run_dir / "curves.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(300))
    (run_dir / "metrics.jsonl").write_text(json.dumps({"step": 3, "reward/mean": 0.625, "rewards/short": -0.25,
                                                       "rewards/match": 0.5, "eval/reward/mean": 0.375}) + "\n")


def test_push_uploads_the_model_folder_and_a_card_that_loads(hub: FakeHub, tmp_path: Path,
                                                               core_registry: Any) -> None:
    from huggingface_hub import ModelCard

    from grpo_core.outputs.hub import push_to_hub

    run_dir = tmp_path / "my-run"
    fake_run(run_dir)
    cfg = run_config(run_dir, core_registry, hub_model_id="grpo-smol", hub_private_repo=True, hub_token="hf_secret")
    url = push_to_hub(run_dir, cfg)
    repo = f"{USER}/grpo-smol"
    assert url == f"{hub.url}/{repo}" and hub.repos[repo]["private"]
    received = hub.files(repo)
    assert received == folder_files(run_dir / "model")  # every byte, the weights through LFS
    assert set(received) == {"adapter_model.safetensors", "adapter_config.json", "tokenizer.json", "README.md",
                             "curves.png"}
    assert received["curves.png"] == (run_dir / "curves.png").read_bytes()
    assert ("PUT", next(p for m, p in hub.log if m == "PUT")) and "Bearer hf_secret" in hub.tokens
    assert [c["summary"] for c in hub.commits] == ["End of training"]
    card = ModelCard.load(repo)  # from the hub, through huggingface_hub's download
    assert card.data.base_model == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert card.data.datasets == ["openai/gsm8k"] and card.data.library_name == "peft" and "grpo" in card.data.tags
    assert "| short | `core_len` | 0.5 | -0.25 |" in card.text and "| match | `core_match` | 2 | 0.5 |" in card.text
    assert "| reward/mean | 0.625 |" in card.text and "| eval/reward/mean | 0.375 |" in card.text
    assert "![training curves](curves.png)" in card.text and '"learning_rate": 1e-06' in card.text
    assert "hf_secret" not in card.content  # the token is never written down


def test_hub_revision_is_a_branch_and_a_name_goes_to_the_tokens_namespace(hub: FakeHub, tmp_path: Path,
                                                                          core_registry: Any) -> None:
    from grpo_core.outputs.hub import push_to_hub

    run_dir = tmp_path / "named-after-the-folder"
    fake_run(run_dir)
    push_to_hub(run_dir, run_config(run_dir, core_registry, hub_revision="experiment-1"))
    repo = f"{USER}/named-after-the-folder"  # transformers' default: the output folder's name
    assert hub.files(repo, "experiment-1") == folder_files(run_dir / "model") and hub.files(repo, "main") == {}
    assert hub.repos[repo]["private"] is False or hub.repos[repo]["private"] is None


def test_a_failed_push_is_one_line_and_the_run_folder_stays(tmp_path: Path, core_registry: Any,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    from grpo_core.outputs.hub import push_to_hub

    run_dir = tmp_path / "run"
    fake_run(run_dir)
    before = folder_files(run_dir)
    with FakeHub(lifetime=120, fail_commits=True) as server:
        point_at(monkeypatch, server)
        monkeypatch.setenv("HF_TOKEN", "hf_x")
        monkeypatch.setenv("HF_HUB_ETAG_TIMEOUT", "2")
        with pytest.raises(ServiceError) as info:
            push_to_hub(run_dir, run_config(run_dir, core_registry, hub_model_id="org/m"))
    text = str(info.value)
    assert len(text.splitlines()) == 1
    assert text.startswith(f"hub.push_to_hub: pushing {run_dir / 'model'} to org/m failed (")
    assert f"the run folder {run_dir} is complete" in text
    after = folder_files(run_dir)
    assert {k: v for k, v in after.items() if k not in ("model/README.md", "model/curves.png")} == before


def checkpoint_at(run_dir: Path, step: int) -> Path:
    folder = run_dir / "checkpoints" / f"step-{step:08d}"
    folder.mkdir(parents=True)
    (folder / "weights.safetensors").write_bytes(bytes([step]) * 2000)
    (folder / "meta.json").write_text(json.dumps({"step": step}))
    return folder


def saver(step: int) -> Any:
    """What the trainers hand to ``on_save``: writes the model folder as it is at ``step``."""
    def save(out: Path) -> None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "adapter_model.safetensors").write_bytes(bytes([step]) * 3000)
        (out / "adapter_config.json").write_text('{"r": 16}')
    return save


@pytest.mark.parametrize("strategy, pushed", [
    ("end", []),
    ("every_save", [("Training in progress, step 1", {"README.md", "adapter_config.json", "adapter_model.safetensors"}),
                    ("Training in progress, step 2", {"README.md", "adapter_config.json", "adapter_model.safetensors"})]),
    ("all_checkpoints", [
        ("Training in progress, step 1", {"README.md", "adapter_config.json", "adapter_model.safetensors"}),
        ("Training in progress, step 1, checkpoint", {"checkpoints/step-00000001/meta.json",
                                                      "checkpoints/step-00000001/weights.safetensors"}),
        ("Training in progress, step 2", {"README.md", "adapter_config.json", "adapter_model.safetensors"}),
        ("Training in progress, step 2, checkpoint", {"checkpoints/step-00000002/meta.json",
                                                      "checkpoints/step-00000002/weights.safetensors"})]),
])
def test_saves_push_as_the_strategy_says(strategy: str, pushed: list[Any], hub: FakeHub, tmp_path: Path,
                                         core_registry: Any) -> None:
    from grpo_core.outputs.hub import HubPusher

    run_dir = tmp_path / "run"
    pusher = HubPusher(run_config(run_dir, core_registry, hub_model_id="m", hub_strategy=strategy))
    for step in (1, 2):
        pusher.on_save(run_dir, step, checkpoint_at(run_dir, step), saver(step), {"reward/mean": step / 4})
    assert [(c["summary"], set(c["paths"])) for c in hub.commits] == pushed
    if pushed:
        received = hub.files(f"{USER}/m")
        assert received["adapter_model.safetensors"] == bytes([2]) * 3000  # the newest save's model
        assert "| reward/mean | 0.5 |" in received["README.md"].decode()


def test_a_failed_push_at_a_save_is_a_warning_and_training_goes_on(tmp_path: Path, core_registry: Any,
                                                                   monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from grpo_core.outputs.hub import HubPusher

    run_dir = tmp_path / "run"
    with FakeHub(lifetime=120, fail_commits=True) as server:
        point_at(monkeypatch, server)
        monkeypatch.setenv("HF_TOKEN", "hf_x")
        pusher = HubPusher(run_config(run_dir, core_registry, hub_model_id="m", hub_strategy="checkpoint"))
        pusher.on_save(run_dir, 1, checkpoint_at(run_dir, 1), saver(1), {})  # returns: no exception
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip() and "%|" not in line]  # no bar
    assert len(err) == 1 and err[0].startswith("warning: hub.push_to_hub: the push at step 1 failed (")
    assert err[0].endswith("; training goes on")


def test_the_token_is_never_written_down(core_registry: Any, tmp_path: Path) -> None:
    cfg = run_config(tmp_path / "run", core_registry, hub_token="hf_secret")
    assert cfg.hub.hub_token == "hf_secret" and cfg.to_dict()["hub"]["hub_token"] == "<hidden>"
    assert "hf_secret" not in json.dumps(cfg.to_dict())


def test_hub_keys_are_checked_with_the_config(tmp_path: Path, core_registry: Any) -> None:
    def problems(**hub: Any) -> str:
        with pytest.raises(ConfigError) as info:
            config_from_dict({"model": {"name_or_path": "m"}, "data": {"source": "hub/x"},
                              "rewards": {"a": {"use": "core_len"}}, "hub": hub}, registry=core_registry)
        return str(info.value)

    assert problems(push_to_hub=True, hub_model_id="a/b/c").startswith(
        "<dict>: hub.hub_model_id: Repo id must be in the form 'repo_name' or 'namespace/repo_name'")
    assert "hub.hub_model_id: Cannot have -- or .. in repo_id" in problems(push_to_hub=True, hub_model_id="x--y")
    assert "hub.hub_strategy: must be one of end, every_save, checkpoint, all_checkpoints, got 'every_step'" in \
        problems(push_to_hub=True, hub_strategy="every_step")
    assert problems(hub_model_id="org/m") == "<dict>: hub.hub_model_id: only meaningful with push_to_hub = true"
    cfg = config_from_dict({"model": {"name_or_path": "m"}, "data": {"source": "hub/x"},
                            "rewards": {"a": {"use": "core_len"}}, "hub": {"push_to_hub": True}}, registry=core_registry)
    assert cfg.hub.hub_strategy == "every_save"  # transformers' default


def test_no_token_is_refused_before_anything_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   use_core_registry: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from grpo_rewards.command_line import main

    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty_hf_home"))  # no saved login
    monkeypatch.setenv("HF_TOKEN_PATH", str(tmp_path / "empty_hf_home" / "token"))
    import huggingface_hub.constants as constants

    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "empty_hf_home" / "token"))
    monkeypatch.setattr(constants, "HF_STORED_TOKENS_PATH", str(tmp_path / "empty_hf_home" / "stored_tokens"))
    config = tmp_path / "run.toml"
    config.write_text(f'[model]\nname_or_path = "org/not-fetched"\n[data]\nsource = "hub/x"\n[logging]\n'
                      f'output_dir = "{tmp_path / "run"}"\n[hub]\npush_to_hub = true\n[rewards.a]\nuse = "core_len"\n')
    for argv in (["config", "validate", str(config)], ["train", str(config), "--dry-run"], ["train", str(config)]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err[-1] == (f"{config}: hub.hub_token: no token to push with: set HF_TOKEN, run `hf auth login`, "
                           "or set hub_token"), argv
    assert not (tmp_path / "run").exists()


# -------------------------------------------------------------- a real run, end to end ----

TRAIN = """\
[model]
name_or_path = "{model}"
dtype = "float32"
gradient_checkpointing = false

[data]
source = "{rows}"
chat_template = false

[generation]
num_generations = 2
max_completion_length = 6

[grpo]
learning_rate = 1e-2
prompts_per_step = 2
max_steps = 3

[lora]
enabled = true
r = 4

[logging]
output_dir = "{run_dir}"
progress = false
report_to = {report_to}
project = "e2e"

[checkpoint]
every = 1
keep_last = 2

[hub]
push_to_hub = true
hub_model_id = "grpo-tiny"
hub_strategy = "checkpoint"

[rewards.short]
use = "core_len"
weight = 0.5

[rewards.match]
use = "core_match"
"""


@pytest.mark.slow
@pytest.mark.skipif(not (importlib.util.find_spec("tensorboard") and importlib.util.find_spec("mlflow")
                         and importlib.util.find_spec("sqlalchemy")), reason="tensorboard and mlflow not installed")
def test_a_real_run_reports_to_tensorboard_and_mlflow_and_pushes(hub: FakeHub, tiny_model_dir: Path, tmp_path: Path,
                                                                 use_core_registry: Any,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub import ModelCard
    from mlflow.tracking import MlflowClient
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from grpo_core.run_folder.metrics import read_jsonl
    from grpo_rewards.command_line import main

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"prompt": f"{a}+{a}=", "answer": str(2 * a)}) + "\n" for a in range(6)))
    run_dir = tmp_path / "run"
    config = tmp_path / "run.toml"
    config.write_text(TRAIN.format(model=tiny_model_dir, rows=rows, run_dir=run_dir,
                                   report_to='["tensorboard", "mlflow"]'))
    assert main(["train", str(config)]) == 0

    metrics = read_jsonl(run_dir / "metrics.jsonl")
    assert [m["step"] for m in metrics] == [1, 2, 3]
    events = EventAccumulator(str(run_dir / "tensorboard"))
    events.Reload()
    for key in ("reward/mean", "rewards/short", "rewards/match", "rewards/short/failures"):
        assert [(e.step, round(e.value, 5)) for e in events.Scalars(key)] == [
            (m["step"], round(m[key], 5)) for m in metrics], key
    client = MlflowClient(tracking_uri=uri)
    [experiment] = [e for e in client.search_experiments() if e.name == "e2e"]
    [run] = client.search_runs([experiment.experiment_id])
    assert [(h.step, round(h.value, 5)) for h in client.get_metric_history(run.info.run_id, "rewards/match")] == [
        (m["step"], round(m["rewards/match"], 5)) for m in metrics]
    assert run.data.params["rewards.short.weight"] == "0.5" and run.data.params["grpo.max_steps"] == "3"

    repo = f"{USER}/grpo-tiny"
    received = hub.files(repo)
    model_files = folder_files(run_dir / "model")
    assert {k: v for k, v in received.items() if not k.startswith("last-checkpoint/")} == model_files
    newest = sorted((run_dir / "checkpoints").iterdir())[-1]
    # the newest checkpoint pushed at a save is step 2's (step 3's save is the end's push)
    assert newest.name == "step-00000003"
    step2 = {k.removeprefix("last-checkpoint/"): v for k, v in received.items() if k.startswith("last-checkpoint/")}
    assert set(step2) == set(folder_files(run_dir / "checkpoints" / "step-00000002"))
    assert step2 == folder_files(run_dir / "checkpoints" / "step-00000002")
    assert [c["summary"] for c in hub.commits] == [
        "Training in progress, step 1", "Training in progress, step 1, checkpoint",
        "Training in progress, step 2", "Training in progress, step 2, checkpoint", "End of training"]
    assert "adapter_model.safetensors" in received and "curves.png" in received
    card = ModelCard.load(repo)
    assert card.data.base_model is None  # a local folder is no hub id
    assert f"| reward/mean | {metrics[-1]['reward/mean']:.6g} |" in card.text


@pytest.mark.slow
@pytest.mark.skipif(not (importlib.util.find_spec("tensorboard") and importlib.util.find_spec("trl")),
                    reason="tensorboard or trl not installed")
def test_the_trl_backend_reports_and_pushes_the_same_way(hub: FakeHub, tiny_model_dir: Path, tmp_path: Path,
                                                         use_core_registry: Any) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from grpo_core.run_folder.metrics import read_jsonl
    from grpo_rewards.command_line import main

    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"prompt": f"{a}+{a}=", "answer": str(2 * a)}) + "\n" for a in range(6)))
    run_dir = tmp_path / "run"
    config = tmp_path / "run.toml"
    config.write_text(TRAIN.format(model=tiny_model_dir, rows=rows, run_dir=run_dir, report_to='"tensorboard"'))
    assert main(["train", str(config), "--set", "trainer.backend=trl", "--set", "hub.hub_strategy=every_save"]) == 0
    metrics = read_jsonl(run_dir / "metrics.jsonl")
    assert [m["step"] for m in metrics] == [1, 2, 3]
    events = EventAccumulator(str(run_dir / "tensorboard"))
    events.Reload()
    assert [(e.step, round(e.value, 5)) for e in events.Scalars("rewards/match")] == [
        (m["step"], round(m["rewards/match"], 5)) for m in metrics]
    assert hub.files(f"{USER}/grpo-tiny") == folder_files(run_dir / "model")
    assert [c["summary"] for c in hub.commits] == ["Training in progress, step 1", "Training in progress, step 2",
                                                   "End of training"]


@pytest.mark.slow
@pytest.mark.skipif(not importlib.util.find_spec("tensorboard"), reason="tensorboard not installed")
def test_two_processes_report_and_push_from_rank_zero_only(hub: FakeHub, tmp_path: Path) -> None:
    """torchrun with 2 processes (tests/core/ddp_worker.py): one tensorboard writer (rank 0's), one push."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from grpo_core.run_folder.metrics import read_jsonl
    from tests.core import test_distributed as ddp
    from tests.core.conftest import build_arithmetic_model

    model_dir = build_arithmetic_model(tmp_path / "model")
    run_dir = tmp_path / "two"
    config = ddp.run_config(model_dir, run_dir, loss_type="dapo", lora=True, **{
        "logging.report_to": ["tensorboard"], "grpo.max_steps": 2})
    config["hub"] = {"push_to_hub": True, "hub_model_id": "two-ranks", "hub_strategy": "end"}
    (tmp_path / "runs.json").write_text(json.dumps([{"config": config}]))
    proc = ddp.torchrun(tmp_path / "runs.json")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    writers = list((run_dir / "tensorboard").glob("events.out.tfevents.*"))
    assert len(writers) == 1  # rank 0's alone
    events = EventAccumulator(str(run_dir / "tensorboard"))
    events.Reload()
    metrics = read_jsonl(run_dir / "metrics.jsonl")
    assert [(e.step, round(e.value, 5)) for e in events.Scalars("reward/mean")] == [
        (m["step"], round(m["reward/mean"], 5)) for m in metrics] and len(metrics) == 2
    assert [c["summary"] for c in hub.commits] == ["End of training"]
    assert hub.files(f"{USER}/two-ranks") == folder_files(run_dir / "model")
