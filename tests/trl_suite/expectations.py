"""Which of TRL's GRPOTrainer tests are skipped here, and which are expected to fail against this project's
trainer, each with its reason (``docs/trl.md`` lists them). A test is named by its function name, or by its name
with the parameters (``test_train_loss_types[False-cispo]``); expected failures are strict."""

from __future__ import annotations

import pytest

SKIPPED_CLASSES = {
    "TestGRPOTrainerVLM": "vision-language models: this project trains text models only",
    "TestGRPOTrainerSlow": "needs a GPU and downloads real models",
}

# tests that count the steps of TRL's default run length: never capped (conftest's MAX_STEPS)
FULL_LENGTH = {"test_prepare_input_called_with_correct_data"}

# test name -> reason it fails against grpo_core.GRPOTrainer
EXPECTED_FAILURES: dict[str, str] = {}


def mark_for(name: str, cls: str, trainer: str) -> pytest.MarkDecorator | None:
    if cls in SKIPPED_CLASSES:
        return pytest.mark.skip(reason=SKIPPED_CLASSES[cls])
    if trainer != "ours":
        return None
    reason = EXPECTED_FAILURES.get(name) or EXPECTED_FAILURES.get(name.split("[")[0])
    return pytest.mark.xfail(reason=reason, strict=True) if reason else None
