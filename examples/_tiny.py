"""Shared by the examples' ``--tiny`` modes: a small synthetic multi-domain store in a directory.

Each domain is generated text with its own vocabulary, tokenized with the built-in ``bytes``
tokenizer and written with :class:`~autoscale_data.store.StoreWriter` (every 10th document goes to
the held-out split), i.e. the same layout ``autoscale-data prepare`` produces.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np

from autoscale_data.store import ByteTokenizer, StoreWriter

__all__ = ["TINY_WEIGHTS", "add_data_args", "make_tiny_stores", "result", "run_phase"]

_WORDS = {
    "books": "the old house stood by the river and she walked along it every morning",
    "code": "def return import for while if else class self print lambda yield none true",
    "web": "click here to read more about the best deals news sports weather and login",
}
TINY_WEIGHTS = {"books": 0.3, "code": 0.2, "web": 0.5}


def add_data_args(parser: argparse.ArgumentParser, *, budget_tokens: float, tiny_help: str) -> None:
    """The data options every example takes: stores, weights, budget, sequence length, ``--tiny``."""
    parser.add_argument("--domains", help="a prepare output dir (one store per domain)")
    parser.add_argument("--weights", help='JSON {"domain": weight, ...}')
    parser.add_argument("--budget-tokens", type=float, default=budget_tokens)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--tiny", action="store_true", help=tiny_help)


def make_tiny_stores(root: str | Path, *, docs_per_domain: int = 400, seed: int = 0) -> Path:
    """Write one store per domain under ``root`` (skipped if already there); returns ``root``."""
    root = Path(root)
    tok = ByteTokenizer()
    rng = np.random.default_rng(seed)
    for name, text in _WORDS.items():
        if (root / name / "manifest.json").is_file():
            continue
        words = text.split()
        with StoreWriter(root / name, name, tok.info, shard_tokens=1 << 14,
                         holdout={"every": 10}, source={"generator": "examples/_tiny.py"}) as writer:
            for i in range(docs_per_domain):
                doc = " ".join(rng.choice(words, size=int(rng.integers(10, 60))))
                ids = np.append(tok.encode(doc), tok.eos_id)
                writer.add_document("val" if i % 10 == 9 else "train", ids)
    return root


def run_phase(script: str, args: list[str], *, quiet_ok: bool = False) -> Any:
    """Run ``script`` again in a new process (the examples' resume checks) and return the JSON of its last
    ``PHASE {json}`` line; ``quiet_ok``: a phase that exits 0 without one returns ``None``.

    Raises:
        RuntimeError: the process failed, or printed no ``PHASE`` line (unless ``quiet_ok``).
    """
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"),
                                                                     str(Path(script).parent)])))
    proc = subprocess.run([sys.executable, script, *args], capture_output=True, text=True, env=env, timeout=600)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("PHASE ")]
    if proc.returncode == 0 and not lines and quiet_ok:
        return None
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"{args} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1][len("PHASE "):])


def result(**fields: object) -> None:
    """Print the machine-checkable summary line the tests read: ``RESULT {json}``."""
    print("RESULT " + json.dumps(fields, sort_keys=True), flush=True)
    sys.stdout.flush()
