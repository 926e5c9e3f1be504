#!/usr/bin/env bash
# The project's one test command (README, .ci/run): sets up .venv if needed, then runs the suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
VENV="${AUTOSCALE_VENV:-.venv}"
# One DeepSpeed extension cache for the whole suite (its first op build takes about a minute).
export TORCH_EXTENSIONS_DIR="${TORCH_EXTENSIONS_DIR:-$HOME/.cache/autoscale-data/torch_extensions}"
export DS_ACCELERATOR=cpu
export TOKENIZERS_PARALLELISM=false
exec "$VENV/bin/python" -m pytest "$@"
