"""The report's declared shape: :class:`Report` and its parts, records of :mod:`autoscale_data._records`.

``Report.from_json`` reads ``OUT/report.json`` back, older ones included (keys that later versions added take
their empty value); a missing or badly typed key raises ``ValueError`` naming its path
(``targets.autoscale.losses``). The parts the fits write are their files' records.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..._records import Record, from_json, inline, omitted, required
from ...solver import BootstrapResult, DDOResult
from ...solver.vocabulary import DEFAULT_OBJECTIVE, objective_key
from .. import layout
from ..records import BootstrapUnavailable, ProjectionFile

__all__ = [
    "AnytimeComparison",
    "Comparison",
    "Curve",
    "CurveComparison",
    "CurvePoint",
    "Downstream",
    "DownstreamRow",
    "ExtensionResult",
    "FailedRun",
    "MeanStd",
    "MethodCost",
    "MethodRow",
    "MixResult",
    "ReferenceLoss",
    "Report",
    "TargetResult",
    "TaskMean",
    "Throughput",
    "TokensSaved",
    "TrainCurve",
    "Verdict",
    "VersusUniform",
]

# ------------------------------------------------------------------------------------------ parts
@dataclass(frozen=True)
class MeanStd(Record):
    """A value over seeds: ``{"mean", "std", "n"}``
    (:func:`~autoscale_data.runner.reporting.metrics.mean_std`)."""

    mean: float
    """Mean over the seeds."""
    std: float
    """Standard deviation over the seeds (ddof 1; 0 with one seed)."""
    n: int
    """Number of seeds."""

    def text(self, digits: int = 4) -> str:
        """``mean ± std`` to ``digits`` decimals (the mean alone with one seed)."""
        return f"{self.mean:.{digits}f} ± {self.std:.{digits}f}" if self.n > 1 else f"{self.mean:.{digits}f}"


@dataclass(frozen=True)
class MixResult(Record):
    """One mix at one budget, seed-averaged: a row of a proxy table (``proxies[scale][label]``)."""

    losses: dict[str, MeanStd]
    """Final validation loss per domain."""
    tokens: int
    """Training tokens of the run (the first seed's ``total_tokens``)."""
    seeds: list[int]
    """Training seeds averaged over, in the order of the runs."""
    mean_loss: MeanStd | None = omitted(default=None)
    """Final value of the objective ``mean_loss`` (``None`` under the other objective)."""
    mean_ppl: MeanStd | None = omitted(default=None)
    """Final value of the objective ``mean_ppl`` (``None`` under the other objective)."""

    @property
    def objective_value(self) -> MeanStd:
        """Final value of the objective, whichever it is (the report checks its key is the report's)."""
        value = self.mean_loss if self.mean_ppl is None else self.mean_ppl
        if value is None:
            raise ValueError("a mix result without an objective value (neither mean_loss nor mean_ppl)")
        return value


@dataclass(frozen=True)
class Curve(Record):
    """The seed-mean validation curve of a target mix
    (:func:`~autoscale_data.runner.reporting.metrics.mean_curve`)."""

    tokens: list[float]
    """Training tokens at each evaluation point shared by all seeds."""
    mean: list[float]
    """Mean over seeds of the objective at each point."""
    std: list[float]
    """Standard deviation over seeds at each point (0 with one seed)."""
    n: int
    """Number of seeds."""


@dataclass(frozen=True)
class TrainCurve(Record):
    """Seed-mean per-domain training loss at each evaluation point of a target mix.

    In JSON ``{"tokens": [...], domain: [...]}``, or ``{}`` for runs that did not record it.
    """

    tokens: list[float] = omitted(when=lambda c: not c.tokens and not c.losses, required=bool,
                                  default_factory=list)
    """Training tokens at each evaluation point (empty: not recorded; required in a non-empty object)."""
    losses: dict[str, list[float | None]] = inline(default_factory=dict)
    """Per domain, the training loss since the previous point (``None`` where no seed saw the domain)."""


@dataclass(frozen=True)
class TargetResult(MixResult):
    """One target mix at the target budget, seed-averaged (``targets[label]``)."""

    weights: dict[str, float] = required(default_factory=dict)
    """The mix trained (the first seed's weights)."""
    curve: Curve = required(default_factory=lambda: Curve([], [], [], 0))
    """Seed-mean validation curve of the objective."""
    train_curve: TrainCurve = field(default_factory=TrainCurve)
    """Seed-mean per-domain training loss along the run (empty for runs that did not record it)."""


@dataclass(frozen=True)
class CurvePoint(Record):
    """Two mixes at one evaluation point, paired by seed
    (:func:`~autoscale_data.runner.reporting.metrics.compare_curves`)."""

    tokens: float
    """Training tokens at this point."""
    reference: MeanStd
    """The reference mix's objective (the fixed AutoScale mix, or uniform)."""
    other: MeanStd
    """The other mix's objective."""
    difference: MeanStd
    """``other - reference`` per seed (negative: the other mix is better)."""
    reference_shares: dict[str, float] | None = omitted(default=None)
    """Seed-mean share of each domain in the reference's training tokens so far (when recorded)."""
    other_shares: dict[str, float] | None = omitted(default=None)
    """The same for the other mix."""
    plan_shares: dict[str, float] | None = omitted(default=None)
    """The mixture plan's optimum for these tokens (anytime comparison, past the plan's first budget)."""


@dataclass(frozen=True)
class CurveComparison(Record):
    """One mix against another at every shared evaluation point, paired by seed."""

    seeds: list[int]
    """Seeds present in both mixes."""
    points: list[CurvePoint]
    """One entry per evaluation point present in every compared curve."""


@dataclass(frozen=True)
class VersusUniform(Record):
    """A target mix minus uniform, paired by seed (``vs_uniform[label]``)."""

    curve: CurveComparison
    """Along the run, at every shared evaluation point."""
    final: dict[str, MeanStd]
    """At the end, per domain and under the objective's key."""


def _compared(data: Any) -> bool:
    """Whether an anytime comparison's JSON must hold its seeds and points: it is available, or has points."""
    return bool(data.get("available")) or "points" in data


@dataclass(frozen=True)
class AnytimeComparison(Record):
    """The anytime schedule against the fixed AutoScale mix (``anytime_vs_fixed``), or why it is missing."""

    available: bool
    """Whether there are points to compare."""
    reason: str | None = omitted(default=None)
    """Why it is not available (``None`` when it is)."""
    objective: str | None = omitted(default=None)
    """The objective's key compared (present once both mixes have finished runs)."""
    seeds: list[int] | None = omitted(default=None, required=_compared)
    """Seeds with both an ``autoscale`` and an ``autoscale_anytime`` run (``None``: not compared)."""
    points: list[CurvePoint] | None = omitted(default=None, required=_compared)
    """Reference = fixed, other = anytime, at every shared evaluation point (``None``: not compared)."""
    plan_decreasing: list[str] | None = omitted(default=None)
    """Domains whose DDO allocation decreases from N1 to N2 (the plan's monotone envelope applies)."""


def _no_data(saved: TokensSaved) -> bool:
    return saved.status == "no_data"


def _no_reverse(saved: TokensSaved) -> bool:  # the reverse comparison's keys: written only when not reached
    return saved.status != "not_reached"


@dataclass(frozen=True)
class TokensSaved(Record):
    """How many fewer tokens AutoScale needed to reach a baseline's final value
    (:func:`~.metrics.tokens_saved`); which keys the JSON holds follows from ``status``."""

    status: str
    """``reached``, ``at_first_eval`` (an upper bound on the tokens), ``not_reached`` or ``no_data``."""
    saved_fraction: float | None = None
    """``1 - T / T_b``: AutoScale reached the baseline's final value at ``T`` of the baseline's ``T_b``
    tokens."""
    baseline_final: float | None = omitted(when=_no_data, default=None)
    """The baseline's final value."""
    baseline_tokens: float | None = omitted(when=_no_data, default=None)
    """The baseline's tokens at its final evaluation."""
    autoscale_final: float | None = omitted(when=_no_data, default=None)
    """AutoScale's final value."""
    autoscale_tokens: float | None = omitted(when=_no_data, default=None)
    """AutoScale's tokens at its final evaluation."""
    tokens_to_baseline_final: float | None = omitted(when=_no_data, default=None)
    """Tokens AutoScale needed to reach the baseline's final value (``None``: not reached)."""
    signed_fraction: float | None = omitted(when=_no_data, default=None)
    """The saving, or minus ``baseline_saved_fraction`` when not reached (``None``: neither reached)."""
    baseline_tokens_to_autoscale_final: float | None = omitted(when=_no_reverse, default=None)
    """When not reached: tokens the baseline needed to reach AutoScale's final value."""
    baseline_saved_fraction: float | None = omitted(when=_no_reverse, default=None)
    """When not reached: the saving the baseline would claim against AutoScale."""
    baseline_status: str | None = omitted(when=_no_reverse, default=None)
    """When not reached: the status of that reverse comparison."""


@dataclass(frozen=True)
class Verdict(Record):
    """One mix against another beyond seed noise, paired by seed (:func:`~.metrics.paired_verdict`).

    The report gives one per target comparison (``verdicts[baseline]``, AutoScale against that
    baseline) and states it before any percentage; :func:`~.wording.comparison_verdict` words it.
    """

    method: str
    """The mix judged (``autoscale``)."""
    baseline: str
    """The mix it is compared with."""
    verdict: str
    """``better``, ``worse``, ``not_distinguishable`` or ``cannot_judge`` (fewer than two paired seeds)."""
    difference: MeanStd
    """``method - baseline`` of the final objective over the paired seeds (negative: the method is better)."""
    seeds: list[int] = required(default_factory=list)
    """The paired seeds."""
    level: float = required(default=0.95)
    """Confidence level of the interval."""
    ci_low: float | None = None
    """Lower end of the Student-t interval of the mean difference (``None`` with one seed)."""
    ci_high: float | None = None
    """Upper end of that interval."""
    method_wins: int = required(default=0)
    """Seeds on which the method's final value is lower than the baseline's."""


@dataclass(frozen=True)
class ReferenceLoss(Record):
    """One domain's reference losses on the held-out tokens the runner scores (:mod:`~.reference`)."""

    unigram: float
    """Entropy of the held-out tokens' own frequencies (nats/token): the best context-free predictor's
    loss."""
    uniform: float
    """``ln(vocab_size)``: a uniform guess's loss."""
    tokens: int
    """Held-out tokens counted (the positions a causal model predicts; every token for a masked LM)."""
    scored_tokens: float
    """Tokens one evaluation scores: ``tokens`` for a causal model; for a masked LM the expected masked
    share of them times ``eval.mlm_passes``."""


@dataclass(frozen=True)
class FailedRun(Record):
    """A run that failed and is left out of the fits."""

    run_id: str
    """The run's id (its folder under ``OUT/runs``)."""
    name: str
    """``kind@scale label sSEED``."""
    reason: str
    """The failure's reason, from its ``failure.json``."""


@dataclass(frozen=True)
class ExtensionResult(Record):
    """A finished target run extended to a larger budget (``autoscale-data extend``)."""

    run_id: str
    """The extension's id (its folder under ``OUT/runs``)."""
    label: str
    """The target mix it continues (its parent's label)."""
    seed: int
    """The parent's seed."""
    parent: str
    """The run it continues (a target run, or an earlier extension)."""
    parent_tokens: int
    """Tokens the parent had trained."""
    tokens: int
    """Tokens trained at its end, the parent's included."""
    objective_value: float
    """The objective at its end."""
    parent_value: float | None
    """The parent's objective at the parent's end (``None`` when the parent is not in the folder)."""
    lr: str
    """The learning-rate schedule of the new steps (``rewarm_decay`` or ``constant``)."""


@dataclass(frozen=True)
class Throughput(Record):
    """Training speed over the finished runs of the current plan."""

    runs: int = required(default=0)
    """Finished runs."""
    tokens_per_s_median: float | None = None
    """Median training tokens per second (``None`` without runs)."""
    data_wait_fraction_median: float | None = None
    """Median share of step time spent waiting for data."""
    data_wait_fraction_max: float | None = None
    """Largest share of step time spent waiting for data."""
    devices: list[str] = required(default_factory=list)
    """Devices the runs trained on, sorted."""
    train_hours: float = required(default=0.0)
    """Training wall time summed over the runs, in hours."""


# ------------------------------------------------------------------------------ methods compared
@dataclass(frozen=True)
class MethodCost(Record):
    """What choosing a mix cost: the runs it needed before its targets (``fits/methods.json``)."""

    runs: int
    """Runs trained to choose the mix (0: known from the stores)."""
    tokens: int
    """Their training tokens."""
    wall_s: float
    """Their training and evaluation time, summed over runs (as if one after another)."""
    tokens_ratio: float | None
    """``tokens`` over one target run's tokens."""
    wall_ratio: float | None
    """``wall_s`` over one target run's (the median of the finished target runs; ``None`` before any)."""
    flops: float | None = omitted(default=None)
    """Their training FLOPs, each run at its own model (``None``: a folder written before FLOPs were
    recorded)."""
    flops_ratio: float | None = omitted(default=None)
    """``flops`` over one target run's: the cost in target runs of compute (``None`` as ``flops``)."""


@dataclass(frozen=True)
class MethodRow(Record):
    """One mixing method in the comparison (a row of the paper's table for the user's runs)."""

    source: str
    """Where the mix comes from (the method and its paper)."""
    weights: dict[str, float] | None
    """The target mix (``None``: the method was skipped)."""
    cost: MethodCost
    """What choosing the mix cost."""
    objective_value: MeanStd | None = None
    """Final objective over the target seeds (``None``: no finished target run)."""
    per_seed: dict[str, float] = required(default_factory=dict)
    """Final objective per target seed (seed as a string)."""
    losses: dict[str, MeanStd] = required(default_factory=dict)
    """Final validation loss per domain."""
    worst_domain: str | None = None
    """The domain with the highest mean final loss."""
    vs_uniform: dict[str, Any] | None = None
    """:func:`~autoscale_data.runner.reporting.metrics.paired_verdict` of this mix against uniform, paired by
    seed, with ``per_seed`` differences (``None`` for uniform itself or without uniform runs)."""
    skipped: str | None = None
    """Why the method trained no target (``None`` when it did)."""


@dataclass(frozen=True)
class Comparison(Record):
    """Every mixing method of the plan side by side: results, tokens saved by AutoScale, and costs."""

    target_tokens: int
    """Tokens of one target run."""
    target_wall_s: float | None
    """Median wall time of the finished target runs (``None`` before any)."""
    rows: dict[str, MethodRow] = field(default_factory=dict)
    """Method (target mix label) -> its row, in plan order."""
    target_flops: float | None = omitted(default=None)
    """Training FLOPs of one target run (``None``: a folder written before FLOPs were recorded)."""


# ------------------------------------------------------------------------------ downstream tasks
@dataclass(frozen=True)
class TaskMean(Record):
    """One task's scores of one target mix over its seeds (``OUT/runs/<id>/downstream.json``)."""

    acc: MeanStd
    """Accuracy."""
    acc_norm: MeanStd
    """Length-normalised accuracy (per character)."""
    bpb: MeanStd
    """Bits per byte of the gold answer (lower is better)."""


@dataclass(frozen=True)
class DownstreamRow(Record):
    """One target mix on the zero-shot tasks: per task and averaged over tasks, mean ± std over seeds."""

    tasks: dict[str, TaskMean]
    """Task -> its scores."""
    mean_acc: MeanStd
    """Accuracy averaged over the tasks (per seed), then over seeds."""
    mean_bpb: MeanStd
    """Bits per byte averaged over the tasks (per seed), then over seeds."""
    per_seed_bpb: dict[str, float] = required(default_factory=dict)
    """Seed (a string) -> its bits per byte averaged over the tasks."""
    vs_uniform: Verdict | None = None
    """This mix against uniform on the task-mean bits per byte, paired by seed (``None`` for uniform
    itself)."""
    vs_autoscale: Verdict | None = None
    """This mix against AutoScale the same way (``None`` for AutoScale itself)."""


@dataclass(frozen=True)
class Downstream(Record):
    """The zero-shot tasks of every target mix (config ``eval.tasks``)."""

    tasks: list[str]
    """The tasks, in the config's order."""
    examples: dict[str, int]
    """Task -> questions scored per model."""
    chance: dict[str, float]
    """Task -> accuracy of a uniform guess."""
    rows: dict[str, DownstreamRow] = field(default_factory=dict)
    """Target mix -> its row (sorted by label)."""


# ------------------------------------------------------------------------------------------ report
@dataclass(frozen=True)
class Report(Record):
    """The experiment's results, as :func:`~autoscale_data.runner.reporting.report.build_report` collects
    them.

    ``to_json()`` is the content of ``OUT/report.json``; :meth:`load` reads that file back.
    """

    out_dir: str = required(default="")
    """The output folder, resolved."""
    name: str | None = None
    """The experiment's name (config ``name``)."""
    objective: str = required(default=DEFAULT_OBJECTIVE)
    """The DDO objective (config ``ddo.objective``); :attr:`objective_key` names its JSON key."""
    domains: list[str] = required(default_factory=list)
    """Domain names, in the stores' order."""
    failed_runs: list[FailedRun] = required(default_factory=list)
    """Runs that failed (left out of the fits)."""
    stale_runs: int = 0
    """Runs in the folder that belong to an earlier config (not reported)."""
    target_budget: int | None = None
    """The target budget in tokens (config ``target.budget``)."""
    proxies: dict[str, dict[str, MixResult]] = required(default_factory=dict)
    """DDO proxies: budget (a string, ascending) -> run label -> seed-averaged result."""
    ddo: dict[str, DDOResult] = required(default_factory=dict)
    """DDO fit per budget (a string), ``fits/ddo_<N>.json`` (weights, allocation_tokens, status, aar …)."""
    bootstrap: dict[str, BootstrapResult | BootstrapUnavailable] = required(default_factory=dict)
    """Bootstrap per budget, ``fits/bootstrap_<N>.json`` (available, ci_low, ci_high, method …)."""
    projection: ProjectionFile | None = None
    """The projection to the target budget, ``fits/projection.json`` (``None`` before the fits)."""
    target_mixes: dict[str, dict[str, float]] | None = None
    """Target mix label -> weights, as ``fits/target_mixes.json`` holds them (``None`` before the fits)."""
    targets: dict[str, TargetResult] = required(default_factory=dict)
    """Finished target mixes by label (sorted)."""
    missing_targets: list[str] = required(default_factory=list)
    """Target mixes of the plan without a finished run."""
    anytime_vs_fixed: AnytimeComparison | None = None
    """The anytime schedule against the fixed AutoScale mix (``None`` when not asked for)."""
    vs_uniform: dict[str, VersusUniform] = field(default_factory=dict)
    """Each target mix minus uniform, paired by seed (empty without uniform runs)."""
    tokens_saved: dict[str, TokensSaved] = required(default_factory=dict)
    """Baseline label -> tokens AutoScale saved, on the seed-mean curves."""
    tokens_saved_per_seed: dict[str, dict[str, TokensSaved]] = field(default_factory=dict)
    """Baseline label -> seed (a string) -> tokens saved on that seed's own pair of curves."""
    throughput: Throughput = required(default_factory=Throughput)
    """Training speed of the finished runs."""
    extensions: list[ExtensionResult] = field(default_factory=list)
    """Target runs extended to larger budgets (``autoscale-data extend``), by label, seed and budget."""
    comparison: Comparison | None = omitted(default=None)
    """Every mixing method side by side with its cost (``None`` for a folder without
    ``fits/methods.json``)."""
    plots: list[str] | None = omitted(default=None)
    """Plot files written, relative to the output folder (``None`` until :func:`write_report` draws them)."""
    repetition: dict[str, Any] | None = omitted(default=None)
    """Each target mix's epochs and effective tokens per domain and the supply flags, as
    ``fits/repetition.json`` holds them (``None`` before the fits)."""
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    """Baseline label -> AutoScale against it beyond seed noise (paired by seed); stated before tokens
    saved."""
    reference_losses: dict[str, ReferenceLoss] = field(default_factory=dict)
    """Domain -> the held-out data's unigram and uniform-guess losses (empty for folders of older
    versions)."""
    not_beating_unigram: dict[str, list[str]] = field(default_factory=dict)
    """Target mix -> domains whose final validation loss is not below the domain's unigram loss."""
    downstream: Downstream | None = omitted(default=None)
    """The zero-shot tasks of every target mix (``None`` without ``eval.tasks``)."""

    def __post_init__(self) -> None:
        # the fits' parts may be given as their files' JSON (what fit_all returns): read them as their
        # records;
        # the proxies in budget order (a string key sorts 16384 before 4096)
        parts = {"ddo": {s: _as(DDOResult, f) for s, f in self.ddo.items()},
                 "bootstrap": {s: _as(BootstrapResult | BootstrapUnavailable, b)
                               for s, b in self.bootstrap.items()},
                 "projection": None if self.projection is None else _as(ProjectionFile, self.projection),
                 "proxies": dict(sorted(self.proxies.items(),
                                        key=lambda kv: _budget(kv[0], f"proxies.{kv[0]}")))}
        for name, value in parts.items():
            object.__setattr__(self, name, value)
        mixes = {f"targets.{label}": t for label, t in self.targets.items()}
        mixes.update({f"proxies.{s}.{label}": m for s, rows in self.proxies.items()
                      for label, m in rows.items()})
        for path, mix in mixes.items():  # each mix holds its objective under the report's objective key
            if getattr(mix, self.objective_key) is None:
                raise ValueError(f"key '{path}.{self.objective_key}' is missing")

    @property
    def objective_key(self) -> str:
        """The key that holds the objective in the mix results: ``"mean_ppl"`` or ``"mean_loss"``."""
        return objective_key(self.objective)

    @classmethod
    def load(cls, out_dir: str | os.PathLike[str]) -> Report:
        """Read ``OUT/report.json`` (written by :func:`~autoscale_data.runner.reporting.report.write_report`).

        Raises:
            FileNotFoundError: the folder has no report yet.
            ValueError: the file is not JSON, or a key is missing or of the wrong type.
        """
        path = Path(out_dir) / layout.REPORT_JSON
        if not path.is_file():
            raise FileNotFoundError(f"{os.fspath(path)!r} does not exist: run `autoscale-data report` first")
        try:
            report: Report | None = layout.read(out_dir, layout.REPORT_JSON, where="")
        except ValueError as e:
            raise ValueError(f"{os.fspath(path)!r}: {e}") from None
        if report is None:
            raise ValueError(f"{os.fspath(path)!r} is not valid JSON")
        return report


def _as(record: Any, value: Any) -> Any:
    return value if isinstance(value, record) else from_json(record, value)


def _budget(scale: str, path: str) -> int:
    try:
        return int(scale)
    except ValueError:
        raise ValueError(f"report key {path!r} is invalid: expected a budget in tokens (an "
                         "integer)") from None
