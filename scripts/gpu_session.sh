#!/usr/bin/env bash
# One call on a lent GPU machine: the lane, then the first rows of the benchmark against TRL, each output kept.
#
#     bash scripts/gpu_wheels.sh                        (here, where pip reaches PyPI: fills .whl/)
#     OUT=DIR bash scripts/gpu_session.sh               (there, the checkout carried with .whl/)
#
# Writes $OUT/gpu_check.txt (the lane's PASS/FAIL/SKIP lines), $OUT/gpu_check_logs.tar.gz (every check's
# output) and $OUT/gpu_vs_trl.txt (the benchmark's table, plan and summary lines), a few files so that they all
# come back from a machine that returns only some. The lane installs the carried wheels into $GPU_CHECK_SITE,
# which the benchmark then reads too. The benchmark runs what the issue's first figures need, LoRA at 1k and 4k
# tokens, ours as planned against TRL with checkpointing, and our sampler against model.generate, unless
# $GPU_SESSION_BENCH gives other arguments; it stops after $GPU_SESSION_BENCH_TIMEOUT seconds (300).
# Exit status: the lane's, else the benchmark's.
set -u
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(dirname "$HERE")
PY=${PYTHON:-python3}
OUT=${OUT:-$(mktemp -d -t gpu_session.XXXX)}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
GPU_CHECK_ARCHIVE="$OUT/gpu_check_logs.tar.gz" PYTHON="$PY" bash "$HERE/gpu_check.sh" 2>&1 | tee "$OUT/gpu_check.txt"
lane=${PIPESTATUS[0]}
SITE=${GPU_CHECK_SITE:-/tmp/gpu_check_site}
read -r -a bench <<<"${GPU_SESSION_BENCH:---modes lora --lengths 1024,4096 --checkpointing plan,on --steps 3 --sample-repeats 1}"
PYTHONPATH="$REPO:$SITE${PYTHONPATH:+:$PYTHONPATH}" timeout "${GPU_SESSION_BENCH_TIMEOUT:-300}" \
    "$PY" "$REPO/benchmarks/gpu_vs_trl.py" "${bench[@]}" 2>&1 | tee "$OUT/gpu_vs_trl.txt"
bench_rc=${PIPESTATUS[0]}
echo "gpu_session: lane exit $lane, benchmark exit $bench_rc; outputs in $OUT"
[ "$lane" -ne 0 ] && exit "$lane"
exit "$bench_rc"
