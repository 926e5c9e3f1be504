"""Slurm through submitit: one job per run (submitted as job arrays), re-attached by job id.

One node runs the local executor's launch command with the job's GPUs; several nodes run
``torch.distributed.run`` on every node with the first node as rendezvous (see "Executors" in
docs/runner.md). A runner killed while jobs are queued or running leaves them alone; the next runner
finds their ids in the ledger and waits for them (``sacct``/``squeue`` through submitit).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..._runner_names import LOCAL, SLURM
from ...solver.vocabulary import AUTO
from .. import layout
from ..config import RunnerConfig
from .base import Executor, Job, launch_command, worker_env

__all__ = ["SlurmExecutor", "TrainJob"]

_WAITING = ("PENDING", "REQUEUED", "CONFIGURING", "RESIZING", "SUSPENDED", "QUEUED", "UNKNOWN")
_ENDED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL",
          "DEADLINE",
          "PREEMPTED", "GONE")
_GRACE_POLLS = 5  # an ended job's result file may reach this machine late (shared file systems)


class TrainJob:
    """The function a Slurm job runs: train one run with its launcher, return the exit code.

    Picklable (submitit sends it to the node); the training processes end through
    :func:`~autoscale_data.runner.training.dist.exit_process` as everywhere else.
    """

    def __init__(self, config: RunnerConfig, job_file: str) -> None:
        self.config, self.job_file = config, job_file

    def command(self) -> list[str]:
        import submitit

        config = self.config
        nodes = config.executor.slurm.nodes
        gpus = [g for g in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if g.strip()] or None
        if nodes == 1:
            return launch_command(config, self.job_file, gpus=gpus)
        env = submitit.JobEnvironment()
        port = 20000 + zlib.crc32(str(env.job_id).encode()) % 20000
        return [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(nodes),
                "--node_rank", str(env.node), "--nproc_per_node", str(config.procs // nodes),
                "--master_addr", env.hostnames[0], "--master_port", str(port),
                "-m", "autoscale_data.runner.training.train", "--job", self.job_file]

    def __call__(self) -> int:
        cmd = self.command()
        # the deepspeed launcher gets the job's GPUs as --include
        env = worker_env(self.config, launcher_gpus=cmd[2] == "deepspeed.launcher.runner")
        log = Path(self.job_file).parent / layout.TRAIN_LOG
        with open(log, "ab") as fh:
            fh.write(("$ " + " ".join(cmd) + "\n").encode())
            fh.flush()
            return subprocess.run(cmd, env=env, stdout=fh, stderr=fh, stdin=subprocess.DEVNULL).returncode


def _requeueing() -> type:
    from submitit.helpers import Checkpointable

    class RequeueingTrainJob(TrainJob, Checkpointable):
        """A :class:`TrainJob` that submitit requeues on preemption or time-out (it resumes from its
        checkpoint)."""

    return RequeueingTrainJob


class SlurmExecutor(Executor):
    """One submitit job per run on Slurm (or on this machine with ``slurm.cluster: local``), its job folder
    ``OUT/slurm`` unless ``slurm.folder`` is set."""

    kind = SLURM

    def __init__(self, config: RunnerConfig, out_dir: str | os.PathLike[str]) -> None:
        from ..._extras import require

        require(SLURM, f"executor.kind {SLURM!r}")
        import submitit

        s = config.executor.slurm
        if config.procs % s.nodes:
            raise ValueError(f"executor.slurm.nodes = {s.nodes} must divide procs = {config.procs}")
        self.config = config
        self.folder = Path(config.resolve(s.folder)) if s.folder else Path(out_dir) / SLURM
        self.cluster = s.cluster
        self.capacity = config.executor.max_parallel if config.executor.max_parallel != AUTO else s.array_parallelism
        self._ex = submitit.AutoExecutor(folder=self.folder / "%j", cluster=s.cluster)
        per_node = config.procs // s.nodes
        gpus = s.gpus_per_node if s.gpus_per_node is not None else (per_node if config.device == "cuda"
                                                                    else 0)
        optional = {"gpus_per_node": gpus or None, "nodes": s.nodes if s.nodes > 1 else None,
                    "mem_gb": s.mem_gb,
                    "slurm_partition": s.partition or None, "slurm_account": s.account or None,
                    "slurm_additional_parameters": dict(s.extra) or None}
        self._ex.update_parameters(timeout_min=s.time_min, tasks_per_node=1, name=config.name,
                                   slurm_array_parallelism=s.array_parallelism,
                                   cpus_per_task=s.cpus_per_task or ((config.cpu_threads or 1) * per_node),
                                   **{k: v for k, v in optional.items() if v is not None})
        self._job_class = _requeueing() if s.requeue else TrainJob
        self._ended: dict[str, int] = {}
        # without accounting, submitit warns at every sacct call; squeue answers instead
        if s.cluster == SLURM:
            import logging

            logging.getLogger("submitit").setLevel(logging.ERROR)

    def describe(self) -> str:
        return f"{SLURM}{f'({LOCAL})' if self.cluster == LOCAL else ''} x{self.capacity}"

    def submit_many(self, jobs: Sequence[Job]) -> None:
        array = len(jobs) > 1 and self.cluster != LOCAL  # one sbatch: a job array
        with self._ex.batch() if array else contextlib.nullcontext():
            handles = [self._ex.submit(self._job_class(self.config, os.fspath(j.job_file))) for j in jobs]
        for job, handle in zip(jobs, handles, strict=True):
            job.handle, job.job_id = handle, str(handle.job_id)

    def submit(self, job: Job) -> None:
        self.submit_many([job])

    def _state(self, job_id: str, handle: Any) -> str:
        """The job's Slurm state: sacct through submitit, else ``squeue`` (a cluster without
        accounting), ``GONE`` when neither knows the job."""
        try:
            state = str(handle.state).upper()
        except Exception:  # noqa: BLE001 - sacct hiccups
            state = "UNKNOWN"
        if state != "UNKNOWN" or self.cluster != SLURM:
            return state.split()[0] if state else "UNKNOWN"
        try:
            out = subprocess.run(["squeue", "-h", "--states=all", "-j", job_id, "-o", "%T"],
                                 capture_output=True,
                                 text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            return "UNKNOWN"
        words = out.stdout.split() if out.returncode == 0 else []
        return words[0].upper() if words else "GONE"

    def is_started(self, job: Job) -> bool:
        if isinstance(job.handle, _Orphan):
            return True
        return self._state(job.job_id, job.handle) not in _WAITING

    def poll(self, job: Job) -> int | None:
        handle = job.handle
        if isinstance(handle, _Orphan):
            if handle.alive():
                return None
            handle = handle.finished()
        if not handle.done():
            if self.cluster != SLURM or self._state(job.job_id, handle) not in _ENDED:
                return None
            self._ended[job.job_id] = self._ended.get(job.job_id, 0) + 1
            if self._ended[job.job_id] < _GRACE_POLLS:
                return None
            job.error = f"slurm job {job.job_id} left the queue without a result (see its log in {self.folder})"
            return 1
        try:
            return int(handle.result())
        except Exception as exc:  # noqa: BLE001 - the job failed, timed out or was cancelled
            job.error = f"slurm job {job.job_id} ended in state {handle.state}: {str(exc).strip()[-500:]}"
            return 1

    def attach(self, job: Job, job_id: str) -> bool:
        if self.cluster == LOCAL:  # a local job is a process that outlived the previous runner
            orphan = _Orphan(self.folder, job_id)
            if not orphan.alive() and not orphan.finished().paths.result_pickle.exists():
                return False
            job.handle = orphan
            return True
        import submitit

        handle = submitit.SlurmJob(self.folder / "%j", job_id)
        if not handle.paths.result_pickle.exists() and self._state(job_id, handle) in _ENDED + ("UNKNOWN",):
            return False
        job.handle = handle
        return True

    def cancel(self, job: Job) -> None:
        if job.handle is None:
            return
        if isinstance(job.handle, _Orphan):
            job.handle.kill()
            return
        with contextlib.suppress(Exception):  # it may have ended meanwhile
            job.handle.cancel(check=False)

    def wait(self, timeout: float) -> None:
        import time

        time.sleep(max(timeout, 0.5 if self.cluster == LOCAL else 5.0))


class _Orphan:
    """A submitit local job (a process) started by an earlier runner, watched by its pid."""

    def __init__(self, folder: Path, job_id: str) -> None:
        self.folder, self.job_id = folder, job_id

    def alive(self) -> bool:
        try:
            os.kill(int(self.job_id), 0)
        except (ProcessLookupError, ValueError):
            return False
        except PermissionError:
            return True
        try:  # a zombie is not alive
            return Path(f"/proc/{self.job_id}/stat").read_text().split()[2] != "Z"
        except (FileNotFoundError, IndexError):
            return False

    def finished(self) -> Any:
        from submitit.local.local import LocalJob

        return LocalJob(self.folder / "%j", self.job_id)

    def kill(self) -> None:
        import signal

        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(self.job_id), signal.SIGINT)
