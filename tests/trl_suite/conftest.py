"""TRL's own GRPOTrainer tests (``test_grpo_trainer.py``, vendored) run offline against this project's trainer.

- The Hub repos the tests name (``trl-internal-testing/tiny-*``) are stand-ins built by ``standins.py`` into a
  Hub cache, and the Hub is put offline, so every ``from_pretrained`` (the tests', TRL's, ours) loads them.
- ``load_dataset("trl-internal-testing/zen", ...)`` in the test module reads the zen dataset rebuilt by TRL's own
  script (``streaming=True`` gives its iterable form).
- The test module imports ``GRPOTrainer`` from ``grpo_core`` (the one line a user changes). With
  ``TRL_SUITE_TRAINER=trl`` in the environment it runs against ``trl.GRPOTrainer`` instead: the reference count
  (how many TRL itself passes offline) that ``docs/trl.md`` reports beside ours.
- Without a GPU, every ``GRPOConfig`` has ``use_cpu=True`` (TRL's ``bf16=True`` default needs it there).
- A run that leaves its length to ``num_train_epochs`` stops after 2 optimizer steps
  (``TRL_SUITE_MAX_STEPS``; 0 runs the tests' own length), for the lane to fit CI; the tests that count
  steps (``expectations.FULL_LENGTH``) run their own length.
- ``expectations.py`` says which tests are skipped here (vision, vLLM server, ...) and which are expected to fail
  against this trainer, each with its reason; an expected failure is strict, so one that starts passing is
  noticed.

The stand-ins are built once per fingerprint of their sources (a few seconds) into ``$TRL_SUITE_CACHE`` (default
``~/.cache/grpo-toolkit/trl-suite``).
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from transformers import TrainingArguments

from tests.trl_suite import expectations, standins

TRAINER = os.environ.get("TRL_SUITE_TRAINER", "ours")
MAX_STEPS = int(os.environ.get("TRL_SUITE_MAX_STEPS", "2"))


def _cache_root() -> Path:
    base = Path(os.environ.get("TRL_SUITE_CACHE", Path.home() / ".cache" / "grpo-toolkit" / "trl-suite"))
    root = base / standins.fingerprint()
    if not (root / "complete.json").exists():
        tmp = base / f".{root.name}.{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        standins.build_all(tmp)
        try:
            tmp.rename(root)
        except OSError:  # another process finished first
            shutil.rmtree(tmp, ignore_errors=True)
    return root


@pytest.fixture(scope="session")
def trl_standins() -> Path:
    return _cache_root()


@pytest.fixture(autouse=True)
def offline_hub(trl_standins: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    """Every Hub lookup answered from the stand-ins' cache, never the network; the test module's
    ``load_dataset`` reads the rebuilt zen dataset."""
    import huggingface_hub.constants as hub_constants

    hub = str(trl_standins / "hub")
    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", hub)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", hub)
    module = request.module
    if hasattr(module, "load_dataset"):
        monkeypatch.setattr(module, "load_dataset", _zen_loader(trl_standins / "zen", module.load_dataset))
    if TRAINER == "trl":
        import trl

        monkeypatch.setattr(module, "GRPOTrainer", trl.GRPOTrainer)
    import torch

    cap = 0 if request.node.name in expectations.FULL_LENGTH else MAX_STEPS
    monkeypatch.setattr(TrainingArguments, "__post_init__", _ci_args(TrainingArguments.__post_init__,
                                                                     not torch.cuda.is_available(), cap))


def _ci_args(post_init: Any, cpu: bool, max_steps: int) -> Any:
    """``TrainingArguments.__post_init__`` as this lane runs it: ``use_cpu=True`` without a GPU (TRL's
    ``bf16=True`` default is refused by transformers on a machine without a bf16 GPU unless ``use_cpu`` is set;
    TRL runs these tests on GPUs), and a run left to ``num_train_epochs`` capped at ``max_steps`` optimizer
    steps (TRL's default, 3 epochs of the 17 zen rows one prompt a step, is 51 steps a test)."""

    def __post_init__(self: Any) -> None:
        if cpu:
            self.use_cpu = True
        if max_steps > 0 and self.max_steps == -1:
            self.max_steps = max_steps
        post_init(self)

    return __post_init__


def _zen_loader(zen: Path, original: Any) -> Any:
    def load_dataset(path: str, name: str | None = None, split: str | None = None, streaming: bool = False,
                     **kwargs: Any) -> Any:
        if path != f"{standins.ORG}/zen":
            return original(path, name, split=split, streaming=streaming, **kwargs)
        from datasets import IterableDatasetDict, load_from_disk

        data = load_from_disk(str(zen / (name or "default")))
        if streaming:
            data = IterableDatasetDict({k: v.to_iterable_dataset() for k, v in data.items()})
        return data if split is None else data[split]

    return load_dataset


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if Path(str(item.fspath)).parent != here:
            continue
        item.add_marker(pytest.mark.slow)  # each trains a tiny model: not in the quick lane (-m "not slow")
        mark = expectations.mark_for(item.name, item.cls.__name__ if item.cls else "", TRAINER)
        if mark is not None:
            item.add_marker(mark)


for _name in ("transformers.modeling_utils", "transformers.modeling_layers", "transformers.integrations.peft"):
    logging.getLogger(_name).addFilter(lambda record: "LOAD REPORT" not in record.getMessage())
