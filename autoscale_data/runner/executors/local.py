"""Training on this machine: in the runner's own process, or up to ``max_parallel`` runs at once.

Each slot owns its GPUs (:func:`gpu_slots`) or ``cpu_threads`` threads; a one-process plain torch run
goes to the slot's long-lived worker (:mod:`.worker`), other runs start their launcher per run (see
"Executors" in docs/runner.md). Every process dies with the runner (``PR_SET_PDEATHSIG``, and the
trainer checks the runner's pid every step); its checkpoint stays for the next runner.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO

from ..._runner_names import INPROCESS, LOCAL
from ...solver.vocabulary import AUTO
from ..config import RunnerConfig
from .base import Executor, Job, launch_command, set_pdeathsig, uses_cuda, visible_gpus, worker_env

__all__ = ["InProcessExecutor", "LocalExecutor", "gpu_slots", "resolve_max_parallel"]


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def resolve_max_parallel(config: RunnerConfig) -> int:
    """``executor.max_parallel`` as a number: ``auto`` is GPUs // procs x runs_per_gpu on a GPU machine,
    else cores // cpu_threads (1 when ``cpu_threads`` is not set: one run then uses every core)."""
    mp = config.executor.max_parallel
    if mp != AUTO:
        return int(mp)
    if uses_cuda(config):
        return max(1, len(visible_gpus()) // config.procs) * config.executor.runs_per_gpu
    if config.cpu_threads is None:
        return 1
    return max(1, _cpu_count() // (config.cpu_threads * config.procs))


def gpu_slots(gpus: list[str], capacity: int, procs: int, runs_per_gpu: int) -> list[list[str]]:
    """The GPUs of each of ``capacity`` slots: slot ``i`` takes group ``i mod G`` of the ``G`` groups of
    ``procs`` GPUs, so runs spread over the GPUs before they share one (at most ``runs_per_gpu`` a group).

    Raises:
        ValueError: more slots than the groups hold, naming both numbers and the visible GPUs.
    """
    groups = [gpus[j * procs:(j + 1) * procs] for j in range(len(gpus) // procs)]
    if capacity > len(groups) * runs_per_gpu:
        raise ValueError(f"executor.max_parallel = {capacity} runs of procs = {procs} GPUs each need "
                         f"{-(-capacity // runs_per_gpu) * procs} GPUs; {len(gpus)} are visible ({gpus}) at "
                         f"executor.runs_per_gpu = {runs_per_gpu}: raise runs_per_gpu or lower max_parallel")
    return [groups[i % len(groups)] for i in range(capacity)]


class InProcessExecutor(Executor):
    """One run at a time in the runner's own process (plain torch, one process: no start-up cost)."""

    kind = INPROCESS
    capacity = 1

    def __init__(self, *, progress: bool | None = None) -> None:
        self.progress = progress

    def submit(self, job: Job) -> None:
        job.job_id = str(os.getpid())

    def poll(self, job: Job) -> int | None:
        from ..training.train import DIVERGED_EXIT, Diverged, load_job, train_run

        config, spec, domains = load_job(job.job_file)
        try:
            train_run(config, spec, domains, job.run_dir, progress=self.progress)
        except Diverged:
            return DIVERGED_EXIT
        except (RuntimeError, ValueError, OSError) as exc:
            job.error = f"{type(exc).__name__}: {exc}"
            return 1
        return 0

    def cancel(self, job: Job) -> None:
        pass


class _Worker:
    """A worker process of one slot and the thread that reads its answers."""

    def __init__(self, env: dict[str, str], wake: threading.Event, family: str) -> None:
        cmd = [sys.executable, "-m", "autoscale_data.runner.executors.worker", "--family", family]
        self.proc = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True, bufsize=1,
                                     preexec_fn=set_pdeathsig, start_new_session=True)
        self.codes: list[int] = []
        self.ended = False
        self._wake = wake
        threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True).start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            if line.startswith("exit "):
                self.codes.append(int(line.split()[1]))
                self._wake.set()
        self.ended = True
        self._wake.set()

    def send(self, job_file: Path) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(os.fspath(job_file) + "\n")
        self.proc.stdin.flush()

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()


class LocalExecutor(Executor):
    """Up to ``capacity`` runs at once on this machine, each in its own slot of devices or threads
    (``progress``: each trainer's progress bar, launcher runs only)."""

    kind = LOCAL

    def __init__(self, config: RunnerConfig, capacity: int, *, progress: bool | None = None) -> None:
        self.config, self.capacity, self.progress = config, capacity, bool(progress)
        self._gpus = (gpu_slots(visible_gpus(), capacity, config.procs, config.executor.runs_per_gpu)
                      if uses_cuda(config) else None)
        self._free = list(range(capacity))[::-1]
        self._workers: dict[int, _Worker] = {}
        self._wake = threading.Event()
        self._in_worker = config.backend == "torch" and config.procs == 1
        if self._in_worker:  # start (and warm up) every slot's worker now: imports overlap other work
            for slot in range(capacity):
                self._start_worker(slot)

    def _start_worker(self, slot: int) -> _Worker:
        worker = self._workers[slot] = _Worker(self._env(slot), self._wake, self.config.model.family)
        return worker

    def _env(self, slot: int, *, launcher_gpus: bool = False) -> dict[str, str]:
        if self._gpus is None:
            return worker_env(self.config)
        # the DeepSpeed launcher sets each rank's devices from --include
        return worker_env(self.config, gpus=self._gpus[slot], launcher_gpus=launcher_gpus)

    def submit(self, job: Job) -> None:
        slot = self._free.pop()
        if self._in_worker:
            worker = self._workers.get(slot)
            if worker is None or worker.ended or worker.proc.poll() is not None:
                worker = self._start_worker(slot)
            worker.send(job.job_file)
            job.handle = (slot, worker, len(worker.codes))
            job.job_id = f"{worker.proc.pid}"
            return
        ds_launcher = self.config.backend == "deepspeed" and self.config.deepspeed.launcher == "deepspeed" \
            and self.config.procs > 1
        gpus = self._gpus[slot] if (self._gpus is not None and ds_launcher) else None
        cmd = launch_command(self.config, job.job_file, progress=self.progress, gpus=gpus)
        with open(job.log_path, "ab") as log:
            log.write(("$ " + " ".join(cmd) + "\n").encode())
            log.flush()
            proc = subprocess.Popen(cmd, env=self._env(slot, launcher_gpus=gpus is not None), stdout=log,
                                    stderr=log, stdin=subprocess.DEVNULL, preexec_fn=set_pdeathsig,
                                    start_new_session=True)
        job.handle = (slot, proc, 0)
        job.job_id = str(proc.pid)

    def poll(self, job: Job) -> int | None:
        slot, proc, index = job.handle
        if isinstance(proc, _Worker):
            if len(proc.codes) > index:
                code: int | None = proc.codes[index]
            elif proc.ended or proc.proc.poll() is not None:
                code = proc.proc.wait()
                code = code if code != 0 else 1  # the worker ended in the middle of the run
                self._workers.pop(slot, None)
            else:
                return None
        else:
            code = proc.poll()
            if code is None:
                return None
        self._free.append(slot)
        return int(code)

    def cancel(self, job: Job) -> None:
        if job.handle is None:
            return
        slot, proc, _ = job.handle
        if isinstance(proc, _Worker):
            proc.stop()
            self._workers.pop(slot, None)
        else:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def wait(self, timeout: float) -> None:
        if self._in_worker:
            self._wake.wait(timeout)
            self._wake.clear()
        else:
            super().wait(timeout)

    def close(self) -> None:
        for worker in self._workers.values():
            if worker.proc.stdin is not None:
                with contextlib.suppress(OSError):
                    worker.proc.stdin.close()  # the worker leaves at the end of its input
        for worker in self._workers.values():
            try:
                worker.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                worker.stop()
        self._workers.clear()


