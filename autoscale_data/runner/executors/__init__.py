"""Executors: where the runs of a plan train (this machine, a Slurm cluster, a Ray cluster).

:func:`make_executor` picks one from ``config.executor``; :func:`~.driver.train_specs` trains a
list of runs through it with the ledger as the record of every submission.
"""

from __future__ import annotations

import os

from ..._runner_names import RAY, SLURM
from ..config import RunnerConfig
from .base import Executor, Job, launch_command
from .driver import train_specs
from .local import InProcessExecutor, LocalExecutor, gpu_slots, resolve_max_parallel

__all__ = [
    "Executor",
    "InProcessExecutor",
    "Job",
    "LocalExecutor",
    "gpu_slots",
    "launch_command",
    "make_executor",
    "resolve_max_parallel",
    "train_specs",
]


def make_executor(config: RunnerConfig, out_dir: str | os.PathLike[str], *,
                  progress: bool | None = None) -> Executor:
    """The executor ``config.executor`` asks for (``out_dir``: the experiment directory).

    ``local`` with one slot trains a one-process plain-torch run in the runner's own process (as
    before executors existed); every other local setting starts processes per slot.
    """
    ex = config.executor
    if ex.kind == SLURM:
        from .slurm import SlurmExecutor

        return SlurmExecutor(config, out_dir)
    if ex.kind == RAY:
        from .ray import RayExecutor

        return RayExecutor(config)
    capacity = resolve_max_parallel(config)
    if capacity == 1 and config.backend == "torch" and config.procs == 1:
        return InProcessExecutor(progress=progress)
    return LocalExecutor(config, capacity, progress=progress)
