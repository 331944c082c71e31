"""The trainer's commands: `grpo config validate`, `grpo train --dry-run` (memory estimate), `grpo train`
end to end through the real `grpo` command line in fresh processes: a run stopped by SIGINT (clean exit +
checkpoint) and then by SIGKILL, resumed each time with --resume, ends with the same step count and the
same metrics as a run never stopped. The signals are sent by the process to itself from a
grpo_on_step_end hook at a fixed step, so the test is exact and not timing-dependent."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from grpo_rewards.command_line import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_validate_reports_every_problem_and_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[model]\nname_or_path = "m"\n\n[data]\nsource = "hub/x"\n\n[grpo]\nbeta = -1\nlr = 3\n\n'
                   '[rewards.fmt]\nuse = "xml_cont"\n')
    assert main(["config", "validate", str(bad)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [f"{bad}:8: grpo.beta: must be >= 0, got -1.0",
                   f"{bad}:9: grpo.lr: unknown key",
                   f"{bad}:12: rewards.fmt.use: unknown reward 'xml_cont'; did you mean 'xml_count'?"]
    assert main(["config", "validate", str(bad), "--set", "grpo.beta=0", "--set", "grpo.lr",
                 "--set", "rewards.fmt.use=xml_count"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [f"{bad}:9: grpo.lr: unknown key", "--set grpo.lr: expected section.key=value"]


def test_train_with_a_bad_config_loads_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", str(EXAMPLES / "gsm8k.toml"), "--set", "generation.num_generations=1"]) == 2
    assert "generation.num_generations: must be >= 2" in capsys.readouterr().err
    assert main(["train", str(EXAMPLES / "email.toml"), "--resume",
                 "--set", f"logging.output_dir={tmp_path / 'fresh'}"]) == 2
    assert "--resume: no checkpoint in" in capsys.readouterr().err


def test_resume_from_another_models_checkpoint_is_one_clear_line(
    tiny_model_dir: Path, tmp_path: Path, use_core_registry: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    import torch

    from grpo_core.run_folder.checkpoints import save_checkpoint

    other = torch.nn.Linear(4, 4)
    save_checkpoint(tmp_path / "run", 2, model=other, optimizer=torch.optim.SGD(other.parameters(), lr=0.1), state={})
    (tmp_path / "rows.jsonl").write_text('{"prompt": "1+1="}\n')
    (tmp_path / "run.toml").write_text(CONFIG.format(model=tiny_model_dir, rows=tmp_path / "rows.jsonl")
                                       .replace('prompt_field = "question"', 'prompt_field = "prompt"'))
    argv = ["train", str(tmp_path / "run.toml"), "--resume", "--set", f"logging.output_dir={tmp_path / 'run'}"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(f"error: --resume: {tmp_path / 'run' / 'checkpoints' / 'step-00000002'}: checkpoint does "
                          "not match the model's trainable parameters")


@pytest.mark.parametrize("env, why", [
    ({"HF_HUB_OFFLINE": "1"}, "and the hub is switched off (HF_HUB_OFFLINE)"),
    ({"HF_ENDPOINT": "http://127.0.0.1:9"}, "and the hub cannot be reached (offline?)"),  # nothing listens there
])
@pytest.mark.parametrize("dry_run", [True, False])
def test_a_model_that_cannot_be_fetched_fails_at_once(env: dict[str, str], why: str, dry_run: bool,
                                                        tmp_path: Path) -> None:
    import time

    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), **env}  # an empty cache
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "grpo_rewards", "train", str(EXAMPLES / "gsm8k.toml"),
                           "--set", f"logging.output_dir={tmp_path / 'run'}", *(["--dry-run"] if dry_run else [])],
                          capture_output=True, text=True, env=env, timeout=120)
    elapsed = time.perf_counter() - start
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines()[-1] == (f"{EXAMPLES / 'gsm8k.toml'}: model.name_or_path: 'Qwen/Qwen2.5-1.5B-Instruct'"
                                            f" is not a local folder and not in the Hugging Face cache, {why}")
    assert "Traceback" not in proc.stderr and elapsed < 20, elapsed  # the hub's retries took 30 s and more
    assert not (tmp_path / "run").exists()


def test_dry_run_prints_the_memory_estimate_for_a_local_model(
    tiny_model_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    memory_model = pytest.importorskip("grpo_core.policy.memory_model")
    import grpo_core.policy.models

    def no_loading(*a: Any, **k: Any) -> Any:
        raise AssertionError("--dry-run must not load the model")

    monkeypatch.setattr(grpo_core.policy.models, "load_model_and_tokenizer", no_loading)
    import grpo_core.cli.checks

    monkeypatch.setattr(grpo_core.cli.checks, "_hub_reachable", lambda: True)  # gsm8k.toml's hub dataset: online
    argv = ["train", str(EXAMPLES / "gsm8k.toml"), "--dry-run", "--set", f"model.name_or_path={tiny_model_dir}"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    from transformers import AutoConfig

    expected = memory_model.estimate_peak_memory(
        AutoConfig.from_pretrained(tiny_model_dir), num_sequences=8, prompt_length=256, completion_length=200,
        dtype="bfloat16", lora_rank=64, quantization_4bit=True, gradient_checkpointing=True,
        offload_activations=False, chunk_size=1024, beta=0.0, num_iterations=1, micro_batch_tokens=4096)
    table, plan = out.strip().split("\nstep plan on ")
    assert table == expected.table().strip()
    # the plan the estimate is of: this CPU's defaults, none of them set by gsm8k.toml
    assert plan.startswith(f"cpu ({os.uname().machine}): estimated peak {expected.peak / 2**30:.3f} GiB, budget none")
    assert "grpo.micro_batch_tokens       4096" in plan and "model.gradient_checkpointing  true" in plan

PLUGIN = '''
import os, signal
from grpo_rewards import hookimpl
from grpo_rewards.specs import RewardSpec

def core_len(scale: float = 0.01):
    def fn(completions, **_):
        return [-scale * len(str(c)) + (0.5 if "a" in str(c) else 0.0) for c in completions]
    return fn

class Plugin:
    @hookimpl
    def grpo_register_rewards(self, register):
        register(RewardSpec("core_len", core_len))

    @hookimpl
    def grpo_on_step_end(self, trainer, step, metrics):
        at_step, name = os.environ.get("STOP_AT", "0:SIGINT").split(":")
        if step == int(at_step):
            os.kill(os.getpid(), getattr(signal, name))
'''

RUNNER = '''
import sys
sys.path.insert(0, sys.argv[1])
import grpo_rewards.plugins as plugins
from stop_plugin import Plugin
plugins._default = plugins.load_registry(extra_plugins=[("stop_plugin", Plugin())])
from grpo_rewards.command_line import main
raise SystemExit(main(sys.argv[2:]))
'''

CONFIG = """\
[model]
name_or_path = "{model}"
dtype = "float32"
gradient_checkpointing = false

[data]
source = "{rows}"
prompt_field = "question"
chat_template = false

[generation]
num_generations = 4
max_completion_length = 8

[grpo]
learning_rate = 5e-2
prompts_per_step = 2
gradient_accumulation_steps = 2
max_steps = 6
num_iterations = 2
beta = 0.04
lr_scheduler = "cosine"
warmup_ratio = 0.2

[lora]
enabled = true
r = 4

[logging]
progress = false
sample_every = 2
num_samples = 2
plot = false

[checkpoint]
every = 2
keep_last = 2

[rewards.short]
use = "core_len"
"""
TIMING = {"time", "step_time", "tokens_per_s", "peak_memory_gb"}


def grpo_cmd(tmp_path: Path, out: Path, *args: str, stop_at: str = "0:SIGINT") -> tuple[list[str], dict[str, str]]:
    env = {**os.environ, "STOP_AT": stop_at, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, str(tmp_path / "runner.py"), str(tmp_path), "train", str(tmp_path / "run.toml"),
           "--set", f"logging.output_dir={out}", *args]
    return cmd, env


def grpo(tmp_path: Path, out: Path, *args: str, stop_at: str = "0:SIGINT") -> subprocess.CompletedProcess[str]:
    cmd, env = grpo_cmd(tmp_path, out, *args, stop_at=stop_at)
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)


def metrics(run: Path) -> list[dict]:
    """metrics.jsonl without the wall-clock measurements."""
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(line).items() if k not in TIMING} for line in lines]


@pytest.mark.slow
def test_sigint_then_sigkill_then_resume_matches_uninterrupted(tiny_model_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "stop_plugin.py").write_text(textwrap.dedent(PLUGIN))
    (tmp_path / "runner.py").write_text(textwrap.dedent(RUNNER))
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"question": f"What is {i} plus {i}?", "answer": str(2 * i)}) + "\n"
                            for i in range(5)))
    (tmp_path / "run.toml").write_text(CONFIG.format(model=tiny_model_dir, rows=rows))

    cmd, env = grpo_cmd(tmp_path, tmp_path / "full")  # the uninterrupted run, beside the stopped one
    with subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) as full:
        run = tmp_path / "stopped"
        first = grpo(tmp_path, run, stop_at="3:SIGINT")  # Ctrl-C during step 3: finish it, checkpoint, exit
        full_err = full.communicate(timeout=300)[1]
    assert full.returncode == 0, full_err[-3000:]
    expected = metrics(tmp_path / "full")
    assert [m["step"] for m in expected] == [1, 2, 3, 4, 5, 6]
    assert len({m["loss"] for m in expected}) > 1 and len({m["reward/mean"] for m in expected}) > 1

    assert first.returncode == 130, first.stderr[-3000:]
    assert "Traceback" not in first.stderr
    assert [c.name for c in sorted((run / "checkpoints").iterdir())] == ["step-00000002", "step-00000003"]
    assert metrics(run) == expected[:3]

    second = grpo(tmp_path, run, "--resume", stop_at="5:SIGKILL")  # killed hard after step 5 was logged
    assert second.returncode == -signal.SIGKILL, second.stderr[-3000:]
    assert [m["step"] for m in metrics(run)] == [1, 2, 3, 4, 5]  # step 5 logged but never checkpointed

    third = grpo(tmp_path, run, "--resume")  # from step 4's checkpoint
    assert third.returncode == 0, third.stderr[-3000:]
    assert metrics(run) == expected  # same steps, same numbers (exactly)
    samples = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    full_samples = [json.loads(line) for line in (tmp_path / "full" / "samples.jsonl").read_text().splitlines()]
    assert samples == full_samples and [s["step"] for s in samples] == [2, 2, 4, 4, 6, 6]
    assert (run / "model" / "adapter_config.json").exists()


def test_a_finished_run_is_never_overwritten_unless_asked(
    tiny_model_dir: Path, tmp_path: Path, use_core_registry: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"question": f"What is {i} plus {i}?"}) + "\n" for i in range(4)))
    (tmp_path / "run.toml").write_text(CONFIG.format(model=tiny_model_dir, rows=rows)
                                       .replace("max_steps = 6", "max_steps = 2").replace("\nevery = 2", "\nevery = 0"))
    out = tmp_path / "run"
    argv = ["train", str(tmp_path / "run.toml"), "--set", f"logging.output_dir={out}"]
    assert main(argv) == 0
    records = {name: (out / name).read_bytes() for name in ("metrics.jsonl", "samples.jsonl", "config.json")}
    assert len(records["metrics.jsonl"].splitlines()) == 2
    capsys.readouterr()

    assert main(argv) == 2  # run again by mistake: refused before the model loads, nothing touched
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == (f"{tmp_path / 'run.toml'}: logging.output_dir: {out} holds an earlier run (checkpoint at step 2, "
                   "metrics.jsonl, samples.jsonl): continue it with --resume, replace it with --overwrite, or set "
                   "another logging.output_dir")
    assert {name: (out / name).read_bytes() for name in records} == records

    (out / "checkpoints" / "step-00000009").mkdir()  # an older, longer run's checkpoint must not survive
    assert main([*argv, "--overwrite"]) == 0
    assert [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()] == [1, 2]
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["step-00000002"]
