"""What every executor shares: the job of one run, the executor interface and the launch command.

An executor only starts, watches and cancels jobs; the driver (:mod:`.driver`) decides what to
submit, writes the ledger and reads each finished job's outcome from its run directory
(``result.json``: done; ``failure.json`` or exit code 3: diverged; anything else: died).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import layout
from ..config import RunnerConfig
from ..planning.specs import RunSpec

__all__ = ["Executor", "Job", "launch_command", "outcome", "set_pdeathsig", "uses_cuda", "visible_gpus",
           "worker_env"]


@dataclass
class Job:
    """One submission of one run: its spec, directory, attempt number and the executor's handle."""

    spec: RunSpec
    run_dir: Path
    attempt: int = 0
    job_id: str = ""
    handle: Any = field(default=None, repr=False)
    running: bool = False
    error: str = ""

    @property
    def job_file(self) -> Path:
        """``runs/<id>/job.json``: what the training process reads."""
        return self.run_dir / layout.JOB

    @property
    def log_path(self) -> Path:
        """``runs/<id>/train.log``: the training process's output."""
        return self.run_dir / layout.TRAIN_LOG


class Executor(ABC):
    """Starts, watches and cancels the training jobs of runs.

    Attributes:
        kind: the ledger's name for this executor (``local``, ``slurm``, ``ray`` …).
        capacity: how many jobs it runs at once.
    """

    kind: str = ""
    capacity: int = 1

    def submit_many(self, jobs: Sequence[Job]) -> None:
        """Start ``jobs`` (setting each one's ``job_id``); executors with job arrays override this."""
        for job in jobs:
            self.submit(job)

    @abstractmethod
    def submit(self, job: Job) -> None:
        """Start ``job`` and set its ``job_id``."""

    @abstractmethod
    def poll(self, job: Job) -> int | None:
        """``None`` while ``job`` runs, else its exit code (0: the process ended normally)."""

    def is_started(self, job: Job) -> bool:
        """Whether ``job`` left the queue and trains (cluster executors override this)."""
        return True

    def attach(self, job: Job, job_id: str) -> bool:
        """Re-attach to ``job_id`` submitted by an earlier runner; ``False``: it is gone (resubmit)."""
        return False

    @abstractmethod
    def cancel(self, job: Job) -> None:
        """Stop ``job`` (its checkpoint stays: a later submission resumes from it)."""

    def wait(self, timeout: float) -> None:
        """Block until some job may have changed state, at most ``timeout`` seconds."""
        time.sleep(timeout)

    def close(self) -> None:
        """Release workers, connections and pools."""
        return None

    def describe(self) -> str:
        """``local x2``: what the progress line calls this executor."""
        return f"{self.kind} x{self.capacity}"


def outcome(job: Job, code: int) -> tuple[bool, str, bool]:
    """``(finished, failure reason, failure is terminal)`` of a job that ended with ``code``."""
    from ..training.train import DIVERGED_EXIT

    if code == 0 and (job.run_dir / layout.RESULT).exists():
        return True, "", False
    failure = job.run_dir / layout.FAILURE
    if code == DIVERGED_EXIT or failure.exists():
        try:
            found = layout.read(job.run_dir, layout.FAILURE)
        except ValueError:
            found = None
        return False, found.reason if found is not None else f"diverged (exit {code})", True
    if job.error:
        return False, job.error, False
    try:
        tail = job.log_path.read_text(errors="replace").strip().splitlines()[-3:]
    except FileNotFoundError:
        tail = []
    return False, f"training process exited with code {code}: {' | '.join(tail)}", False


def worker_env(config: RunnerConfig, *, gpus: Sequence[str] | None = None,
               launcher_gpus: bool = False) -> dict[str, str]:
    """The environment of a training process (every executor): this one's, plus the runner's pid (the
    trainer stops when the runner dies), one tokenizer thread, ``cpu_threads`` intra-op threads and
    the slot's GPUs (``gpus``; ``launcher_gpus``: none, since the deepspeed launcher gets them as
    ``--include``)."""
    env = dict(os.environ, AUTOSCALE_PARENT_PID=str(os.getpid()))
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    if config.cpu_threads is not None:
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(config.cpu_threads)
    if launcher_gpus:
        env.pop("CUDA_VISIBLE_DEVICES", None)
    elif gpus is not None:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
    return env


def set_pdeathsig() -> None:
    """In a child before exec (``preexec_fn``): die with the runner (Linux ``PR_SET_PDEATHSIG``)."""
    import ctypes

    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def uses_cuda(config: RunnerConfig) -> bool:
    """Whether the runs of ``config`` train on GPUs on this machine."""
    if config.device == "cpu":
        return False
    import torch

    return config.device == "cuda" or torch.cuda.is_available()


def visible_gpus() -> list[str]:
    """The GPUs this process may use, as ``CUDA_VISIBLE_DEVICES`` names them (default: all)."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [g.strip() for g in env.split(",") if g.strip()]
    import torch

    return [str(i) for i in range(torch.cuda.device_count())]


def launch_command(config: RunnerConfig, job_file: str | os.PathLike[str], *, progress: bool = False,
                   gpus: Sequence[str] | None = None) -> list[str]:
    """The command that trains ``job_file`` with ``config.procs`` processes on this machine (``gpus``: the
    DeepSpeed launcher's ``--include``; for the other launchers the caller sets ``CUDA_VISIBLE_DEVICES``)."""
    from ..training.dist import free_port

    module = ["autoscale_data.runner.training.train", "--job", os.fspath(job_file)]
    if progress:
        module.append("--progress")
    if config.procs == 1:
        return [sys.executable, "-m", *module]
    port = str(free_port())
    if config.backend == "deepspeed" and config.deepspeed.launcher == "deepspeed":
        # the launcher's module under this interpreter (not the `deepspeed` script): every rank then
        # runs the same sys.executable, so DeepSpeed's cached op builds see identical paths
        where = ["--include", "localhost:" + ",".join(gpus)] if gpus else ["--num_gpus", str(config.procs)]
        return [sys.executable, "-m", "deepspeed.launcher.runner", *where, "--master_port", port,
                "--module", *module]
    return [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(config.procs),
            "--master_port", port, "-m", *module]
