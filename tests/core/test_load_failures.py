"""Failures of the newer load and write paths are one line naming the file or key, exit 2 (a ``UserError`` in
Python), never an internal error: an adapter of another base model or with truncated weights (``grpo train``
and ``grpo eval --base``), a checkpoint folder that becomes read-only while the run goes on, and a
``GRPO_DISABLE_PLUGINS`` naming no installed plugin (a warning, as it would otherwise leave nothing out)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from grpo_core.run_folder.checkpoints import RunFolderError, list_checkpoints
from grpo_rewards import hookimpl
from grpo_rewards.command_line import main
from tests.core.conftest import build_tiny_model, build_tokenizer


def save_adapter(model_dir: Path, out: Path) -> Path:
    """A LoRA adapter (rank 4 on q_proj and v_proj) of ``model_dir``, saved as PeftModel.save_pretrained does."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir)
    get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"])).save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("adapters")
    tokenizer = build_tokenizer()
    small = build_tiny_model(root / "small", tokenizer, hidden=32)
    wide = build_tiny_model(root / "wide", tokenizer, hidden=48)
    adapter = save_adapter(small, root / "adapter_of_small")
    truncated = Path(shutil.copytree(adapter, root / "truncated"))
    weights = truncated / "adapter_model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    return {"small": small, "wide": wide, "adapter": adapter, "truncated": truncated}


def run_config(tmp_path: Path, model: Path, adapter: Path, **extra: Any) -> Path:
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"prompt": f"What is {i} + {i}?", "answer": str(2 * i)}) + "\n"
                            for i in range(8)))
    path = tmp_path / "run.toml"
    path.write_text(f"""
[model]
name_or_path = "{model}"
adapter = "{adapter}"
dtype = "float32"
[data]
source = "{rows}"
[generation]
num_generations = 2
max_completion_length = 4
[grpo]
max_steps = {extra.get("max_steps", 1)}
prompts_per_step = 2
[checkpoint]
every = 1
[logging]
output_dir = "{tmp_path / 'run'}"
progress = false
plot = false
[rewards.fmt]
use = "xml_count"
""")
    return path


def one_line(capsys: pytest.CaptureFixture[str], code: int) -> str:
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and "internal error" not in err, err
    lines = [line for line in err.splitlines() if "adapter" in line and "model.adapter" in line]
    assert len(lines) == 1, err
    return lines[0]


def test_an_adapter_of_another_base_model_is_one_line(tmp_path: Path, models: dict[str, Path],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    config = run_config(tmp_path, models["wide"], models["adapter"])
    line = one_line(capsys, main(["train", str(config)]))
    assert f"{config}: model.adapter: {models['adapter']} does not fit {models['wide']}: it was trained on " \
           f"{models['small']} (size mismatch for " in line, line
    assert not (tmp_path / "run" / "metrics.jsonl").exists()


def test_an_adapter_with_truncated_weights_is_one_line_in_train_and_eval(
        tmp_path: Path, models: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    config = run_config(tmp_path, models["small"], models["truncated"])
    line = one_line(capsys, main(["train", str(config)]))
    assert f"{config}: model.adapter: {models['truncated'] / 'adapter_model.safetensors'}: the adapter's weights " \
           "cannot be read (" in line, line
    rewards = tmp_path / "r.toml"
    rewards.write_text('[rewards.fmt]\nuse = "xml_count"\n')
    for adapter, base, expected in ((models["truncated"], models["small"], "the adapter's weights cannot be read"),
                                    (models["adapter"], models["wide"], "does not fit")):
        code = main(["eval", str(adapter), "--base", str(base), "--data", str(tmp_path / "rows.jsonl"), "--rewards",
                     str(rewards), "--out", str(tmp_path / "eval.jsonl"), "--max-new-tokens", "2"])
        assert expected in one_line(capsys, code)
        assert not (tmp_path / "eval.jsonl").exists()


class ReadOnlyCheckpoints:
    """Makes ``checkpoints/`` a read-only bind mount of itself once the checkpoint of step 1 is written."""

    def __init__(self) -> None:
        self.mounted: Path | None = None

    @hookimpl
    def grpo_on_checkpoint(self, step: int, path: str) -> None:
        if step != 1:
            return
        folder = Path(path).parent
        for args in (["mount", "--bind", str(folder), str(folder)], ["mount", "-o", "remount,ro,bind", str(folder)]):
            subprocess.run(args, check=True, capture_output=True)
        self.mounted = folder


def test_a_checkpoint_folder_made_read_only_mid_run_is_one_line(tmp_path: Path, models: dict[str, Path]) -> None:
    from grpo_core.config import as_run_config
    from grpo_core.trainer import Trainer
    from grpo_rewards.plugins import load_registry

    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("a read-only folder for root needs a read-only bind mount (root and mount)")
    probe = tmp_path / "probe"
    probe.mkdir()
    if subprocess.run(["mount", "--bind", str(probe), str(probe)], capture_output=True).returncode != 0:
        pytest.skip("bind mounts are not allowed here")
    subprocess.run(["umount", str(probe)], check=False)
    plugin = ReadOnlyCheckpoints()
    config = run_config(tmp_path, models["small"], models["adapter"], max_steps=3)
    try:
        with pytest.raises(RunFolderError) as caught:
            Trainer(as_run_config(config), registry=load_registry(extra_plugins=[("ro", plugin)])).train()
    finally:
        if plugin.mounted is not None:
            subprocess.run(["umount", "-l", str(plugin.mounted)], check=False)
    message = str(caught.value)
    run = tmp_path / "run"
    assert "\n" not in message and "Read-only file system" in message and str(run / "checkpoints") in message
    assert f"the last good checkpoint, {run / 'checkpoints' / 'step-00000001'} (step 1), is intact" in message
    assert [c.step for c in list_checkpoints(run)] == [1]


def test_disabling_a_plugin_that_is_not_installed_is_said(monkeypatch: pytest.MonkeyPatch) -> None:
    from grpo_rewards.plugins import load_registry

    monkeypatch.setenv("GRPO_DISABLE_PLUGINS", "builtin_sandbox,no-such-plugin")
    registry = load_registry()
    said = [p for p in registry.problems if "GRPO_DISABLE_PLUGINS" in p]
    assert said == ["GRPO_DISABLE_PLUGINS names 'no-such-plugin', which is not an installed plugin or distribution: "
                    "nothing left out"]
    assert any("builtin_sandbox" in s for s in registry.skipped)  # the installed one is left out, unremarked


def test_a_broken_row_deep_in_a_streamed_file_is_one_line_when_the_run_reaches_it(tmp_path: Path) -> None:
    from grpo_core.config import DataConfig
    from grpo_core.data import DataError, train_eval_rows

    data = tmp_path / "big.jsonl"
    good = [json.dumps({"prompt": f"row {i} " + "x" * 1000, "answer": str(i)}) + "\n" for i in range(11_000)]
    data.write_text("".join(good) + '{"prompt": "broken", "answer": \n' + good[0])  # past datasets' first 10 MB
    rows, _ = train_eval_rows(DataConfig(source=str(data), streaming=True, shuffle=False))
    assert len(list(rows.head(1000))) == 1000  # what the checks before a run read is fine
    ids, epoch, position = rows.take(5000, 0, 0)
    assert (len(ids), epoch, position) == (5000, 0, 5000)
    with pytest.raises(DataError) as caught:
        rows.take(8000, epoch, position)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"data.source: {data} [train]: the row after row ")
    assert "of epoch 0 cannot be read (" in message


def test_a_reward_that_fails_every_call_stops_grpo_train_in_one_line(tmp_path: Path, models: dict[str, Path],
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "bad_reward.py").write_text("def always_fails(completions, **kwargs):\n    raise ValueError('boom')\n")
    config = run_config(tmp_path, models["small"], models["adapter"], max_steps=4)
    text = config.read_text().replace('use = "xml_count"', f'use = "{tmp_path / "bad_reward.py"}:always_fails"\n'
                                                         "max_consecutive_failures = 2")
    config.write_text(text)
    code = main(["train", str(config)])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and "internal error" not in err, err
    lines = [line for line in err.splitlines() if "failed 2 calls in a row" in line]
    assert len(lines) == 1 and lines[0].startswith(f"error: {config}: reward 'fmt' (plugin 'local "), err
    assert "raised ValueError: boom); fix the reward" in lines[0]
