"""The one loop that trains a list of runs through an executor, with the ledger as the record.

Submissions go out while the executor has room (what an earlier runner left: :meth:`_Loop.triage`); each
finished job's outcome is read from its run directory and logged (``done`` / ``failed``); a job that died
is resubmitted up to ``executor.retries`` times in this call and resumes from its checkpoint. An exception
or Ctrl-C cancels every job in flight. The caller owns the executor (one serves every phase of a plan).
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
from ..planning.specs import RunSpec
from ..records import RunResult
from .base import Executor, Job, outcome

__all__ = ["train_specs"]

_POLL_S = 0.2


def _summary(result: RunResult | None) -> dict[str, Any]:
    """What the ledger's ``done`` event records of a run's result (nothing when it has none)."""
    keys = ("name", MEAN_LOSS, "total_tokens", "wall_time_s", "device", "tokens_per_s")
    return {} if result is None else {k: getattr(result, k) for k in keys}


def train_specs(executor: Executor, ledger: Ledger, specs: Sequence[RunSpec], config: Any,
                domains: DomainInfo,
                *, log: Callable[[str], None] = print, progress: bool = False) -> dict[str, str]:
    """Train every run of ``specs`` (duplicates once) that is not finished; returns each run id's final
    status. ``config`` and ``domains`` go into each ``job.json``; ``log`` takes one line per finished or
    failed run."""
    unique = list({s.run_id: s for s in specs}.values())
    loop = _Loop(executor, ledger, config, domains, log, total=len(unique))
    loop.triage(unique)
    loop.run(progress)
    return loop.status


class _Loop:
    """The runs of one :func:`train_specs` call: their status, the queue, the jobs in flight and the tries."""

    def __init__(self, executor: Executor, ledger: Ledger, config: Any, domains: DomainInfo,
                 log: Callable[[str], None], *, total: int) -> None:
        self.executor, self.ledger, self.config, self.domains, self.log = executor, ledger, config, domains, log
        self.total = total
        self.status: dict[str, str] = {}
        self.todo: deque[Job] = deque()
        self.active: list[Job] = []
        self.tries: Counter[str] = Counter()
        self.finished: Counter[str] = Counter()

    def triage(self, unique: Sequence[RunSpec]) -> None:
        """Runs done (a result not yet logged is adopted) or failed for good get their status; a job an
        earlier runner left with this executor is re-attached while the executor still knows it; the rest are
        queued."""
        ledger, executor = self.ledger, self.executor
        records = ledger.records()
        for spec in unique:
            rec = records.get(spec.run_id)
            if rec is not None and rec.status == DONE:
                if not any(e.status == DONE for e in ledger.events() if e.run_id == spec.run_id):
                    ledger.mark_done(spec.run_id, _summary(ledger.result(spec.run_id)))  # adopt
                self.status[spec.run_id] = DONE
                continue
            if rec is not None and rec.status == FAILED and rec.terminal:
                warnings.warn(f"run {spec.name} ({spec.run_id}) failed earlier and is not retried: "
                              f"{rec.reason}",
                              stacklevel=4)
                self.status[spec.run_id] = FAILED
                continue
            job = Job(spec, ledger.run_dir(spec.run_id), attempt=rec.attempts if rec else 0)
            if (rec is not None and rec.status in (SUBMITTED, RUNNING) and rec.executor == executor.kind
                    and rec.job_id and executor.attach(job, rec.job_id)):
                job.job_id = rec.job_id
                self.active.append(job)
                self.log(f"re-attached to {executor.kind} job {rec.job_id} of {spec.name} ({spec.run_id})")
            else:
                self.todo.append(job)
        self.finished = Counter(self.status.values())

    def run(self, progress: bool) -> None:
        """Submit, poll and record until every job has ended; cancel the jobs in flight on any exception.
        ``progress``: one line for the executor (runs done out of the total, queued / running / failed,
        ETA)."""
        from tqdm.auto import tqdm

        finished = self.finished
        bar = tqdm(total=self.total, initial=finished[DONE] + finished[FAILED], desc=self.executor.describe(),
                   unit="run", disable=not progress, dynamic_ncols=True, leave=False)
        try:
            while self.todo or self.active:
                changed = self._submit()
                changed = self._poll() or changed
                bar.n = finished[DONE] + finished[FAILED]
                bar.set_postfix_str(f"queued {len(self.todo)}, running {len(self.active)}, done "
                                    f"{finished[DONE]}, failed {finished[FAILED]}", refresh=True)
                if self.active and not changed:
                    self.executor.wait(_POLL_S)
        except BaseException:
            for job in self.active:
                self.executor.cancel(job)
            raise
        finally:
            bar.close()

    def _submit(self) -> bool:
        """Hand queued jobs to the executor while it has room (each with a fresh ``job.json``)."""
        from ..training.train import write_job

        batch: list[Job] = []
        while self.todo and len(self.active) + len(batch) < self.executor.capacity:
            job = self.todo.popleft()
            job.attempt += 1
            job.running, job.error, job.handle = False, "", None
            self.tries[job.spec.run_id] += 1
            (job.run_dir / layout.FAILURE).unlink(missing_ok=True)
            write_job(job.job_file, self.config, job.spec, self.domains)
            batch.append(job)
        if batch:
            self.executor.submit_many(batch)
            for job in batch:
                self.ledger.mark_submitted(job.spec.run_id, job.attempt, executor=self.executor.kind,
                                           job_id=job.job_id)
            self.active += batch
        return bool(batch)

    def _poll(self) -> bool:
        """Log the jobs that started and record the ones that ended; whether anything changed."""
        changed = False
        for job in list(self.active):
            if not job.running and self.executor.is_started(job):
                job.running = True
                self.ledger.mark_running(job.spec.run_id, job.attempt, executor=self.executor.kind,
                                         job_id=job.job_id)
                changed = True
            code = self.executor.poll(job)
            if code is not None:
                self.active.remove(job)
                self._finish(job, code)
                changed = True
        return changed

    def _finish(self, job: Job, code: int) -> None:
        """Record how a job ended: done, requeued (a failure with tries left), or failed."""
        spec, finished = job.spec, self.finished
        ok, reason, terminal = outcome(job, code)
        n = f"[{finished[DONE] + finished[FAILED] + 1}/{self.total}]"
        if ok:
            found = self.ledger.result(spec.run_id)
            self.ledger.mark_done(spec.run_id, _summary(found))
            finished[DONE] += 1
            self.status[spec.run_id] = DONE
            result = found or RunResult(run_id=spec.run_id)
            self.log(f"{n} done {spec.name} ({spec.run_id}): {result.total_tokens:,} tokens, "
                     f"val loss {result.mean_loss:.4f}, {result.wall_time_s:.1f} s, "
                     f"{result.tokens_per_s:,.0f} tok/s, data wait {result.data_wait_fraction:.1%}"
                     f", {result.device or '?'}")
            return
        self.ledger.mark_failed(spec.run_id, reason, terminal=terminal)
        if not terminal and self.tries[spec.run_id] <= self.config.executor.retries:
            self.log(f"retrying {spec.name} ({spec.run_id}) from its checkpoint after: {reason}")
            self.todo.appendleft(job)
            return
        finished[FAILED] += 1
        self.status[spec.run_id] = FAILED
        self.log(f"{n} FAILED {spec.name} ({spec.run_id}): {reason}")
