#!/usr/bin/env bash
# Carries what scripts/gpu_check.sh needs to a GPU machine that reaches no package registry: run it where pip
# reaches PyPI, then copy the checkout with its .whl/ folder (git-ignored) to the GPU machine.
#
#     bash scripts/gpu_wheels.sh                 (PYTHON=... picks the pip that downloads, default the project's
#                                                 .venv; GPU_WHEELS=DIR moves the folder)
#     bash scripts/gpu_wheels.sh --install SITE  (on the GPU machine, offline: the folder's packages into SITE;
#                                                 scripts/gpu_check.sh runs this and puts SITE on PYTHONPATH)
#
# The GPU machine is taken to hold a CUDA build of torch with transformers, peft, accelerate, tokenizers,
# safetensors, huggingface_hub, numpy, pandas, pyarrow, xxhash, fsspec, requests, httpx, rich, pluggy, psutil,
# msgpack, ninja, py-cpuinfo, einops, setuptools and matplotlib (a CUDA PyTorch image), under Python 3.12 on
# x86-64 Linux (manylinux wheels). This downloads, for that machine, the rest:
#   - this project as a wheel (its `grpo` entry points: the built-in rewards, engines and backends register
#     through them, so the checkout on PYTHONPATH alone finds none),
#   - trl; datasets and what it needs beyond the image (dill, multiprocess); bitsandbytes; pebble,
#   - deepspeed as its source distribution (it publishes no wheel) with hjson and pydantic (pydantic-core,
#     annotated-types, typing-inspection), built there by gpu_check.sh with DS_BUILD_OPS=0 (no compiled ops:
#     ZeRO-2 with torch's AdamW needs none), by the setuptools carried in build-tools/ (a setuptools that builds
#     wheels itself, whatever the image's), which is on the path only while source distributions build.
# It prints each file's size and the total, and fails when the folder is over 64 MiB (what a carried working tree
# may add). vLLM is not carried: its CUDA wheel alone is several hundred MiB, far over that, so the vLLM check of
# the lane SKIPs ("vllm not installed") on a machine without it and vLLM on CUDA stays unverified there.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(dirname "$HERE")
if [ -n "${PYTHON:-}" ]; then PY=$PYTHON
elif [ "${1:-}" != "--install" ] && [ -x "$REPO/.venv/bin/python" ]; then PY=$REPO/.venv/bin/python  # setup.sh's
else PY=python3; fi
OUT=${GPU_WHEELS:-$REPO/.whl}
LIMIT_MIB=64
# the versions the trainer is tested with (the development environment's); one version of each: two stop the install
WHEELS=(trl==1.16.0 typing-extensions==4.16.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 bitsandbytes==0.50.2 pebble==5.2.3
        hjson==3.1.0 pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5)
SDISTS=(deepspeed==0.19.8)
BUILD_TOOLS=(setuptools==80.9.0)  # builds the source distributions on the GPU machine (bdist_wheel built in)
PLATFORMS=(manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_24_x86_64 manylinux_2_17_x86_64
           manylinux2014_x86_64 manylinux1_x86_64)

if [ "${1:-}" = "--install" ]; then  # offline: every wheel, then each source distribution, into $2
    SITE=${2:?"--install needs a folder"}
    compgen -G "$OUT/*.whl" >/dev/null || { echo "gpu_wheels: no wheel in $OUT" >&2; exit 1; }
    mkdir -p "$SITE"
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "$OUT"/*.whl
    TOOLS=$(mktemp -d)
    trap 'rm -rf "$TOOLS"' EXIT
    if compgen -G "$OUT/build-tools/*.whl" >/dev/null; then
        "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$TOOLS" \
            "$OUT"/build-tools/*.whl
    fi
    for sdist in "$OUT"/*.tar.gz; do
        [ -e "$sdist" ] || continue
        PYTHONPATH="$TOOLS:$SITE${PYTHONPATH:+:$PYTHONPATH}" DS_BUILD_OPS=0 "$PY" -m pip install -q --no-index \
            --no-deps --no-build-isolation --no-cache-dir --upgrade --target "$SITE" "$sdist" \
            || echo "gpu_wheels: $(basename "$sdist") did not build" >&2
    done
    exit 0
fi

mkdir -p "$OUT/build-tools"
rm -f "$OUT"/*.whl "$OUT"/*.tar.gz "$OUT"/build-tools/*.whl
platform_args=()
for p in "${PLATFORMS[@]}"; do platform_args+=(--platform "$p"); done
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    "${platform_args[@]}" -d "$OUT" "${WHEELS[@]}"
"$PY" -m pip download -q --no-deps --only-binary=:all: -d "$OUT/build-tools" "${BUILD_TOOLS[@]}"
"$PY" -m pip download -q --no-deps --no-binary=:all: --no-build-isolation -d "$OUT" "${SDISTS[@]}"
BUILD=$(mktemp -d)
trap 'rm -rf "$BUILD"' EXIT
cp -r "$REPO/pyproject.toml" "$REPO/README.md" "$REPO/grpo_rewards" "$REPO/grpo_core" "$BUILD/"
"$PY" -m pip wheel -q --no-deps --no-build-isolation -w "$OUT" "$BUILD" >/dev/null 2>"$BUILD/log" \
    || { cat "$BUILD/log" >&2; exit 1; }  # this project, for its entry points

total=0
for f in "$OUT"/* "$OUT"/build-tools/*; do
    [ -f "$f" ] || continue
    size=$(stat -c %s "$f")
    total=$((total + size))
    printf '%8.2f MiB  %s\n' "$(echo "$size / 1048576" | bc -l)" "${f#"$OUT"/}"
done
printf '%8.2f MiB  in all (%s; limit %s MiB)\n' "$(echo "$total / 1048576" | bc -l)" "$OUT" "$LIMIT_MIB"
if [ "$total" -gt $((LIMIT_MIB * 1048576)) ]; then
    echo "gpu_wheels: over $LIMIT_MIB MiB: a carried working tree may not add that much" >&2
    exit 1
fi
