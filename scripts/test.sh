#!/usr/bin/env bash
# Sets up .venv if needed, then runs the test suite (extra arguments go to pytest) in GRPO_TEST_WORKERS
# processes (pytest-xdist; default 2, the cores CI has; 0 runs it in this process).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest -q -n "${GRPO_TEST_WORKERS:-2}" "$@"
