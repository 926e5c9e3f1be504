"""The runner's closed name sets, spelt once: executors, an extension's LR schedules, run kinds, model
families.

They sit below every layer so that the CLI offers them (``autoscale-data run --executor``,
``autoscale-data extend --lr-schedule``) without importing the runner, which needs an extra; the
runner's config (``ExecutorConfig``), its executors and its extensions read them from here.
"""

from __future__ import annotations

from typing import Literal, get_args

__all__ = ["BERT", "CONSTANT", "EXECUTORS", "EXTENSION", "GPT2", "INPROCESS", "LOCAL", "LR_SCHEDULES",
           "MODEL_FAMILIES", "PROXY", "RAY", "REWARM_DECAY", "RUN_KINDS", "SLURM", "SLURM_CLUSTERS", "TARGET",
           "Executor"]

Executor = Literal["local", "slurm", "ray"]
"""Where the runs of a plan are trained (``executor.kind``): this machine, a Slurm cluster, a Ray cluster."""
EXECUTORS: tuple[Executor, ...] = get_args(Executor)
LOCAL, SLURM, RAY = EXECUTORS

INPROCESS = "inprocess"
"""The executor a ``local`` config with one slot runs: one run after another in the runner's own process."""

SLURM_CLUSTERS: tuple[str, ...] = (SLURM, LOCAL)
"""``executor.slurm.cluster``: submitit's names of a Slurm cluster and of its local stand-in."""

LR_SCHEDULES: tuple[str, ...] = ("rewarm_decay", "constant")
"""Learning-rate schedules of an extension's new steps: re-warm then decay (the default), or re-warm then
hold."""
REWARM_DECAY, CONSTANT = LR_SCHEDULES

RUN_KINDS: tuple[str, ...] = ("proxy", "target", "extension")
"""``RunSpec.kind`` of a DDO proxy, a target run and a finished target run's extension (a method's own runs
have the selection kinds its registry declaration names)."""
PROXY, TARGET, EXTENSION = RUN_KINDS

MODEL_FAMILIES: tuple[str, ...] = ("gpt2", "bert")
"""A model preset's family, the start of its name: GPT-2 (a causal LM) or BERT (a masked LM)."""
GPT2, BERT = MODEL_FAMILIES
