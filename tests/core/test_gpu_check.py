"""scripts/gpu_check.sh off a GPU: every check a SKIP line naming why, exit 0; its Python parts parse their
arguments, and the log-prob comparison it runs on a GPU agrees on the CPU (fp32, small model)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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
    assert proc.stdout.splitlines() == [f"SKIP {c}: {reason}" for c in gpu_check.CHECKS]


def test_one_check_off_a_gpu_prints_one_skip_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert gpu_check.main(["qlora"]) == 0
    assert capsys.readouterr().out == "SKIP qlora: torch sees no CUDA device\n"


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
