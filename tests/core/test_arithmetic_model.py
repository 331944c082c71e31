"""The shared tiny model of the trainer tests (tests/core/conftest.py) stands for the copies the tests used to
build from 40, 50, 60 or 100 arithmetic rows: the files built from any of those row counts are the same bytes."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")


def digest(folder: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(p for p in folder.iterdir() if p.is_file()):
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def test_arithmetic_model_is_the_same_for_any_row_count(tmp_path: Path, arithmetic_model_dir: Path) -> None:
    from grpo_core.demo.task import completion, make_split
    from grpo_core.demo.tiny import TinySpec, build_tiny_model

    for size in (50, 60, 100):
        rows = make_split("train", max_operand=9, size=size)
        out = build_tiny_model(tmp_path / str(size), [r["prompt"] + completion(r) for r in rows],
                               TinySpec(hidden=32, intermediate=64))
        assert digest(out) == digest(arithmetic_model_dir), size
