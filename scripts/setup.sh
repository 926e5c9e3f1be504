#!/usr/bin/env bash
# Creates .venv (if missing) and installs autoscale-data with every extra (tests, DeepSpeed, the
# GPT-2 tokenizer files, file formats, benchmarks) at the versions of requirements.lock, every
# package pinned (so two fresh clones get the same environment and the demo the same numbers);
# torch is pinned by constraints.txt to the CPU wheel on CPU machines. Re-running is a no-op unless
# pyproject.toml, constraints.txt or requirements.lock changed. scripts/lock.sh refreshes the lock.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${AUTOSCALE_VENV:-.venv}"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
stamp="$VENV/.autoscale-install-stamp"
want="$(cat pyproject.toml constraints.txt requirements.lock | sha256sum | cut -c1-16)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "[setup] installing autoscale-data[dev] into $VENV (every version from requirements.lock) ..."
  "$VENV/bin/python" -m pip install -q -c requirements.lock pip
  "$VENV/bin/python" -m pip install -q -c constraints.txt -c requirements.lock -e ".[dev]"
  echo "$want" > "$stamp"
fi
