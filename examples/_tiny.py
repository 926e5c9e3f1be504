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

__all__ = ["TINY_WEIGHTS", "add_data_args", "add_resume_args", "check_resumes", "finish_phase", "make_tiny_stores",
           "result", "run_phase"]

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


def add_resume_args(parser: argparse.ArgumentParser, *, unit: str, out_help: str) -> None:
    """The options of the examples that save and resume a trainer's data state (besides how many ``unit``
    to run): workers, simulated data-parallel ranks, where the states go, when to save, where to
    resume, and the hidden ``--phase`` (print what was read, for :func:`check_resumes`)."""
    parser.add_argument("--num-workers", type=int, default=1)
    parser.add_argument("--dp", type=int, default=1, help="simulated data-parallel ranks")
    parser.add_argument("--out", help=out_help)
    parser.add_argument("--save-at", default="")
    parser.add_argument("--resume", type=int, help=f"{unit} to resume from")
    parser.add_argument("--phase", action="store_true", help=argparse.SUPPRESS)


def finish_phase(args: argparse.Namespace, seen: list[Any]) -> int:
    """Print what one run read: the ``PHASE`` line :func:`check_resumes` reads, or a count."""
    print("PHASE " + json.dumps(seen) if args.phase else f"read {len(seen)} samples", flush=True)
    return 0


def check_resumes(script: str, common: list[str], points: tuple[tuple[int, int, int], ...], *, per_step: int,
                  num_workers: int, unit: str) -> tuple[list[Any], dict[str, Any], bool]:
    """Run ``script`` once through, saving at every point, then resumed from each ``(step, workers,
    data-parallel ranks)`` point in a new process, and compare each resumed stream with the
    uninterrupted one's suffix (with several ranks: the samples both runs read).

    Returns:
        The uninterrupted run's samples, ``{step: {"samples", "equal", "dp"}}`` and whether every resume
        matched and read something.
    """
    full = run_phase(script, [*common, "--num-workers", str(num_workers), "--phase",
                              "--save-at", ",".join(str(k) for k, _, _ in points)])
    resumes = {k: run_phase(script, [*common, "--num-workers", str(w), "--dp", str(dp), "--resume", str(k),
                                     "--phase"])
               for k, w, dp in points}
    report, ok = {}, True
    for (k, _, dp), resumed in zip(points, resumes.values(), strict=True):
        expected = full[k * per_step:]
        if dp > 1:  # dp ranks read dp batches per step: compare the samples both runs read
            n = min(len(expected), len(resumed))
            expected, resumed = expected[:n], resumed[:n]
        same = resumed == expected
        report[str(k)] = {"samples": len(resumed), "equal": same, "dp": dp}
        ok = ok and same and len(resumed) > 0
        print(f"resume from {unit} {k} on {dp} data-parallel rank(s): {len(resumed)} samples, "
              f"{'==' if same else '!='} the uninterrupted run's")
    return full, report, ok


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
