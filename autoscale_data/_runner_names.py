"""The runner's closed name sets that the CLI offers, spelt once: the executors and the LR schedules of an extension.

They sit below every layer so that the CLI offers them (``autoscale-data run --executor``,
``autoscale-data extend --lr-schedule``) without importing the runner, which needs an extra; the
runner's config (``ExecutorConfig``), its executors and its extensions read them from here.
"""

from __future__ import annotations

from typing import Literal, get_args

__all__ = ["CONSTANT", "EXECUTORS", "LR_SCHEDULES", "INPROCESS", "LOCAL", "RAY", "REWARM_DECAY", "SLURM",
           "SLURM_CLUSTERS", "Executor"]

Executor = Literal["local", "slurm", "ray"]
"""Where the runs of a plan are trained (``executor.kind``): this machine, a Slurm cluster, a Ray cluster."""
EXECUTORS: tuple[Executor, ...] = get_args(Executor)
LOCAL, SLURM, RAY = EXECUTORS

INPROCESS = "inprocess"
"""The executor a ``local`` config with one slot runs: one run after another in the runner's own process."""

SLURM_CLUSTERS: tuple[str, ...] = (SLURM, LOCAL)
"""``executor.slurm.cluster``: submitit's names of a Slurm cluster and of its local stand-in."""

LR_SCHEDULES: tuple[str, ...] = ("rewarm_decay", "constant")
"""Learning-rate schedules of an extension's new steps: re-warm then decay (the default), or re-warm then hold."""
REWARM_DECAY, CONSTANT = LR_SCHEDULES
