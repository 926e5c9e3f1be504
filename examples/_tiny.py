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
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from autoscale_data.store import ByteTokenizer, StoreWriter

__all__ = ["TINY_WEIGHTS", "add_data_args", "add_resume_args", "check_resumes", "check_two_to_one", "compare_phases",
           "compare_resumes", "finish_phase", "make_tiny_stores", "resume_example", "result", "run_phase", "stream_order"]

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


def finish_phase(args: argparse.Namespace, seen: Any) -> int:
    """Print what one run read: the ``PHASE`` line :func:`check_resumes` reads, or a count."""
    print("PHASE " + json.dumps(seen) if args.phase else f"read {len(_samples_and_losses(seen)[0])} samples",
          flush=True)
    return 0


def check_resumes(script: str, common: list[str], points: tuple[tuple[int, int, int], ...], *, per_step: int,
                  num_workers: int, unit: str) -> tuple[list[Any], dict[str, Any], bool]:
    """Run ``script`` once through, saving at every point, then resumed from each ``(step, workers,
    data-parallel ranks)`` point in a new process, and compare each resumed run with the uninterrupted
    one (:func:`compare_phases`).

    Returns:
        The uninterrupted run's samples, the report and verdict of :func:`compare_phases`.
    """
    full = run_phase(script, [*common, "--num-workers", str(num_workers), "--phase",
                              "--save-at", ",".join(str(k) for k, _, _ in points)])
    resumes = {k: run_phase(script, [*common, "--num-workers", str(w), "--dp", str(dp), "--resume", str(k),
                                     "--phase"])
               for k, w, dp in points}
    report, ok = compare_phases(full, resumes, points, per_step=per_step, unit=unit)
    return _samples_and_losses(full)[0], report, ok


def _samples_and_losses(phase: Any) -> tuple[list[Any], list[float] | None]:
    """What a ``train`` of :func:`resume_example` returned: samples alone, or ``{"samples", "losses"}``."""
    return (phase, None) if isinstance(phase, list) else (phase["samples"], phase["losses"])


def compare_phases(full: Any, resumes: Mapping[int, Any], points: tuple[tuple[int, int, int], ...], *,
                   per_step: int, unit: str) -> tuple[dict[str, Any], bool]:
    """Compare each run resumed at unit ``k`` with the uninterrupted run (what ``train`` returned, see
    :func:`resume_example`): its samples with the uninterrupted run's suffix (with several ranks: the samples
    both runs read) and, where the runs recorded losses and the data-parallel size is the same (one rank),
    its losses with the uninterrupted run's from unit ``k``, bit for bit. With another data-parallel size
    a unit groups other samples, so its losses differ by design.

    Returns:
        ``{k: {"samples", "equal", "dp", "compared"}}`` (plus ``"same_losses"`` where compared) and whether
        every resume matched what it was compared on and read something.
    """
    full_samples, full_losses = _samples_and_losses(full)
    report, ok = {}, True
    for (k, _, dp), phase in zip(points, resumes.values(), strict=True):
        resumed, losses = _samples_and_losses(phase)
        expected = full_samples[k * per_step:]
        if dp > 1:  # dp ranks read dp batches per step: compare the samples both runs read
            n = min(len(expected), len(resumed))
            expected, resumed = expected[:n], resumed[:n]
        same = resumed == expected
        entry: dict[str, Any] = {"samples": len(resumed), "equal": same, "dp": dp, "compared": ["samples"]}
        ok = ok and same and len(resumed) > 0
        if full_losses is not None and dp == 1:
            entry.update(compared=["samples", "losses"], same_losses=losses == full_losses[k:])  # bit for bit
            ok = ok and entry["same_losses"]
        report[str(k)] = entry
        print(f"resume from {unit} {k} on {dp} data-parallel rank(s): {len(resumed)} samples"
              f"{' and losses' if 'same_losses' in entry else ''}, "
              f"{'==' if same and entry.get('same_losses', True) else '!='} the uninterrupted run's")
    return report, ok


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


def resume_example(argv: list[str] | None, *, script: str, description: str, train: Callable[..., Any],
                   count: str, default: int, unit: str, out_help: str, per_step: int,
                   points: tuple[tuple[int, int, int], ...], seq_len: int, example: str, **versions: str) -> int:
    """The ``main`` of an example that saves its data state every ``unit`` and resumes it.

    Without ``--tiny`` it trains ``--COUNT`` units (``train(domains, weights, budget_tokens, seq_len,
    COUNT=n, out=, num_workers=, dp=, resume=, save_at=)``, which returns every sample read in stream
    order, or ``{"samples": ..., "losses": ...}`` with the training loss of each unit run) and prints
    them (:func:`finish_phase`). With ``--tiny`` it runs itself on tiny stores of 100 sequences: once
    through, then resumed from each ``(unit, workers, data-parallel ranks)`` of ``points``
    (:func:`check_resumes`), and prints the ``RESULT`` line (``example``, ``ok``, ``samples``, ``resumes``
    and ``versions``); ``per_step`` samples are read per unit.
    """
    parser = argparse.ArgumentParser(description=description)
    add_data_args(parser, budget_tokens=1e6, tiny_help="generate a tiny store and check the resume")
    parser.add_argument(f"--{count}", type=int, default=default)
    add_resume_args(parser, unit=unit, out_help=out_help)
    args = parser.parse_args(argv)
    units = getattr(args, count)
    if not args.tiny:
        if not args.domains or not args.weights or not args.out:
            parser.error("give --domains, --weights and --out, or --tiny")
        seen = train(args.domains, json.loads(args.weights), int(args.budget_tokens), args.seq_len, out=Path(args.out),
                     num_workers=args.num_workers, dp=args.dp, resume=args.resume,
                     save_at=tuple(int(s) for s in args.save_at.split(",") if s), **{count: units})
        return finish_phase(args, seen)
    with tempfile.TemporaryDirectory() as tmp:
        common = ["--domains", str(make_tiny_stores(Path(tmp) / "stores")), "--weights", json.dumps(TINY_WEIGHTS),
                  "--budget-tokens", str(100 * 49), "--seq-len", str(seq_len), f"--{count}", str(units), "--out", tmp]
        full, report, ok = check_resumes(script, common, points, per_step=per_step, num_workers=args.num_workers,
                                         unit=unit)
    ok = ok and len(full) == units * per_step
    result(example=example, ok=ok, samples=len(full), resumes=report, **versions)
    return 0 if ok else 1


def stream_order(per_rank: Sequence[Sequence[Any]], rows: Callable[[Any], list[Any]]) -> list[Any]:
    """The samples of every rank's steps in stream order (rank r of W holds positions r, r + W, ...);
    ``rows(step)`` are one step's samples."""
    out: list[Any] = []
    for steps in zip(*per_rank, strict=True):
        per_step = [rows(s) for s in steps]
        for j in range(max(len(r) for r in per_step)):
            out += [r[j] for r in per_step if j < len(r)]
    return out


def compare_resumes(full: Sequence[Mapping[str, Any]], resumes: Mapping[int, Sequence[Mapping[str, Any]]], *,
                    steps: int, rows: Callable[[Any], list[Any]]) -> tuple[dict[str, Any], bool]:
    """Compare each run resumed at step ``k`` (records ``{"step", "loss", ...}``) with the uninterrupted run's
    records from step ``k``: the same records but for their step (``equal``; the training losses among them,
    bit for bit, also alone as ``same_losses``), at steps ``k .. steps - 1`` (``steps_ok``); ``rows(record)``
    are a record's samples, ``[domain, sequence id, ...]``.

    Returns:
        ``{k: {"batches", "equal", "same_losses", "steps_ok", "first", "expected_first"}}`` (the first
        sequence ids) and whether every resume matched.
    """
    def first(record: Mapping[str, Any]) -> list[Any]:
        return [row[1] for row in rows(record)[:4]]

    report, ok = {}, True
    for k, resumed in resumes.items():
        same = [{**r, "step": None} for r in resumed] == [{**r, "step": None} for r in full[k:]]
        steps_ok = [r["step"] for r in resumed] == list(range(k, steps))
        same_losses = [r["loss"] for r in resumed] == [r["loss"] for r in full[k:]]
        report[str(k)] = {"batches": len(resumed), "equal": same, "same_losses": same_losses, "steps_ok": steps_ok,
                          "first": first(resumed[0]) if resumed else None,
                          "expected_first": first(full[k]) if len(full) > k else None}
        ok = ok and same and same_losses and steps_ok
        print(f"resume from step {k}: {len(resumed)} batches and losses, {'==' if same else '!='} the "
              "uninterrupted run's")
    return report, ok


def check_two_to_one(two: Sequence[Sequence[Any]], after_two: Sequence[Any], *, rows: Callable[[Any], list[Any]],
                     label: str, at: int = 4, samples: int = 32) -> tuple[dict[str, Any], bool]:
    """Whether one process resumed from the state two processes saved at step ``at`` reads, in stream
    order, exactly the ``samples`` samples the two read after it (and the two read different batches).

    Returns:
        ``{"samples", "equal"}`` and that verdict.
    """
    two_rest = stream_order([r[at:] for r in two], rows)
    one_rest = stream_order([after_two], rows)[:len(two_rest)]
    ok = len(two_rest) == samples and one_rest == two_rest and rows(two[0][0]) != rows(two[1][0])
    print(f"{label} at step {at}, 1 process resumed: {len(one_rest)} samples, "
          f"{'==' if ok else '!='} what the 2 processes read after step {at}")
    return {"samples": len(one_rest), "equal": ok}, ok
