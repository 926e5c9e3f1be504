"""The typed records of the files a run writes in ``OUT/runs/<run_id>/`` and the fits write in ``OUT/fits/``.

Each is a dataclass written and read by the one codec of :mod:`autoscale_data._records` (one JSON
key per field); :data:`~.layout.RECORDS` names the record of every file of the output folder.
Reading is lenient where earlier versions wrote less: a key they did not write takes its field's
default.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from .._records import Record, omitted
from ..mixing import FIXED_SCHEDULE
from ..solver import ProjectionsRecord
from ..solver.vocabulary import OBJECTIVES
from .planning.specs import LRSchedule, RunSpec

__all__ = [
    "BootstrapUnavailable",
    "CheckpointPointer",
    "EvalPoint",
    "FinalState",
    "JobFile",
    "LedgerEvent",
    "MixturePlanError",
    "ProjectionFile",
    "RunExtension",
    "RunFailure",
    "RunListFile",
    "RunResult",
]


class _Objective:
    """A record holding the objective under both its keys (``mean_loss`` and ``mean_ppl``)."""

    def value(self, key: str) -> float:
        """The objective under its key: ``mean_loss`` or ``mean_ppl`` (a run result's: the final one)."""
        if key not in OBJECTIVES:
            raise ValueError(f"objective key {key!r} is invalid: expected one of {OBJECTIVES}")
        return float(getattr(self, key))


@dataclass(frozen=True)
class EvalPoint(Record, _Objective):
    """One evaluation along a run: an entry of ``result.json``'s ``curve``."""

    tokens: int
    """Training tokens at this point (an extension's parent's included)."""
    step: int = 0
    """Optimiser steps at this point (an extension's parent's included)."""
    losses: dict[str, float] = field(default_factory=dict)
    """Validation loss per domain."""
    mean_loss: float = math.nan
    """Mean of :attr:`losses` over the domains."""
    mean_ppl: float = math.nan
    """Mean over the domains of each domain's perplexity."""
    train_loss: float = math.nan
    """Training loss of the last step."""
    domain_tokens: dict[str, int] = field(default_factory=dict)
    """Training tokens of each domain seen so far (empty: not recorded)."""
    train_losses: dict[str, float | None] = field(default_factory=dict)
    """Per domain, the mean training loss since the previous point (``None``: the domain was not drawn)."""


@dataclass(frozen=True)
class RunExtension(Record):
    """What an extension run (``autoscale-data extend``) continued, in its ``result.json``."""

    parent: str
    """The run it continues."""
    parent_tokens: int
    """Tokens the parent had trained."""
    new_tokens: int
    """Tokens this run trained."""
    new_steps: int
    """Optimiser steps this run took."""
    mix: str
    """How the mix goes on after the parent's end (the spec's ``extension.mix``: ``same``, ``plan`` or
    ``anytime``)."""
    lr: LRSchedule
    """The learning-rate schedule of the new steps (the spec's ``extension.lr``)."""


@dataclass(frozen=True)
class RunResult(Record, _Objective):
    """A finished run: the content of ``OUT/runs/<run_id>/result.json`` (every field but ``run_id`` has a
    default: earlier versions wrote fewer keys)."""

    run_id: str
    """The run's id (its folder under ``OUT/runs``)."""
    name: str = ""
    """``kind@scale label sSEED``."""
    kind: str = ""
    """``proxy``, ``target``, ``extension`` or a method's selection kind."""
    scale: int = 0
    """The nominal budget the run belongs to."""
    label: str = ""
    """The run's label (``base``, ``code x3``, ``autoscale`` …)."""
    seed: int = 0
    """Model-initialisation and data-order seed."""
    status: str = "done"
    """Always ``done`` (a failed run writes ``failure.json`` instead)."""
    schedule: str = FIXED_SCHEDULE
    """``fixed`` or ``anytime``."""
    tokens: dict[str, int] = field(default_factory=dict)
    """Training tokens per domain at the end (an extension's parent's included)."""
    total_tokens: int = 0
    """Their sum."""
    planned_tokens: dict[str, int] = field(default_factory=dict)
    """Planned training tokens per domain (the spec's)."""
    weights: dict[str, float] = field(default_factory=dict)
    """The mixture weights of the planned tokens."""
    losses: dict[str, float] = field(default_factory=dict)
    """Final validation loss per domain (the last point of :attr:`curve`)."""
    curve: list[EvalPoint] = field(default_factory=list)
    """Every evaluation along the run."""
    mean_loss: float = math.nan
    """Final mean validation loss (NaN without an evaluation)."""
    mean_ppl: float = math.nan
    """Final mean perplexity (NaN without an evaluation)."""
    final_train_loss: float = math.nan
    """Training loss of the last step."""
    steps: int = 0
    """Optimiser steps at the end (an extension's parent's included)."""
    parameters: int = 0
    """Model parameters."""
    wall_time_s: float = 0.0
    """Training plus evaluation time, summed over attempts."""
    train_time_s: float = 0.0
    """Training time."""
    eval_time_s: float = 0.0
    """Evaluation time."""
    data_wait_s: float = 0.0
    """Time the training steps waited for data."""
    data_wait_fraction: float = 0.0
    """:attr:`data_wait_s` over :attr:`train_time_s`."""
    tokens_per_s: float = 0.0
    """Tokens this run trained per second of training."""
    device: str = ""
    """The device trained on (the GPU's name on CUDA)."""
    world_size: int = 1
    """Processes that trained the run."""
    backend: str = ""
    """The training backend (``torch`` or ``deepspeed``)."""
    precision: str = ""
    """The training precision."""
    resumed_at: list[int] = field(default_factory=list)
    """Steps at which the run resumed from a checkpoint."""
    finished_at: float = 0.0
    """Unix time of the end."""
    extension: RunExtension | None = omitted(default=None)
    """What an extension run continued (written only for extension runs)."""
    step_hook: dict[str, Any] | None = omitted(default=None)
    """The step hook's summary at the end (written only for runs with a hook). Its keys are the hook's
    own (:meth:`~.hooks.StepHook.summary`; DoReMi's: ``weights``, ``average_weights``, ``scores``,
    ``updates``, ``finite``), so it stays a mapping typed by the hook that writes it."""


@dataclass(frozen=True)
class RunListFile(Record):
    """The current plan's runs: ``OUT/plan.json``.

    A list that was never written is ``None`` and stays absent (a folder that only ever trained extra
    runs has ``extra`` alone).
    """

    proxies: dict[str, list[RunSpec]] | None = omitted(default=None)
    """DDO proxies by budget (a string)."""
    targets: list[RunSpec] | None = omitted(default=None)
    """Target runs, one per target mix and seed (equal mixes share a run id)."""
    method_runs: list[RunSpec] | None = omitted(default=None)
    """Runs other mixing methods train to choose their mixes (RegMix's swarm, DoReMi's proxies)."""
    extra: list[RunSpec] | None = omitted(default=None)
    """Runs trained through :meth:`~.pipeline.MixtureRunner.train_runs`."""

    def run_ids(self) -> set[str] | None:
        """Every run id of the plan (proxies, targets, the methods' runs and extra runs); ``None``: an empty
        plan (no ``plan.json``)."""
        specs = [*(s for specs in (self.proxies or {}).values() for s in specs), *(self.targets or []),
                 *(self.extra or []), *(self.method_runs or [])]
        if not specs and self == RunListFile():
            return None
        return {s.run_id for s in specs}


@dataclass(frozen=True)
class JobFile(Record):
    """What ``python -m autoscale_data.runner.training.train --job PATH`` needs:
    ``OUT/runs/<run_id>/job.json``."""

    config: dict[str, Any]
    """The experiment config without its ``base_dir`` (:func:`~.config.config_to_dict`; read by
    :func:`~.config.config_from_dict`, its one schema)."""
    base_dir: str | None
    """The folder the config's relative paths start from."""
    spec: RunSpec
    """The run."""
    domains: dict[str, Any]
    """The stores (:class:`~.plan.DomainInfo` as :func:`~.config.config_to_dict` writes it)."""


@dataclass(frozen=True)
class RunFailure(Record):
    """Why a run failed: the content of ``OUT/runs/<run_id>/failure.json``."""

    run_id: str
    """The run's id."""
    reason: str = ""
    """What went wrong (``diverged: ...``)."""


@dataclass(frozen=True)
class FinalState(Record):
    """A kept final checkpoint's state: ``OUT/runs/<run_id>/final_ckpt/final_state.json``."""

    run_id: str
    """The run's id."""
    steps: int
    """Optimiser steps at the end."""
    sequences: int
    """Sequences the run trained (the spec's total)."""
    dataset: dict[str, Any]
    """The dataset's state at the end (:meth:`~autoscale_data.ScaleAwareMixtureDataset.state_dict`; its keys
    are the dataset's)."""


@dataclass(frozen=True)
class CheckpointPointer(Record):
    """Which checkpoint of ``ckpt/`` is complete: its tag and step."""

    tag: str
    """The checkpoint's tag (its file or folder name)."""
    step: int
    """Optimiser steps it holds."""


@dataclass(frozen=True)
class MixturePlanError(Record):
    """Why no mixture plan could be fitted: ``OUT/fits/mixture_plan_error.json``."""

    error: str
    """The fitting error's message."""


@dataclass(frozen=True)
class BootstrapUnavailable(Record):
    """A proxy budget's bootstrap that could not run: ``OUT/fits/bootstrap_<N>.json``'s other shape (the one
    that ran is the solver's :class:`~autoscale_data.solver.BootstrapResult`)."""

    reason: str
    """Why it did not run (the solver's error)."""
    available: bool = field(init=False, default=False)
    """Always false (a bootstrap that ran writes true)."""


@dataclass(frozen=True)
class ProjectionFile(ProjectionsRecord):
    """The projections to the target budget and the target mix: ``OUT/fits/projection.json``.

    The solver's :class:`~autoscale_data.solver.ProjectionsRecord` (every candidate, the one used, the
    selection and the trust) with the runner's weight bounds applied to ``weights`` and the effective-token
    law added (:func:`~.fitting.projection_summary`, :func:`~.repetition.repetition_law`).
    """

    unbounded_weights: dict[str, float] | None = None
    """The projection's own weights, before the bounds (``weights`` are the bounded ones)."""
    bounds_applied: dict[str, list[float]] | None = None
    """Domains the bounds moved: ``[before, after]``."""
    weight_bounds: list[float] | None = None
    """``[ddo.min_weight, ddo.max_weight]``."""
    repetition_law: dict[str, Any] | None = omitted(default=None)
    """The effective-token law (:class:`~.repetition.RepetitionLaw`'s JSON; present when computed)."""


@dataclass(frozen=True)
class LedgerEvent(Record):
    """One line of ``ledger.jsonl``: a run's change of status
    (:meth:`~autoscale_data.runner.ledger.Ledger.records` folds them into one state per run). Each status
    writes the fields it has; the others are left out."""

    run_id: str
    """The run's id."""
    status: str
    """``pending``, ``submitted``, ``running``, ``done`` or ``failed``."""
    time: float = 0.0
    """When it was written (seconds since the epoch, to the millisecond)."""
    name: str = omitted(default="")
    """``kind@scale label sSEED`` (pending and done)."""
    attempt: int | None = omitted(default=None)
    """Which attempt of the run (submitted and running)."""
    pid: int | None = omitted(default=None)
    """The process that trains it (running)."""
    executor: str = omitted(default="")
    """Where it was handed (submitted and running)."""
    job_id: str = omitted(default="")
    """Its job there (submitted and running)."""
    reason: str = omitted(default="")
    """Why it failed (failed)."""
    terminal: bool | None = omitted(default=None)
    """Whether the failure is final, never retried (failed)."""
    mean_loss: float | None = omitted(default=None)
    """The finished run's final mean validation loss (done)."""
    total_tokens: int | None = omitted(default=None)
    """Tokens it trained (done)."""
    wall_time_s: float | None = omitted(default=None)
    """Its training and evaluation time (done)."""
    device: str | None = omitted(default=None)
    """What it trained on (done)."""
    tokens_per_s: float | None = omitted(default=None)
    """Its training throughput (done)."""
