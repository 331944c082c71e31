#!/usr/bin/env bash
# What CPU CI cannot run, on a machine with an NVIDIA GPU: one summary line per check (PASS/FAIL/SKIP and why).
#
#     bash scripts/gpu_check.sh            (PYTHON=... picks the interpreter; meant to finish within 8 minutes)
#
# The checks are the table CHECKS in scripts/gpu_check.py (tests/core/test_gpu_check.py trains every trainer
# check's run config on the CPU, so the list cannot drift from the config schema): bf16 autocast, bf16 + LoRA,
# QLoRA through bitsandbytes, vLLM colocated with sleep mode, the step planner within a budget, the chunked
# log-prob head at 4,096 and 16,384 tokens against TRL's, DeepSpeed ZeRO-2 in one process, FSDP2 over two ranks (two GPUs).
#
# Offline: a GPU machine that reaches no registry gets its packages from the wheel folder scripts/gpu_wheels.sh
# fills where pip works ($REPO/.whl, or $GPU_WHEELS): when it holds files they are installed here with
# pip --no-index --no-deps --target $GPU_CHECK_SITE (default /tmp/gpu_check_site, put on PYTHONPATH after the
# checkout), deepspeed built from its source with DS_BUILD_OPS=0. Nothing else is installed. vLLM is not carried
# (its CUDA wheel is far over the 64 MiB the folder may hold): where it is not installed, the vLLM check is a
# SKIP line and vLLM on CUDA stays unverified by this lane. A check whose package is missing says so in its SKIP
# line. Without a GPU every check is a SKIP line and the exit status is 0 (nothing is installed); otherwise it
# is 1 when any check failed or the lane took over $GPU_CHECK_BUDGET seconds (default 480). Each check runs in
# its own process under $GPU_CHECK_TIMEOUT seconds (default 240). $GPU_CHECK_ARCHIVE names a .tar.gz that gets
# every check's stdout and stderr at the end (one file to bring back from a lent machine).
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(dirname "$HERE")
PY=${PYTHON:-python3}
WHEELS=${GPU_WHEELS:-$REPO/.whl}
SITE=${GPU_CHECK_SITE:-/tmp/gpu_check_site}
LIMIT=${GPU_CHECK_TIMEOUT:-240}
BUDGET=${GPU_CHECK_BUDGET:-480}  # seconds for the whole lane, installation included: over it is a FAIL line
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

start=$(date +%s)
if compgen -G "$WHEELS/*.whl" >/dev/null; then
    GPU_WHEELS="$WHEELS" PYTHON="$PY" bash "$HERE/gpu_wheels.sh" --install "$SITE" >&2 \
        || { echo "FAIL gpu_check: the packages in $WHEELS do not install"; exit 1; }
    export PYTHONPATH="$REPO:$SITE${PYTHONPATH#"$REPO"}"
    echo "gpu_check: installed $WHEELS into $SITE in $(( $(date +%s) - start )) s" >&2
else
    echo "note: no wheel folder at $WHEELS (bash scripts/gpu_wheels.sh fills one): what is installed is used" >&2
fi

LOGS=$(mktemp -d -t gpu_check.XXXX)
failed=0
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
took=$(( $(date +%s) - start ))
if [ "$took" -gt "$BUDGET" ]; then
    echo "FAIL gpu_check: the lane took $took s, over its budget of $BUDGET s"; failed=1
fi
echo "gpu_check: $took s; logs in $LOGS"
if [ -n "${GPU_CHECK_ARCHIVE:-}" ]; then
    tar -czf "$GPU_CHECK_ARCHIVE" -C "$LOGS" . && echo "gpu_check: logs archived in $GPU_CHECK_ARCHIVE" >&2
fi
exit $failed
