"""A real short ``grpo train`` says only what concerns the run: no DeepSpeed accelerator line when the engine
is not DeepSpeed (transformers imports DeepSpeed to unwrap the model it saves), no bitsandbytes chatter
without 4-bit weights, no transformers FutureWarning raised inside peft; a reward's own warnings still show."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

RUN = """\
[model]
name_or_path = "{model}"
dtype = "float32"

[data]
source = "rows.jsonl"
prompt_field = "question"
chat_template = false

[generation]
num_generations = 2
max_completion_length = 4

[grpo]
prompts_per_step = 2
max_steps = 1

[lora]
enabled = true
r = 4

[logging]
output_dir = "out"
progress = false
plot = false

[checkpoint]
save_merged = true

[rewards.noisy]
use = "noisy_reward.py:noisy"
"""

REWARD = """\
import logging
import warnings


def noisy():
    '''Scores 0; warns as a reward author might, and logs as bitsandbytes does about its kernels.'''
    def score(completions, **kw):
        warnings.warn("noisy reward: a warning the user should see", UserWarning)
        logging.getLogger("noisy_reward").warning("noisy reward: a logged warning the user should see")
        logging.getLogger("bitsandbytes.cextension").warning("bitsandbytes: kernels chatter")
        return [0.0] * len(completions)
    return score
"""

DRIVER = """\
import atexit, sys
atexit.register(lambda: print("deepspeed imported:", "deepspeed" in sys.modules, file=sys.stderr))
from grpo_rewards.command_line import main
sys.exit(main(sys.argv[1:]))
"""


def test_a_short_run_prints_no_library_chatter_and_keeps_real_warnings(tiny_model_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "run.toml").write_text(RUN.format(model=tiny_model_dir))
    (tmp_path / "noisy_reward.py").write_text(REWARD)
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps({"question": f"{i}+{i}="}) + "\n" for i in range(4)))
    proc = subprocess.run([sys.executable, "-c", DRIVER, "train", "run.toml"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert (tmp_path / "out" / "merged" / "config.json").is_file()
    if importlib.util.find_spec("deepspeed") is not None:
        assert "deepspeed imported: True" in proc.stderr  # the merged save imported it: its line was due
    assert "Setting accelerator to" not in out, out
    assert "is deprecated and will be removed in v6" not in out, out  # peft's call, transformers' rename
    assert "kernels chatter" not in out, out
    assert "noisy reward: a warning the user should see" in proc.stderr
    assert "noisy reward: a logged warning the user should see" in proc.stderr


def test_the_comet_notice_shows_only_for_a_run_reporting_to_comet() -> None:
    """transformers' "comet_ml is installed but the Comet API Key is not configured" (printed when TRL's
    trainer starts) is dropped unless ``logging.report_to`` names comet_ml."""
    import logging
    from types import SimpleNamespace

    from grpo_core.quiet import quiet_libraries

    utils = pytest.importorskip("transformers.integrations.integration_utils")
    if getattr(utils, "_is_comet_configured", None) is not False:
        pytest.skip("needs comet_ml installed without an API key")
    logger = logging.getLogger("transformers.integrations.integration_utils")
    bnb = logging.getLogger("bitsandbytes")
    saved, bnb_level = list(logger.filters), bnb.level
    logger.filters[:] = []  # as a fresh process has it (an earlier in-process run may have quieted it)
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_warning()  # as a fresh process has it
    printed: list[str] = []
    # what transformers' own handler prints (its stream may be one an earlier test's capture left behind):
    # a handler of ours beside it, behind the same logger filters
    handler = logging.Handler()
    handler.emit = lambda record: printed.append(record.getMessage())  # type: ignore[method-assign]
    hf_logging.get_logger("transformers").addHandler(handler)

    def run(report_to: object) -> SimpleNamespace:
        return SimpleNamespace(distributed=SimpleNamespace(engine="ddp"), trainer=SimpleNamespace(backend="trl"),
                               quantization=SimpleNamespace(load_in_4bit=False),
                               logging=SimpleNamespace(report_to=report_to))

    def shown() -> str:
        text = "\n".join(printed)
        printed.clear()
        return text

    try:
        utils.is_comet_available()
        assert "comet_ml is installed" in shown()  # what a run printed
        quiet_libraries(run(["comet_ml"]))
        utils.is_comet_available()
        assert "comet_ml is installed" in shown()  # it concerns a run reporting to comet
        quiet_libraries(run("none"))
        utils.is_comet_available()
        logger.warning("another transformers warning")
        text = shown()
        assert "comet_ml is installed" not in text and "another transformers warning" in text
    finally:
        logger.filters[:] = saved
        bnb.setLevel(bnb_level)
        hf_logging.set_verbosity(verbosity)
        hf_logging.get_logger("transformers").removeHandler(handler)
