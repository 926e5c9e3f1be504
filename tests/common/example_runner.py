"""Run one example's ``--tiny`` mode in a subprocess and return its ``RESULT`` line (for the adapter tests)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["EXAMPLES", "run_example"]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run_example(script: str, cwd: Path, *args: str, timeout: float = 500) -> dict[str, Any]:
    """``python examples/<script> --tiny *args`` in ``cwd``; fails unless it exits 0 with ``"ok": true``."""
    env = dict(os.environ, TOKENIZERS_PARALLELISM="false", DS_ACCELERATOR="cpu")
    proc = subprocess.run([sys.executable, "-u", str(EXAMPLES / script), "--tiny", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)
    output = proc.stdout + proc.stderr
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, f"{script} exited {proc.returncode}:\n{output[-4000:]}"
    result = json.loads(lines[-1][len("RESULT "):])
    assert result["ok"] is True, result
    return result
