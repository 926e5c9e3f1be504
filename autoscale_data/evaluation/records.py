"""The typed records of a downstream evaluation (the codec of :mod:`autoscale_data._records`)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from .._records import Record

__all__ = ["DownstreamResult", "TaskScore"]


@dataclass(frozen=True)
class TaskScore(Record):
    """One task's scores of one model: means over the questions evaluated."""

    task: str
    """The task's name (a key of :data:`~autoscale_data.evaluation.TASKS`)."""
    examples: int
    """Questions scored."""
    acc: float
    """Accuracy: the answer of highest total log-likelihood is the gold one."""
    acc_norm: float
    """Length-normalised accuracy: the same with each answer's log-likelihood divided by its length in
    characters (lm-eval's ``acc_norm``, OLMo's ``acc_per_char``)."""
    bpb: float
    """Bits per byte of the gold answer: its negative log-likelihood in bits over its UTF-8 bytes, mean over
    questions (lower is better)."""
    chance: float
    """Accuracy of a uniform guess over these questions (mean of one over their number of answers)."""
    seconds: float
    """Wall time of the scoring (tokenising and the forward passes)."""


@dataclass(frozen=True)
class DownstreamResult(Record):
    """One model on the zero-shot tasks: ``OUT/runs/<run_id>/downstream.json`` for a runner's target run."""

    model: str
    """What was evaluated (a checkpoint folder, or a run id)."""
    tokenizer: str
    """The tokenizer's spec (``bytes``, ``gpt2``, a path)."""
    limit: int | None
    """Questions per task drawn (``None``: every question of the split)."""
    seed: int
    """The seed of the draw of questions (the same subset for every model)."""
    tasks: dict[str, TaskScore] = field(default_factory=dict)
    """Task name -> its scores (``downstream.json`` keeps them sorted by name)."""

    @property
    def mean_acc(self) -> float:
        """Accuracy averaged over the tasks (each task counts once)."""
        return statistics.fmean(t.acc for t in self.tasks.values())

    @property
    def mean_bpb(self) -> float:
        """Bits per byte averaged over the tasks."""
        return statistics.fmean(t.bpb for t in self.tasks.values())
