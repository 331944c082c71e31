"""The trainer's commands: `grpo config validate`, `grpo train --dry-run` (memory estimate), `grpo train`
(end to end, --resume after SIGKILL, SIGINT), through the real `grpo` entry point."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from grpo_rewards.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_validate_reports_every_problem_and_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[model]\nname_or_path = "m"\n\n[data]\nsource = "hub/x"\n\n[grpo]\nbeta = -1\nlr = 3\n\n'
                   '[rewards.fmt]\nuse = "xml_cont"\n')
    assert main(["config", "validate", str(bad)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [f"{bad}:9: grpo.lr: unknown key",
                   f"{bad}:8: grpo.beta: must be >= 0, got -1.0",
                   f"{bad}:12: rewards.fmt.use: unknown reward 'xml_cont'; did you mean 'xml_count'?"]
    assert main(["config", "validate", str(bad), "--set", "grpo.beta=0", "--set", "grpo.lr",
                 "--set", "rewards.fmt.use=xml_count"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == ["--set grpo.lr: expected section.key=value", f"{bad}:9: grpo.lr: unknown key"]


def test_train_with_a_bad_config_loads_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", str(EXAMPLES / "gsm8k.toml"), "--set", "generation.num_generations=1"]) == 2
    assert "generation.num_generations: must be >= 2" in capsys.readouterr().err
    assert main(["train", str(EXAMPLES / "email.toml"), "--resume",
                 "--set", f"logging.output_dir={tmp_path / 'fresh'}"]) == 2
    assert "--resume: no checkpoint in" in capsys.readouterr().err


def test_dry_run_offline_hub_model_is_one_clear_line() -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-m", "grpo_rewards", "train", str(EXAMPLES / "gsm8k.toml"), "--dry-run"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 2, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith(
        "error: model.name_or_path: cannot fetch the config of 'Qwen/Qwen2.5-1.5B-Instruct' (offline, or no such model?)")
    assert "Traceback" not in proc.stderr


def test_dry_run_prints_the_memory_estimate_for_a_local_model(
    tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    memory_model = pytest.importorskip("grpo_core.memory_model")
    import grpo_core.models

    def no_loading(*a: Any, **k: Any) -> Any:
        raise AssertionError("--dry-run must not load the model")

    monkeypatch.setattr(grpo_core.models, "load_model_and_tokenizer", no_loading)
    argv = ["train", str(EXAMPLES / "gsm8k.toml"), "--dry-run", "--set", f"model.name_or_path={tiny_model_dir}"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    from transformers import AutoConfig

    expected = memory_model.estimate_peak_memory(
        AutoConfig.from_pretrained(tiny_model_dir), num_sequences=8, prompt_length=256, completion_length=200,
        dtype="bfloat16", lora_rank=64, quantization_4bit=True, gradient_checkpointing=True,
        offload_activations=False, chunk_size=1024, beta=0.0, num_iterations=1)
    assert out.strip() == expected.table().strip()
