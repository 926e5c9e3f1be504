"""The executor names, spelt once: where the runner trains the runs of a plan (``executor.kind``).

They sit below every layer so that the CLI offers them (``autoscale-data run --executor``) without
importing the runner, which needs an extra; the runner's config (``ExecutorConfig``) and its
executors read them from here.
"""

from __future__ import annotations

from typing import Literal, get_args

__all__ = ["EXECUTORS", "INPROCESS", "LOCAL", "RAY", "SLURM", "SLURM_CLUSTERS", "Executor"]

Executor = Literal["local", "slurm", "ray"]
"""Where the runs of a plan are trained (``executor.kind``): this machine, a Slurm cluster, a Ray cluster."""
EXECUTORS: tuple[Executor, ...] = get_args(Executor)
LOCAL, SLURM, RAY = EXECUTORS

INPROCESS = "inprocess"
"""The executor a ``local`` config with one slot runs: one run after another in the runner's own process."""

SLURM_CLUSTERS: tuple[str, ...] = (SLURM, LOCAL)
"""``executor.slurm.cluster``: submitit's names of a Slurm cluster and of its local stand-in."""
