"""The run ledger: an append-only JSON-lines event log (``OUT/ledger.jsonl``: pending / submitted / running /
done / failed) plus one atomically written ``runs/<run_id>/result.json`` per run (the folder: :mod:`.layout`).

Each event is one ``write`` of a whole line on an ``O_APPEND`` descriptor followed by ``fsync``;
a line torn by a crash is skipped when reading. A run counts as finished only when its
``result.json`` exists and parses, so ``kill -9`` at any moment can lose at most the run in
progress: a result written just before the kill (but not yet logged) is adopted on the next start,
never retrained. One runner at a time holds ``OUT/.lock``, and one training process at a time
holds a run's ``runs/<run_id>/.train.lock`` (:func:`hold_run_lock`).

``submitted`` and ``running`` events carry the attempt number (1, 2, … over the run's whole
history), the executor and its job id (a pid, a Slurm job id, a Ray task), so a runner started
after the previous one was killed can re-attach to a job that is still alive (Slurm) or resubmit it.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .._io import atomic_write_json
from .._runner_names import INPROCESS
from . import layout
from .records import LedgerEvent, RunResult

__all__ = ["DONE", "FAILED", "Ledger", "PENDING", "RUNNING", "RunRecord", "SUBMITTED", "hold_run_lock"]

PENDING, SUBMITTED, RUNNING, DONE, FAILED = "pending", "submitted", "running", "done", "failed"


def _try_lock(path: Path) -> int | None:
    """A descriptor of ``path`` locked exclusively for this process (released when it exits), or ``None``."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def hold_run_lock(run_dir: str | os.PathLike[str]) -> int | None:
    """Take ``run_dir/.train.lock`` for this process; ``None`` if another holds it."""
    Path(run_dir).mkdir(parents=True, exist_ok=True)
    return _try_lock(Path(run_dir) / layout.TRAIN_LOCK)


@dataclass
class RunRecord:
    """The folded state of one run: status, failure reason, attempts, whether it may be retried, and
    the executor and job id of its latest submission."""

    run_id: str
    status: str = PENDING
    reason: str = ""
    attempts: int = 0
    terminal: bool = False
    name: str = ""
    executor: str = ""
    job_id: str = ""


class Ledger:
    """Status and results of every run under ``out_dir``.

    Args:
        out_dir: the experiment directory (created if missing).
        lock: take the exclusive runner lock (``False`` for read-only use such as ``report``).
    """

    def __init__(self, out_dir: str | os.PathLike[str], *, lock: bool = True) -> None:
        self.dir = Path(out_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / layout.RUNS).mkdir(exist_ok=True)
        self.path = self.dir / layout.LEDGER
        self._results: dict[str, tuple[tuple[int, int, int], RunResult | None]] = {}
        self._lock_fd = _try_lock(self.dir / layout.LOCK) if lock else None
        if lock and self._lock_fd is None:
            raise ValueError(f"another runner is using {os.fspath(self.dir)!r} (its .lock is held)")

    def close(self) -> None:
        """Release the runner lock."""
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- paths -------------------------------------------------------------------------------
    def run_dir(self, run_id: str) -> Path:
        """``OUT/runs/<run_id>``."""
        return self.dir / layout.RUNS / run_id

    def result_path(self, run_id: str) -> Path:
        return self.run_dir(run_id) / layout.RESULT

    # ---- events ------------------------------------------------------------------------------
    def _append(self, event: LedgerEvent) -> None:
        line = json.dumps(replace(event, time=round(time.time(), 3)).to_json(), sort_keys=True) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            if size:
                with open(self.path, "rb") as fh:  # terminate a line torn by an earlier crash
                    fh.seek(size - 1)
                    if fh.read(1) != b"\n":
                        line = "\n" + line
            os.write(fd, line.encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)

    def events(self) -> Iterator[LedgerEvent]:
        """Every well-formed event in order (torn or garbled lines are skipped)."""
        yield from layout.read_lines(self.dir, layout.LEDGER)

    def register(self, spec: Any) -> None:
        """Record a planned run (its spec file is written once; the event only if new)."""
        path = self.run_dir(spec.run_id) / layout.SPEC
        if not path.exists():
            atomic_write_json(path, spec.to_json())
        if spec.run_id not in self.records():
            self._append(LedgerEvent(spec.run_id, PENDING, name=spec.name))

    def mark_submitted(self, run_id: str, attempt: int, *, executor: str, job_id: str) -> None:
        """Log that attempt ``attempt`` of the run was handed to ``executor`` as job ``job_id``."""
        self._append(LedgerEvent(run_id, SUBMITTED, attempt=attempt, executor=executor, job_id=str(job_id)))

    def mark_running(self, run_id: str, attempt: int, *, executor: str = "", job_id: str = "") -> None:
        """Log that attempt ``attempt`` started training (``job_id`` defaults to this process)."""
        self._append(LedgerEvent(run_id, RUNNING, attempt=attempt, pid=os.getpid(),
                                 executor=executor or INPROCESS,
                                 job_id=str(job_id or os.getpid())))

    def mark_done(self, run_id: str, summary: Mapping[str, Any]) -> None:
        """Log a finished run; its ``result.json`` must already exist."""
        if not self.has_result(run_id):
            raise ValueError(f"run {run_id} has no readable result.json: cannot mark it done")
        self._append(LedgerEvent(run_id, DONE, **dict(summary)))

    def mark_failed(self, run_id: str, reason: str, *, terminal: bool) -> None:
        """Log a failure. ``terminal`` failures (divergence) are not retried; others are."""
        self._append(LedgerEvent(run_id, FAILED, reason=reason, terminal=terminal))

    # ---- state -------------------------------------------------------------------------------
    def records(self) -> dict[str, RunRecord]:
        """Fold the event log into one record per run (results on disk win over stale events)."""
        out: dict[str, RunRecord] = {}
        for e in self.events():
            rec = out.setdefault(e.run_id, RunRecord(e.run_id))
            rec.status = e.status
            rec.name = e.name or rec.name
            if e.status in (SUBMITTED, RUNNING):
                rec.attempts = max(rec.attempts, rec.attempts + 1 if e.attempt is None else e.attempt)
                rec.executor = e.executor or rec.executor
                rec.job_id = e.job_id or rec.job_id
            rec.reason = e.reason if e.status == FAILED else ""
            rec.terminal = bool(e.terminal) if e.status == FAILED else False
        for rec in out.values():
            if rec.status != DONE and self.has_result(rec.run_id):
                rec.status, rec.reason, rec.terminal = DONE, "", False
            elif rec.status == DONE and not self.has_result(rec.run_id):
                rec.status = PENDING
        return out

    def result(self, run_id: str) -> RunResult | None:
        """The finished run's ``result.json``, or ``None`` if there is none (or it does not parse, or holds
        another run's result, or not a result at all)."""
        try:
            stat = self.result_path(run_id).stat()
        except FileNotFoundError:
            return None
        key = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
        cached = self._results.get(run_id)
        if cached is not None and cached[0] == key:  # the folding of records() asks for every run, often
            return cached[1]
        try:
            found: RunResult | None = layout.read(self.run_dir(run_id), layout.RESULT)
        except ValueError:
            found = None
        found = found if found is not None and found.run_id == run_id else None
        self._results[run_id] = (key, found)
        return found

    def specs(self) -> Iterator[Any]:
        """The :class:`~autoscale_data.runner.planning.specs.RunSpec` of every run folder with a readable
        ``spec.json``."""
        for run_dir in sorted(p for p in (self.dir / layout.RUNS).iterdir() if p.is_dir()):
            spec = layout.read(run_dir, layout.SPEC)
            if spec is not None:
                yield spec

    def has_result(self, run_id: str) -> bool:
        """Whether the run has a readable ``result.json`` (:meth:`result` is not ``None``)."""
        return self.result(run_id) is not None
