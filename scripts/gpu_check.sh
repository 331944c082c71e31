#!/usr/bin/env bash
# What CPU CI cannot run, on a machine with an NVIDIA GPU: one summary line per check (PASS/FAIL/SKIP and why).
#
#     bash scripts/gpu_check.sh            (about 15 minutes; PYTHON=... picks the interpreter)
#
# Checks (scripts/gpu_check.py): bf16 autocast, QLoRA through bitsandbytes, vLLM on CUDA colocated with sleep
# mode, the chunked log-prob path at 4,096 and 16,384 tokens against TRL's, DeepSpeed ZeRO-2 and FSDP2 on one
# GPU. Needs only torch, transformers, peft and accelerate (and this project on PYTHONPATH, set here):
# bitsandbytes, deepspeed, vllm and trl are installed from the wheels in scripts/gpu_wheels/ (or
# $GPU_CHECK_WHEELS) when that folder exists, offline (pip --no-index); a check whose package is missing says
# so in its SKIP line. Without a GPU every check is a SKIP line and the exit status is 0; otherwise it is 1
# when any check failed. Each check runs in its own process under $GPU_CHECK_TIMEOUT seconds (default 300).
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(dirname "$HERE")
PY=${PYTHON:-python3}
WHEELS=${GPU_CHECK_WHEELS:-$HERE/gpu_wheels}
LIMIT=${GPU_CHECK_TIMEOUT:-300}
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"
CHECKS=$("$PY" "$HERE/gpu_check.py" list 2>/dev/null) || {
    echo "FAIL gpu_check: $PY cannot run scripts/gpu_check.py (is torch installed?)"; exit 1; }

skip_all() {
    for c in $CHECKS; do echo "SKIP $c: $1"; done
    exit 0
}
command -v nvidia-smi >/dev/null 2>&1 || skip_all "no NVIDIA GPU here (nvidia-smi not found)"
nvidia-smi -L >/dev/null 2>&1 || skip_all "nvidia-smi lists no GPU"
"$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null \
    || skip_all "torch sees no CUDA device"

for pkg in bitsandbytes deepspeed vllm trl; do
    "$PY" -c "import $pkg" >/dev/null 2>&1 && continue
    if [ -d "$WHEELS" ]; then
        "$PY" -m pip install -q --no-index --find-links "$WHEELS" "$pkg" >/dev/null 2>&1 \
            || echo "note: $pkg: no installable wheel in $WHEELS (its checks will SKIP)" >&2
    fi
done

LOGS=$(mktemp -d -t gpu_check.XXXX)
failed=0
start=$(date +%s)
for c in $CHECKS; do
    timeout "$LIMIT" "$PY" "$HERE/gpu_check.py" "$c" >"$LOGS/$c.out" 2>"$LOGS/$c.err"
    rc=$?
    line=$(grep -E "^(PASS|FAIL|SKIP) $c: " "$LOGS/$c.out" | tail -1)
    if [ -z "$line" ]; then
        if [ "$rc" -eq 124 ]; then line="FAIL $c: timed out after ${LIMIT} s"
        else line="FAIL $c: exited $rc without a summary (log: $LOGS/$c.err)"; fi
    fi
    case $line in FAIL*) failed=1 ;; esac
    echo "$line"
done
echo "gpu_check: $(( $(date +%s) - start )) s; logs in $LOGS"
exit $failed
