#!/usr/bin/env bash
# Sets up .venv if needed, then runs the main job on the embedded default.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/grpo demo "$@"
