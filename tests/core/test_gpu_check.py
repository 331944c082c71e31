"""scripts/gpu_check.sh off a GPU: every check a SKIP line naming why, exit 0; its Python parts parse their
arguments, and the log-prob comparison it runs on a GPU agrees on the CPU (fp32, small model).

Every trainer check of the lane (``gpu_check.CHECKS``, the list the script runs) is run here too: its run config
validated exactly as shipped, then trained on the CPU for its two steps with the learning-signal and setting
checks the GPU run makes, so that a check the trainer would refuse fails CI instead of the GPU machine. What
cannot run on a CPU is replaced in one place, :data:`CPU_EQUIVALENTS`."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
import gpu_check  # noqa: E402


def run_script(tmp_path: Path, fake_nvidia_smi: bool) -> subprocess.CompletedProcess[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    if fake_nvidia_smi:  # a driver that answers, with a torch that has no CUDA: the second gate
        (bin_dir / "nvidia-smi").write_text("#!/bin/sh\necho 'GPU 0: fake'\n")
        (bin_dir / "nvidia-smi").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:/usr/bin:/bin", "PYTHON": str(bin_dir / "python3")}
    return subprocess.run(["bash", str(REPO / "scripts" / "gpu_check.sh")], capture_output=True, text=True,
                          env=env, timeout=120)


@pytest.mark.parametrize("fake, reason", [(False, "no NVIDIA GPU here (nvidia-smi not found)"),
                                          (True, "torch sees no CUDA device")])
def test_without_a_gpu_every_check_is_skipped(tmp_path: Path, fake: bool, reason: str) -> None:
    proc = run_script(tmp_path, fake)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [f"SKIP {c}: {reason}" for c in gpu_check.NAMES]


def test_the_session_script_keeps_the_lane_and_the_benchmark_output(tmp_path: Path) -> None:
    """``gpu_session.sh`` off a GPU: the lane's SKIP lines and the benchmark's refusal each land in their file under
    ``$OUT``, and the exit status is the benchmark's (the lane passed)."""
    out = tmp_path / "out"
    env = {**os.environ, "OUT": str(out), "PYTHON": sys.executable, "PATH": "/usr/bin:/bin",
           "GPU_CHECK_SITE": str(tmp_path / "site")}
    proc = subprocess.run(["bash", str(REPO / "scripts" / "gpu_session.sh")], capture_output=True, text=True,
                          env=env, timeout=300)
    lane = (out / "gpu_check.txt").read_text().splitlines()
    assert lane == [f"SKIP {c}: no NVIDIA GPU here (nvidia-smi not found)" for c in gpu_check.NAMES]
    assert "torch sees no CUDA device" in (out / "gpu_vs_trl.txt").read_text()
    assert proc.returncode == 2 and "lane exit 0, benchmark exit 2" in proc.stdout, proc.stdout + proc.stderr


def test_one_check_off_a_gpu_prints_one_skip_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert gpu_check.main(["qlora"]) == 0
    assert capsys.readouterr().out == "SKIP qlora: torch sees no CUDA device\n"


def test_help_describes_every_check(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        gpu_check.parse_args(["--help"])
    described = [ln.split()[0] for ln in capsys.readouterr().out.split("checks:\n")[1].splitlines()]
    assert described == list(gpu_check.NAMES)


def test_an_unknown_check_is_refused() -> None:
    with pytest.raises(SystemExit) as exc:
        gpu_check.parse_args(["fsdp3"])
    assert exc.value.code == 2


def test_the_log_prob_comparison_agrees_on_the_cpu(tmp_path: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    from grpo_core.policy.logprobs import completion_logprobs

    path = gpu_check.build_model(tmp_path / "m", vocab=3000, hidden=64)
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    ids = torch.randint(2, 3000, (2, 90), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    with torch.no_grad():
        ours, _ = completion_logprobs(model, ids, mask, 64, chunk_size=16)
        theirs, how = gpu_check.trl_logps(model, ids, mask, 64)
    assert how == "trl.selective_log_softmax"
    torch.testing.assert_close(ours, theirs, rtol=0, atol=1e-4)


# ------------------------------------------------------------------------ every check's run config, on the CPU ---


def _sampling_here(config: dict[str, Any]) -> dict[str, Any]:
    """The colocated vLLM engine needs CUDA: the policy samples itself (``backend = "transformers"``), the
    engine's keys dropped; the update, the rewards and everything else run as configured."""
    out = copy.deepcopy(config)
    out["generation"] = {k: v for k, v in out["generation"].items() if not k.startswith("vllm_")}
    out["generation"]["backend"] = "transformers"
    return out


# The CUDA-only settings of the lane and what the CPU run puts in their place (the one such place): check name ->
# (the package it no longer needs, the run config made runnable here). Every other check trains unchanged;
# multi-rank checks run as gloo processes (``[distributed] backend = "auto"`` is gloo without CUDA).
CPU_EQUIVALENTS: dict[str, tuple[str, Callable[[dict[str, Any]], dict[str, Any]]]] = {
    "vllm_colocate_sleep": ("vllm", _sampling_here),
}
TRAINER_CHECKS = [c for c in gpu_check.CHECKS if c.trains]


def test_the_script_lists_the_checks_this_test_enumerates() -> None:
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "gpu_check.py"), "list"], capture_output=True,
                          text=True, timeout=60)
    assert proc.stdout.split() == [c.name for c in gpu_check.CHECKS]
    assert set(CPU_EQUIVALENTS) <= {c.name for c in TRAINER_CHECKS}
    assert {"bf16_autocast", "bf16_lora", "qlora", "deepspeed_zero2", "fsdp2"} <= {c.name for c in TRAINER_CHECKS}
    documented = (REPO / "docs" / "gpu.md").read_text()
    assert [c.name for c in gpu_check.CHECKS if f"`{c.name}`" not in documented] == []


@pytest.mark.parametrize("check", TRAINER_CHECKS, ids=lambda c: c.name)
def test_each_trainer_check_config_validates_as_shipped(check: Any, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The schema, every cross-key and backend check, on the config exactly as the GPU run gets it (vLLM's
    presence assumed: whether it is installed is the machine's, not the config's)."""
    from grpo_core.config import config_from_dict
    from grpo_core.generation.vllm import support

    monkeypatch.setattr(support, "vllm_available", lambda: True)
    cfg = config_from_dict(gpu_check.run_config(check, tmp_path))
    assert cfg.grpo.max_steps == 2 and cfg.generation.num_generations >= 4


@pytest.mark.slow
@pytest.mark.parametrize("check", TRAINER_CHECKS, ids=lambda c: c.name)
def test_each_trainer_check_trains_on_the_cpu(check: Any, tmp_path: Path) -> None:
    """Two steps through the real trainer, refused settings and all: the learning signal is asserted (rewards
    varying within groups, non-zero advantages and gradients), and the check's own verification where the
    setting itself runs here."""
    replaced, equivalent = CPU_EQUIVALENTS.get(check.name, ("", None))
    for module in check.needs:
        if module != replaced:
            pytest.importorskip(module)
    config = gpu_check.run_config(check, tmp_path)
    if equivalent is not None:
        _, steps = gpu_check.train(equivalent(config))
        summary = gpu_check.learning_signal(steps)
    elif check.processes > 1:
        summary = gpu_check.launch(check, config, tmp_path)
    else:
        summary = gpu_check.trained(check, config)
    assert "rewards varied" in summary


PLANNED_FOR_A_GPU = ["bf16_autocast", "bf16_lora", "planned_step"]


@pytest.mark.slow
@pytest.mark.parametrize("name", PLANNED_FOR_A_GPU)
def test_the_checks_train_as_planned_for_a_gpu(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same checks with the plan a GPU gets (a simulated CUDA device: no checkpointing, the head's CUDA tiles,
    bf16 autocast for the bf16 checkpoint and for LoRA on it, peft's input casts off), run for real under CPU
    autocast: what only ran on a GPU before, the trainer's load checks included."""
    import torch

    import grpo_core.trainer as trainer_module
    from grpo_core.policy import step_plan as sp

    monkeypatch.setattr(trainer_module, "describe_device", lambda device: sp.DeviceInfo(
        "cuda", "simulated", 80 * 2**30, 70 * 2**30, frozenset({"flash", "mem_efficient"})))
    check = next(c for c in gpu_check.CHECKS if c.name == name)
    config = gpu_check.run_config(check, tmp_path)
    trainer, steps = gpu_check.train(config)
    assert check.verify is not None and check.verify(trainer, steps[-1])
    plan = trainer.step_plan
    assert plan.device.type == "cuda" and plan.autocast_dtype == "bfloat16"
    assert plan.logprob_chunk_size == sp.CUDA_LOGPROB_CHUNK
    # the lane sets checkpointing where it tests it; where it is left to the planner, the update fits without it
    assert plan.gradient_checkpointing == config["model"].get("gradient_checkpointing", False)
    from grpo_core.policy.models import compute_dtype

    assert compute_dtype(trainer.model) == torch.bfloat16  # the forwards ran under CPU autocast


def test_a_run_that_learned_nothing_is_refused() -> None:
    step = {"step": 1, "reward/std": 0.3, "advantages/abs_max": 1.2, "grad_norm": 0.5, "loss": 0.0}
    assert gpu_check.learning_signal([step]).startswith("rewards varied (std 0.3)")
    for key in ("reward/std", "advantages/abs_max", "grad_norm"):
        with pytest.raises(AssertionError, match="learned nothing"):
            gpu_check.learning_signal([step, {**step, key: 0.0}])
    with pytest.raises(AssertionError, match="non-finite"):
        gpu_check.learning_signal([{**step, "grad_norm": float("nan")}])


def test_the_wheel_folder_installs_offline_into_a_site_folder(tmp_path: Path) -> None:
    """``gpu_wheels.sh --install`` (what gpu_check.sh runs on the GPU machine): every wheel of the folder into the
    site folder with pip --no-index, importable from there."""
    import tarfile
    import zipfile

    wheels, site = tmp_path / "whl", tmp_path / "site"
    wheels.mkdir()
    info = "lane_probe-1.0.dist-info"
    files = {"lane_probe/__init__.py": "CARRIED = True\n",
             f"{info}/METADATA": "Metadata-Version: 2.1\nName: lane-probe\nVersion: 1.0\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    with zipfile.ZipFile(wheels / "lane_probe-1.0-py3-none-any.whl", "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
        z.writestr(f"{info}/RECORD", "".join(f"{n},,\n" for n in [*files, f"{info}/RECORD"]))
    # a build tool carried in build-tools/ and a source distribution whose build imports it: the build sees the
    # tools (as deepspeed's build gets the carried setuptools), the site folder does not get them
    (wheels / "build-tools").mkdir()
    tool_info = "build_probe-1.0.dist-info"
    tool_files = {"build_probe.py": "BUILT_WITH = 'carried'\n",
                  f"{tool_info}/METADATA": "Metadata-Version: 2.1\nName: build-probe\nVersion: 1.0\n",
                  f"{tool_info}/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    with zipfile.ZipFile(wheels / "build-tools" / "build_probe-1.0-py3-none-any.whl", "w") as z:
        for name, text in tool_files.items():
            z.writestr(name, text)
        z.writestr(f"{tool_info}/RECORD", "".join(f"{n},,\n" for n in [*tool_files, f"{tool_info}/RECORD"]))
    source = tmp_path / "sdist_probe-1.0"
    (source / "sdist_probe").mkdir(parents=True)
    (source / "sdist_probe" / "__init__.py").write_text("BUILT = True\n")
    (source / "setup.py").write_text("import build_probe  # only the carried build tools have it\n"
                                     "from setuptools import setup\n"
                                     "setup(name='sdist-probe', version='1.0', packages=['sdist_probe'])\n")
    (source / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: sdist-probe\nVersion: 1.0\n")
    with tarfile.open(wheels / "sdist_probe-1.0.tar.gz", "w:gz") as tar:
        tar.add(source, arcname=source.name)
    env = {**os.environ, "GPU_WHEELS": str(wheels), "PYTHON": sys.executable, "PIP_NO_INDEX": "1"}
    proc = subprocess.run(["bash", str(REPO / "scripts" / "gpu_wheels.sh"), "--install", str(site)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0 and "did not build" not in proc.stderr, proc.stderr
    probe = subprocess.run([sys.executable, "-c", "import lane_probe, sdist_probe; print(lane_probe.__file__, "
                            "lane_probe.CARRIED, sdist_probe.BUILT)"],
                           capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(site)}, timeout=60)
    assert probe.stdout.split() == [str(site / "lane_probe" / "__init__.py"), "True", "True"], probe.stderr
    assert not (site / "build_probe.py").exists()
    empty = subprocess.run(["bash", str(REPO / "scripts" / "gpu_wheels.sh"), "--install", str(site)],
                           capture_output=True, text=True, env={**env, "GPU_WHEELS": str(tmp_path / "none")})
    assert empty.returncode == 1 and "no wheel in" in empty.stderr
