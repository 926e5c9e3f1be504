#!/usr/bin/env bash
# The project's one test command (README, .ci/run): creates .venv if needed, installs the package
# with every test dependency (torch pinned to the CPU wheel by constraints.txt), runs the suite.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${AUTOSCALE_VENV:-.venv}"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
stamp="$VENV/.autoscale-install-stamp"
want="$(cat pyproject.toml constraints.txt | sha256sum | cut -c1-16)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  "$VENV/bin/python" -m pip install -q --upgrade pip
  "$VENV/bin/python" -m pip install -q -c constraints.txt -e ".[dev]"
  echo "$want" > "$stamp"
fi
# One DeepSpeed extension cache for the whole suite (its first op build takes about a minute).
export TORCH_EXTENSIONS_DIR="${TORCH_EXTENSIONS_DIR:-$HOME/.cache/autoscale-data/torch_extensions}"
export DS_ACCELERATOR=cpu
export TOKENIZERS_PARALLELISM=false
exec "$VENV/bin/python" -m pytest "$@"
