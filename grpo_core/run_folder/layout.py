"""The run folder's layout: the name of every file and folder a run writes, and reading its JSONL records.

    RUN_DIR/
        metrics.jsonl    one JSON object per step (METRICS_FILE)
        samples.jsonl    the logged completions (SAMPLES_FILE)
        config.json      the resolved run config (CONFIG_FILE)
        curves.png       the curves of metrics.jsonl (CURVES_FILE)
        checkpoints/     step-N/ each (CHECKPOINTS)
        model/           the trained model (MODEL_DIR), merged/ with LoRA merged in (MERGED_DIR)
        .grpo-run.lock   held by the run writing the folder, one at a time (LOCK_FILE, grpo_core.run_folder.lock)

The modules of this folder (checkpoints, metrics, plotting) and the trainers name these through here only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from grpo_rewards.errors import UserError
from grpo_rewards.files import read_bytes, text_lines

METRICS_FILE = "metrics.jsonl"
SAMPLES_FILE = "samples.jsonl"
CONFIG_FILE = "config.json"
CURVES_FILE = "curves.png"
CHECKPOINTS = "checkpoints"
MODEL_DIR = "model"
MERGED_DIR = "merged"
RECORDS = (METRICS_FILE, SAMPLES_FILE)  # a run's records: non-empty means a run was there
TRACKERS_FILE = "trackers.json"  # the experiment trackers' run ids, so a resumed run continues the same runs
TENSORBOARD_DIR = "tensorboard"
REPLACED = (*RECORDS, CONFIG_FILE, CURVES_FILE, TRACKERS_FILE)  # what --overwrite removes, with the checkpoints
REPLACED_DIRS = (CHECKPOINTS, TENSORBOARD_DIR)  # (an earlier run's tensorboard events would mix into the new curves)
LOCK_FILE = ".grpo-run.lock"
# every name a run writes, replaces or removes: an input of the run may not live at one of them
WRITTEN = (*REPLACED, *REPLACED_DIRS, MODEL_DIR, MERGED_DIR, LOCK_FILE)


def read_jsonl(path: str | Path, problems: list[str] | None = None,
               numbers: list[int] | None = None) -> list[dict[str, Any]]:
    """Records (JSON objects) of a JSONL file. A torn last line (a run killed mid-write) is skipped quietly;
    any other line that is not a JSON object is skipped and described in ``problems`` when given. The line
    number of each record goes to ``numbers`` when given."""
    path = Path(path)
    if not path.exists():
        return []
    data = read_bytes(path, UserError)
    torn = not data.endswith(b"\n")
    lines = list(text_lines(data))
    records = []
    for number, line, undecodable in lines:
        why = undecodable
        if line is not None and line.strip():
            try:
                record = json.loads(line)
                why = "" if isinstance(record, dict) else f"not a JSON object ({type(record).__name__})"
            except (json.JSONDecodeError, RecursionError):
                why = "invalid JSON"
            if not why:
                records.append(record)
                if numbers is not None:
                    numbers.append(number)
        if why and problems is not None and not (torn and number == len(lines)):
            problems.append(f"{path}:{number}: {why}; line skipped")
    return records
