"""From finished proxy runs to the AutoScale mix: the solver's ``fit_ddo``, ``bootstrap_ddo``,
``project_all`` and ``MixturePlan`` applied to the ledger's results (nothing re-implemented here);
:class:`FitsFolder` is what they found and :func:`projection_summary` the schema of
``fits/projection.json``."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..._io import atomic_write_json
from ..._records import Record
from ...solver import BootstrapResult, CandidateError, DDOResult, MixturePlan, RobustProjection
from ...solver.vocabulary import JOINT, OBSERVED, ROBUST
from .. import layout
from ..config import RunnerConfig
from ..ledger import FAILED, Ledger
from ..planning.data import DomainInfo
from ..planning.repetition import repetition_law
from ..planning.specs import RunSpec
from ..records import BootstrapUnavailable, MixturePlanError, ProjectionFile
from ..reporting.wording import bounds_moved

if TYPE_CHECKING:
    from ...solver import Projections

__all__ = ["BOOTSTRAP_REPLICATES", "FitsFolder", "fit_all", "projection_summary", "proxy_table"]

BOOTSTRAP_REPLICATES = 400


@dataclass(frozen=True)
class FitsFolder(Record):
    """What :func:`fit_all` found: the records of the files it wrote under ``fits/``, and the plan."""

    ddo: dict[int, DDOResult]
    """Per proxy budget, the DDO fit (``ddo_<N>.json``)."""
    bootstrap: dict[int, BootstrapResult | BootstrapUnavailable]
    """Per proxy budget, the bootstrap verdict (``bootstrap_<N>.json``)."""
    projection: ProjectionFile
    """The projections to the target and the target mix (``projection.json``, see
    :func:`projection_summary`)."""
    plan: MixturePlan | None
    """The mixture plan of the projection used (``mixture_plan.json``); ``None`` when none could be fitted."""

    @property
    def method(self) -> str:
        """The projection that set the target mix (``ddo.projection``)."""
        return self.projection.method

    @property
    def weights(self) -> dict[str, float]:
        """The target mix (the projection's weights with ``ddo.min_weight`` / ``max_weight`` applied)."""
        return dict(self.projection.weights)


def proxy_table(ledger: Ledger, specs: Sequence[RunSpec], scale: int) -> Any:
    """The solver's ``RunTable`` of the finished runs among ``specs``.

    Diverged or crashed runs are left out with a warning. If what is left cannot support a fit
    (no base run, or a domain with no finished up or down perturbation) the error names the
    missing runs.

    Raises:
        ValueError: too few runs to fit.
    """
    from ...solver import Run, RunTable

    records = ledger.records()
    runs, covered, missing = [], set(), []
    for spec in specs:
        result = ledger.result(spec.run_id)
        if result is None:
            rec = records.get(spec.run_id)
            state = f"{rec.status}{': ' + rec.reason if rec and rec.reason else ''}" if rec else "never started"
            missing.append(f"{spec.name} ({spec.run_id}, {state})")
            if rec is not None and rec.status == FAILED:
                warnings.warn(f"run {spec.name} ({spec.run_id}) failed and is left out of the DDO fit at "
                              f"{scale}: {rec.reason}", stacklevel=2)
            continue
        runs.append(Run(spec.run_id, tokens={d: float(v) for d, v in result.tokens.items()},
                        loss=dict(result.losses), seed=spec.seed, label=spec.label))
        covered.add(spec.label)
    lacking = sorted({s.label for s in specs} - covered)
    if lacking:
        raise ValueError(f"too few finished runs to fit DDO at budget {scale}: no finished run for "
                         f"{lacking}; missing runs: {'; '.join(missing)}")
    return RunTable(runs)


def _fit_budget(table: Any, scale: int, options: Any, out_dir: Path,
                log: Callable[[str], None]) -> tuple[DDOResult, BootstrapResult | BootstrapUnavailable]:
    """DDO and its bootstrap verdict at one budget: ``ddo_<N>.json``, ``bootstrap_<N>.json`` and a log
    line."""
    from ...solver import bootstrap_ddo, fit_ddo

    try:
        result = fit_ddo(table, options)
    except ValueError as exc:
        raise ValueError(f"DDO fit at budget {scale} failed: {exc}") from None
    atomic_write_json(out_dir / layout.per_budget(layout.DDO, scale), result.to_json())
    boot: BootstrapResult | BootstrapUnavailable
    try:
        boot = bootstrap_ddo(table, options, n_boot=BOOTSTRAP_REPLICATES, point=result)
    except ValueError as exc:
        boot = BootstrapUnavailable(reason=str(exc))
    atomic_write_json(out_dir / layout.per_budget(layout.BOOTSTRAP, scale), boot.to_json())
    weights = ", ".join(f"{d}={w:.3f}" for d, w in result.weights.items())
    verdict = ("bootstrap: "
               f"{boot.reason}" if isinstance(boot, BootstrapUnavailable) else boot.summary).splitlines()[-1]
    log(f"DDO at {scale:,} tokens ({len(table)} runs, AAR {result.aar:.4f}, {result.status}): {weights}; "
        f"{verdict.strip()}")
    if result.identifiability is not None:
        log(f"  {result.identifiability.describe()}")
    return result, boot


def _fit_plan(config: RunnerConfig, domains: DomainInfo, projections: Projections, caps: dict[str, float],
              out_dir: Path, log: Callable[[str], None]) -> MixturePlan | None:
    """The mixture plan of the projections (``mixture_plan.json``), or ``None``
    (``mixture_plan_error.json``)."""
    budgets = list(config.ddo.budgets)
    try:
        # the tokenizer's fingerprint, not where it lay: an anytime run's id hashes the plan, and a copied
        # folder keeps it
        plan = MixturePlan.from_scales(projections.plan_scales(first_budget=budgets[0]),
                                       tokenizer=domains.tokenizer_fingerprint,
                                       token_caps=caps, max_epochs=config.max_epochs, allow_decreasing=True,
                                       metadata={"objective": config.ddo.objective, "budgets": budgets,
                                                 "projection": config.ddo.projection,
                                                 "chosen": projections.used})
        if plan.path.decreasing:
            log(f"the DDO allocation of {plan.path.decreasing} decreases from {budgets[0]:,} to "
                f"{budgets[-1]:,} tokens (Theorem 1 rules that out: a sign of noisy proxies); the mixture "
                "plan keeps the projection and the anytime schedule follows its monotone envelope")
        plan.save(out_dir / layout.MIXTURE_PLAN)
        (out_dir / layout.MIXTURE_PLAN_ERROR).unlink(missing_ok=True)  # from an earlier, failed fit
        return plan
    except ValueError as exc:
        (out_dir / layout.MIXTURE_PLAN).unlink(missing_ok=True)  # a plan of earlier results is stale
        atomic_write_json(out_dir / layout.MIXTURE_PLAN_ERROR, MixturePlanError(error=str(exc)).to_json())
        log(f"no mixture plan saved: {exc}")
        return None


def _log_choice(projections: Projections, log: Callable[[str], None]) -> None:
    """What ``ddo.projection: auto`` chose and why, and how far the robust projection moved the mix."""
    robust = projections.robust
    if projections.selection is not None:
        log(f"ddo.projection auto chose {projections.used}: {projections.selection.reason}")
        for line in projections.selection.backtest_lines():
            log(f"  {line}")
    if isinstance(robust, RobustProjection):
        used = "sets the target mix" if projections.used == ROBUST else "reported only"
        log(f"robust projection ({used}; trends shrunk by their identifiability range): moves the geometric "
            f"mix by total variation {robust.moved['total_variation']:.3f}")


def _log_mix(projections: Projections, weights_used: Mapping[str, float], target: int,
             log: Callable[[str], None]) -> None:
    """The projections' warnings and failures, and the target mix with how it was found."""
    geometric, joint, robust = projections.geometric, projections.joint, projections.robust
    for w in geometric.warnings if not isinstance(geometric, CandidateError) else []:
        log(f"projection warning: {w}")
    for name, error in projections.failures().items():
        log(f"the {name} projection (reported only) failed: {error}")
    weights = ", ".join(f"{d}={w:.3f}" for d, w in weights_used.items())
    how = {JOINT: lambda: f"joint law, AAR {joint.aar:.4f}",
           ROBUST: lambda: f"robust, t={robust.t:.3f}, moved {robust.moved['total_variation']:.3f} from "
                           "geometric",
           OBSERVED: lambda: f"not projected: {projections.observed.describe()}, as is",
           }.get(projections.used, lambda: f"geometric, t={geometric.t:.3f}")()
    log(f"AutoScale mix at {target:,} tokens ({how}): {weights}")


def fit_all(config: RunnerConfig, domains: DomainInfo, ledger: Ledger,
            proxies: Mapping[int, Sequence[RunSpec]],
            out_dir: Path, *, log: Callable[[str], None] = print) -> FitsFolder:
    """DDO at every budget, bootstrap verdicts, the projections to the target and the mixture plan.

    The target mix comes from ``config.ddo.projection`` (``auto``: the choice, its reason and the backtest's
    scores are in ``projection.json``'s ``selection``); the other projections are computed and reported too
    (all by the solver's :func:`~autoscale_data.solver.projections.project_all`, which also gives the plan's
    scales).

    Writes ``runs_<N>.csv``, ``ddo_<N>.json``, ``bootstrap_<N>.json``, ``projection.json`` (see
    :func:`projection_summary`) and ``mixture_plan.json`` under ``out_dir`` (``mixture_plan_error.json``
    when no plan can be fitted).

    Raises:
        ValueError: too few runs, a failed DDO fit, or a failure of the projection used.
    """
    from ...solver import DDOOptions, project_all

    out_dir.mkdir(parents=True, exist_ok=True)
    ddo_cfg = config.ddo
    caps = {d: float(v) for d, v in domains.train_tokens.items()}
    options = DDOOptions(objective=ddo_cfg.objective, min_weight=ddo_cfg.min_weight,
                         max_weight=ddo_cfg.max_weight,
                         token_caps=caps, max_epochs=config.max_epochs, law=ddo_cfg.law,
                         # a mapping: the objective is that weighted sum
                         val_domains=ddo_cfg.objective_weights)
    tables: dict[int, Any] = {}
    results: dict[int, DDOResult] = {}
    boots: dict[int, BootstrapResult | BootstrapUnavailable] = {}
    for scale, specs in proxies.items():
        tables[scale] = proxy_table(ledger, specs, scale)
        tables[scale].to_csv(out_dir / layout.per_budget(layout.RUNS_CSV, scale, ".csv"))
        results[scale], boots[scale] = _fit_budget(tables[scale], scale, options, out_dir, log)
    budgets = list(ddo_cfg.budgets)
    # every budget: with three or more, ``auto`` backtests (refits without N2 and scores each candidate there)
    projections = project_all([tables[n] for n in budgets], config.target.budget, options,
                              method=ddo_cfg.projection,
                              optima=[results[n] for n in budgets], direct=True)
    _log_choice(projections, log)
    summary = projection_summary(projections, ddo_cfg.min_weight, ddo_cfg.max_weight, log=log)
    # effective tokens (repetition.py)
    summary = repetition_law(config, domains, tables, options, summary, log=log)
    atomic_write_json(out_dir / layout.PROJECTION, summary)
    plan = _fit_plan(config, domains, projections, caps, out_dir, log)
    _log_mix(projections, summary["weights"], config.target.budget, log)
    return FitsFolder(ddo=results, bootstrap=boots,
                      projection=ProjectionFile.from_json(summary, layout.PROJECTION), plan=plan)


def projection_summary(projections: Projections, min_weight: float = 0.0, max_weight: float = 1.0, *,
                       log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The content of ``fits/projection.json``: the solver's projections and the target mix.

    :meth:`~autoscale_data.solver.projections.Projections.record` (all three projections, the one
    used and its ``weights``), with ``ddo.min_weight`` / ``max_weight`` applied to the target mix:
    ``weights`` are the bounded ones, ``unbounded_weights`` the projection's own, ``bounds_applied``
    ``{domain: [before, after]}`` the domains moved and ``weight_bounds`` the bounds (a move is logged).
    """
    from ...solver import apply_weight_bounds

    summary = projections.record().to_json()
    raw = {d: float(w) for d, w in summary["weights"].items()}
    bounded = apply_weight_bounds(raw, min_weight, max_weight)
    moved = {d: [raw[d], bounded[d]] for d in raw if abs(raw[d] - bounded[d]) > 1e-9}
    summary.update(weights=bounded, unbounded_weights=raw, bounds_applied=moved,
                   weight_bounds=[min_weight, max_weight])
    if moved and log is not None:
        log(f"the {summary['method']} {bounds_moved(ProjectionFile.from_json(summary)).removeprefix('the ')}")
    return summary
