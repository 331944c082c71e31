"""examples/python_api.py (the Python API notebook) runs as a script on the CPU and trains its PeftModel."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("peft")
pytest.importorskip("datasets")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "python_api.py"


def test_python_api_example_runs(tmp_path: Path) -> None:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run([sys.executable, str(EXAMPLE), str(tmp_path)], capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["steps"] == 4
    assert set(summary["rewards"]) == {"rewards/answer_in_tags", "rewards/xml_count"}
    assert (Path(summary["adapter"]) / "adapter_config.json").is_file()
    assert len((tmp_path / "run" / "metrics.jsonl").read_text().splitlines()) == 4
