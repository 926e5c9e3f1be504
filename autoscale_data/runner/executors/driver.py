"""The one loop that trains a list of runs through an executor, with the ledger as the record.

For every run: done already -> skipped (a result written just before a crash is adopted); failed
terminally (diverged) -> skipped with a warning; submitted/running under the same executor by an
earlier runner -> re-attached when the executor still knows the job, else resubmitted. Submissions
go out while the executor has room; each finished job's outcome is read from its run directory and
logged (``done`` / ``failed``); a job that died is resubmitted up to ``executor.retries`` times in
this call and resumes from its checkpoint. An exception or Ctrl-C cancels every job in flight.
The caller owns the executor (one executor serves every phase of a plan; close it at the end).
"""

from __future__ import annotations

import warnings
from collections import Counter, deque
from collections.abc import Callable, Sequence
from typing import Any

from ...solver.vocabulary import MEAN_LOSS
from .. import layout
from ..ledger import DONE, FAILED, RUNNING, SUBMITTED, Ledger
from ..planning.data import DomainInfo
from ..planning.plan import RunSpec
from ..records import RunResult
from .base import Executor, Job, outcome

__all__ = ["train_specs"]

_POLL_S = 0.2


def _summary(result: RunResult | None) -> dict[str, Any]:
    """What the ledger's ``done`` event records of a run's result (nothing when it has none)."""
    keys = ("name", MEAN_LOSS, "total_tokens", "wall_time_s", "device", "tokens_per_s")
    return {} if result is None else {k: getattr(result, k) for k in keys}


class _Progress:
    """One tqdm line per executor: runs done out of the total, queued / running / failed, ETA."""

    def __init__(self, executor: Executor, total: int, done: int, show: bool) -> None:
        from tqdm.auto import tqdm

        self.bar = tqdm(total=total, initial=done, desc=executor.describe(), unit="run", disable=not show,
                        dynamic_ncols=True, leave=False)

    def update(self, queued: int, running: int, done: int, failed: int) -> None:
        self.bar.n = done + failed
        self.bar.set_postfix_str(f"queued {queued}, running {running}, done {done}, failed {failed}",
                                 refresh=True)

    def close(self) -> None:
        self.bar.close()


def train_specs(executor: Executor, ledger: Ledger, specs: Sequence[RunSpec], config: Any, domains: DomainInfo,
                *, log: Callable[[str], None] = print, progress: bool = False) -> dict[str, str]:
    """Train every run of ``specs`` that is not finished; returns each run id's final status.

    Args:
        executor: where the jobs run.
        ledger: the experiment's ledger (held by this runner).
        specs: the runs (duplicates are trained once).
        config: the experiment config (``executor.retries``; written into each ``job.json``).
        domains: the stores (written into each ``job.json``).
        log: where one line per finished or failed run goes.
        progress: show the executor's progress line.
    """
    from ..training.train import write_job

    unique = list({s.run_id: s for s in specs}.values())
    records = ledger.records()
    status: dict[str, str] = {}
    todo: deque[Job] = deque()
    active: list[Job] = []
    for spec in unique:
        rec = records.get(spec.run_id)
        if rec is not None and rec.status == DONE:
            if not any(e.status == DONE for e in ledger.events() if e.run_id == spec.run_id):
                ledger.mark_done(spec.run_id, _summary(ledger.result(spec.run_id)))  # adopt
            status[spec.run_id] = DONE
            continue
        if rec is not None and rec.status == FAILED and rec.terminal:
            warnings.warn(f"run {spec.name} ({spec.run_id}) failed earlier and is not retried: {rec.reason}",
                          stacklevel=3)
            status[spec.run_id] = FAILED
            continue
        job = Job(spec, ledger.run_dir(spec.run_id), attempt=rec.attempts if rec else 0)
        if (rec is not None and rec.status in (SUBMITTED, RUNNING) and rec.executor == executor.kind
                and rec.job_id and executor.attach(job, rec.job_id)):
            job.job_id = rec.job_id
            active.append(job)
            log(f"re-attached to {executor.kind} job {rec.job_id} of {spec.name} ({spec.run_id})")
        else:
            todo.append(job)
    total = len(unique)
    retries = config.executor.retries
    tries: Counter[str] = Counter()
    finished = Counter(status.values())
    bar = _Progress(executor, total, finished[DONE] + finished[FAILED], progress)

    def finish(job: Job, code: int) -> None:
        spec = job.spec
        ok, reason, terminal = outcome(job, code)
        n = f"[{finished[DONE] + finished[FAILED] + 1}/{total}]"
        if ok:
            found = ledger.result(spec.run_id)
            ledger.mark_done(spec.run_id, _summary(found))
            finished[DONE] += 1
            status[spec.run_id] = DONE
            result = found or RunResult(run_id=spec.run_id)
            log(f"{n} done {spec.name} ({spec.run_id}): {result.total_tokens:,} tokens, "
                f"val loss {result.mean_loss:.4f}, {result.wall_time_s:.1f} s, "
                f"{result.tokens_per_s:,.0f} tok/s, data wait {result.data_wait_fraction:.1%}"
                f", {result.device or '?'}")
            return
        ledger.mark_failed(spec.run_id, reason, terminal=terminal)
        if not terminal and tries[spec.run_id] <= retries:
            log(f"retrying {spec.name} ({spec.run_id}) from its checkpoint after: {reason}")
            todo.appendleft(job)
            return
        finished[FAILED] += 1
        status[spec.run_id] = FAILED
        log(f"{n} FAILED {spec.name} ({spec.run_id}): {reason}")

    try:
        while todo or active:
            batch: list[Job] = []
            while todo and len(active) + len(batch) < executor.capacity:
                job = todo.popleft()
                job.attempt += 1
                job.running, job.error, job.handle = False, "", None
                tries[job.spec.run_id] += 1
                (job.run_dir / layout.FAILURE).unlink(missing_ok=True)
                write_job(job.job_file, config, job.spec, domains)
                batch.append(job)
            if batch:
                executor.submit_many(batch)
                for job in batch:
                    ledger.mark_submitted(job.spec.run_id, job.attempt, executor=executor.kind, job_id=job.job_id)
                active += batch
            changed = bool(batch)
            for job in list(active):
                if not job.running and executor.is_started(job):
                    job.running = True
                    ledger.mark_running(job.spec.run_id, job.attempt, executor=executor.kind, job_id=job.job_id)
                    changed = True
                code = executor.poll(job)
                if code is not None:
                    active.remove(job)
                    finish(job, code)
                    changed = True
            bar.update(len(todo), len(active), finished[DONE], finished[FAILED])
            if active and not changed:
                executor.wait(_POLL_S)
    except BaseException:
        for job in active:
            executor.cancel(job)
        raise
    finally:
        bar.close()
    return status


