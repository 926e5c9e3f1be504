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

from .._records import Record, fields_to_json, omitted
from ..solver.vocabulary import GEOMETRIC, JOINT, OBJECTIVES, OBSERVED, ROBUST
from .planning.plan import RunSpec

__all__ = [
    "BootstrapFile",
    "CheckpointPointer",
    "DDOFile",
    "EvalPoint",
    "FinalState",
    "JobFile",
    "LedgerEvent",
    "MixturePlanError",
    "PlanFile",
    "ProjectionFile",
    "RunExtension",
    "RunFailure",
    "RunResult",
]


@dataclass(frozen=True)
class EvalPoint(Record):
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

    def value(self, key: str) -> float:
        """The objective under its key: :attr:`mean_loss` or :attr:`mean_ppl`."""
        return float(_objective(self, key))


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
    """How the mix goes on after the parent's end (the spec's ``extension.mix``: ``same``, ``plan`` or ``anytime``)."""
    lr: dict[str, Any]
    """The learning-rate schedule of the new steps (the spec's ``extension.lr``)."""


@dataclass(frozen=True)
class RunResult(Record):
    """A finished run: the content of ``OUT/runs/<run_id>/result.json``.

    Every field but ``run_id`` has a default so that results of earlier versions (and hand-written
    ones) that lack a key still read.
    """

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
    schedule: str = "fixed"
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

    def value(self, key: str) -> float:
        """The final objective under its key: :attr:`mean_loss` or :attr:`mean_ppl`."""
        return float(_objective(self, key))


def _objective(record: Any, key: str) -> Any:
    if key not in OBJECTIVES:
        raise ValueError(f"objective key {key!r} is invalid: expected one of {OBJECTIVES}")
    return getattr(record, key)


@dataclass(frozen=True)
class PlanFile(Record):
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
        """Every run id of the plan (proxies, targets, the methods' runs and extra runs); ``None``: an empty plan
        (no ``plan.json``)."""
        specs = [*(s for specs in (self.proxies or {}).values() for s in specs), *(self.targets or []),
                 *(self.extra or []), *(self.method_runs or [])]
        if not specs and self == PlanFile():
            return None
        return {s.run_id for s in specs}


@dataclass(frozen=True)
class JobFile(Record):
    """What ``python -m autoscale_data.runner.training.train --job PATH`` needs: ``OUT/runs/<run_id>/job.json``."""

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
class DDOFile(Record):
    """The DDO fit at one proxy budget: ``OUT/fits/ddo_<N>.json``, as
    :meth:`~autoscale_data.solver.ddo.DDOResult.to_json` writes it (``None``: a key the file lacks)."""

    weights: dict[str, float]
    """The optimal mix at the budget."""
    budget_tokens: float | None = None
    """The proxy budget."""
    fit: dict[str, dict[str, float]] | None = None
    """Each domain's fitted law: ``a``, ``b``, ``c`` (and ``amplitude`` for the 4-parameter law)."""
    aar: float | None = None
    """Average absolute relative error of the fits."""
    pinned: list[str] | None = None
    """Domains pinned to their bound."""
    loo_aar: float | None = None
    """Leave-one-out AAR (``None`` where it cannot be computed)."""
    allocation_tokens: dict[str, float] | None = None
    """The optimal tokens per domain."""
    multipliers: dict[str, float] | None = None
    """Optimal tokens over the base run's, per domain."""
    base_tokens: dict[str, float] | None = None
    """The base run's tokens per domain."""
    bounds_hit: dict[str, Any] | None = None
    """Domains at a weight or supply bound."""
    status: str | None = None
    """The optimiser's status (``optimal`` …)."""
    kkt_residual: float | None = None
    """How far the optimum is from the KKT conditions."""
    objective: str | None = None
    """The objective optimised."""
    law: str | None = None
    """The per-domain law (``3p`` / ``4p``)."""
    predicted_change: float | None = None
    """The objective's predicted change from the base mix."""
    base_runs: list[str] | None = None
    """Run ids of the base runs."""
    fit_mode: str | None = None
    """How the laws were fitted."""
    identifiability: dict[str, Any] | None = None
    """The solver's identifiability of the optimum (its own JSON; ``summary`` words it)."""
    diagnostics: dict[str, dict[str, Any]] | None = None
    """Each domain's fit diagnostics (the solver's JSON)."""


@dataclass(frozen=True)
class BootstrapFile(Record):
    """One proxy budget's bootstrap verdict: ``OUT/fits/bootstrap_<N>.json``.

    ``{"available": false, "reason": ...}`` when it could not run; else ``available``, the solver's
    :meth:`~autoscale_data.solver.bootstrap.BootstrapResult.to_json` fields and ``summary``.
    """

    available: bool
    """Whether the bootstrap ran."""
    reason: str | None = None
    """Why it did not (``None`` when it did)."""
    weights: dict[str, float] | None = None
    """The point estimate: DDO's weights."""
    ci_low: dict[str, float] | None = None
    """Lower end of each weight's interval."""
    ci_high: dict[str, float] | None = None
    """Upper end of each weight's interval."""
    base_weights: dict[str, float] | None = None
    """The base mix of the proxies."""
    contains_base: dict[str, bool] | None = None
    """Per domain, whether the interval holds the base weight."""
    distinguishable_from_base: bool | None = None
    """Whether some interval leaves the base weight out."""
    method: str | None = None
    """The bootstrap's resampling (``seeds``, ``residuals``, ``consistent_fits`` …)."""
    noise_std: float | None = None
    """The noise scale it resampled with."""
    level: float | None = None
    """Confidence level of the intervals."""
    n_boot: int | None = None
    """Replicates drawn."""
    n_failed: int | None = None
    """Replicates whose fit failed."""
    summary: str | None = None
    """The verdict in words."""

    # Custom write only: the two shapes above (an unavailable bootstrap has ``reason`` alone).
    def to_json(self) -> dict[str, Any]:
        if not self.available:
            return {"available": False, "reason": self.reason}
        return fields_to_json(self, skip=("reason",))


@dataclass(frozen=True)
class ProjectionFile(Record):
    """The projections to the target budget and the target mix: ``OUT/fits/projection.json``.

    The top level is :meth:`~autoscale_data.solver.projections.Projections.to_json` (the candidate
    used) with the runner's weight bounds and the effective-token law added
    (:func:`~.fitting.projection_summary`, :func:`~.repetition.repetition_law`). Each candidate
    (``geometric``, ``joint``, ``robust``, ``observed``) and the ``selection`` are the solver's own
    JSON (``{"error": ...}`` for a failed one); the solver's records read them
    (e.g. :meth:`~autoscale_data.solver.joint.JointFit.from_json`), so they stay mappings here.
    ``None``: a key the file lacks (the candidates, ``t``, ``residual``, ``disagreement`` and
    ``repetition_law`` are written only when they exist).
    """

    weights: dict[str, float]
    """The target mix (``ddo.min_weight`` / ``max_weight`` applied)."""
    budget_tokens: float
    """The target budget."""
    method: str = GEOMETRIC
    """The candidate that set the target mix (``geometric`` when the file names none)."""
    requested_method: str | None = None
    """``ddo.projection`` as configured (``auto`` lets the selection choose)."""
    allocation_tokens: dict[str, float] | None = None
    """The used candidate's tokens per domain."""
    warnings: list[str] | None = None
    """The used candidate's warnings."""
    geometric: dict[str, Any] | None = omitted(default=None)
    """The Theorem-1 path through the DDO optima (the solver's JSON)."""
    joint: dict[str, Any] | None = omitted(default=None)
    """One law fitted to both budgets' runs (the solver's JSON)."""
    robust: dict[str, Any] | None = omitted(default=None)
    """The geometric path with each trend shrunk by its uncertainty (the solver's JSON)."""
    observed: dict[str, Any] | None = omitted(default=None)
    """DDO at the larger proxy budget as is (the solver's JSON)."""
    selection: dict[str, Any] | None = None
    """``ddo.projection: auto``: what was chosen and why (the solver's JSON); ``None`` otherwise."""
    notes: list[str] | None = None
    """Notes on the candidates."""
    t: float | None = omitted(default=None)
    """The geometric path's exponent (when it exists)."""
    residual: float | None = omitted(default=None)
    """The geometric path's residual (when it exists)."""
    disagreement: dict[str, float] | None = omitted(default=None)
    """Distance between the joint and the geometric weights (when both exist)."""
    unbounded_weights: dict[str, float] | None = None
    """The projection's own weights, before the bounds."""
    bounds_applied: dict[str, list[float]] | None = None
    """Domains the bounds moved: ``[before, after]``."""
    weight_bounds: list[float] | None = None
    """``[ddo.min_weight, ddo.max_weight]``."""
    repetition_law: dict[str, Any] | None = omitted(default=None)
    """The effective-token law (:class:`~.repetition.RepetitionLaw`'s JSON; present when computed)."""
    trust: dict[str, Any] | None = omitted(default=None)
    """What the runs say about the answer: noise and seeds needed, edge of the grid, implausible parameters
    (:class:`~autoscale_data.solver.Trust`'s JSON; files written before it lack it)."""

    def candidate(self, name: str) -> dict[str, Any]:
        """The solver's JSON of candidate ``name`` (``geometric``, ``joint``, ``robust``, ``observed``); ``{}`` when
        it was not computed."""
        if name not in _CANDIDATES:
            raise ValueError(f"projection candidate {name!r} is invalid: expected one of {_CANDIDATES}")
        return getattr(self, name) or {}


_CANDIDATES = (GEOMETRIC, JOINT, ROBUST, OBSERVED)


@dataclass(frozen=True)
class LedgerEvent(Record):
    """One line of ``ledger.jsonl``: a run's change of status (:meth:`~autoscale_data.runner.ledger.Ledger.records`
    folds them into one state per run). Each status writes the fields it has; the others are left out."""

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
