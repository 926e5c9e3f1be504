"""``method="auto"`` with three budgets or more: every candidate scored on one footing at the held-back
budget, and the joint law validated there before its predicted gain at the target may count.

Every candidate (the geometric, joint and robust projections and the observed mix) is computed again from all
budgets but the largest and asked for that largest budget, ``N2`` (the held-back budget). Then:

* **Like with like.** Every candidate, the observed mix included, is scored one way
  (:func:`score_candidates`): by the DDO law fitted at ``N2`` (:func:`~.select.law_objective`) where ``N2`` is
  a DDO design and the observed mix lies inside the design's range, or below it only (then by a lower bound:
  the law at the range's lowest tokens for those domains, as it falls with each domain's tokens; a projection
  above the range only by an upper bound, so a projection's gain over the observed mix is never overstated by
  a bound); otherwise by a run of ``N2``'s total tokens (within ``TOTAL_TOL``) whose shares lie within the
  distance tolerance of the candidate (L1). The tolerance (:func:`distance_tolerance`) is the distance over
  which the objective moves by at most ``BIAS_FRACTION`` of the noise of one run, ``BIAS_FRACTION · noise /
  slope``, capped at ``MAX_DISTANCE``; ``slope`` is the largest change of the objective per unit of L1
  distance on the simplex (half the spread of its gradient over the shares), from the DDO law at ``N2`` where
  it is a design, else from a linear fit of the objective on the shares over the runs of ``N2``'s total. A
  candidate that cannot be scored that way (outside the design's range with no bound from its side while the
  observed mix is scored by the law; no run of the same total near it) cannot be chosen, and its ``note``
  names the nearest run and the distance. A run of another total (a DDO design's perturbation runs) never
  scores a candidate.
* **Route 1, a backtest win:** the projection's score beats the observed mix's by more than
  :func:`~.select.backtest_margin` over the projections scored and the two routes (Bonferroni).
* **Route 2, a validated law:** the joint law fitted without ``N2`` predicts ``N2``'s runs within the noise
  of one run and its own uncertainty (:func:`check_law`: a predictive F-test at ``VALIDATION_ALPHA``, the
  noise estimated from the smaller budgets alone, the law's residual there on its degrees of freedom) with
  plausible parameters; the joint law fitted to every budget then predicts the projection's gain over the
  observed mix at the target (:mod:`.gain`) beyond ``z`` of its standard deviations (the one-sided quantile of
  route 1's margin: a test of the gain at the target) and beyond ``GAIN_NOISE`` times the noise of one run as
  that law sees it (its residual, or its replicates' sd where larger: a gain worth having exceeds the noise,
  where the floor before was twice a noise estimate that, with one seed, is the misfit of a power law in the
  budget); and the backtest does not show the projection losing at ``N2`` beyond route 1's margin (so the
  observed mix must be scored like with like, and, where the backtest scores by the law, the projection too:
  one the law cannot score lies outside the range ``N2``'s runs cover). Route 1 compares answers one budget
  step apart and cannot see a shift that pays only at 16 times ``N2``; route 2 can, and the held-back budget
  decides whether the law may be followed that far.
* **The trust checks feed the decision** (:func:`untrusted`): a projection whose mix at the target lies beyond
  the shares the runs cover, or that rests on a joint law with implausible parameters (:mod:`.trust`), is
  chosen only by route 1 with a score from a run (a run near it vouches for it; a law does not vouch beyond
  its range).

Among the projections that pass, the largest predicted gain (route 2) wins, else the largest backtest gain
(route 1). Otherwise the observed mix, and the reason says why each projection was not chosen.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from scipy.stats import chi2, norm
from scipy.stats import f as f_dist

from .ddo import DDOOptions, DDOResult
from .design import run_objective
from .gain import GainEstimate, predicted_values
from .gain import GainLaw as _Law
from .joint import JointFit
from .runs import RunTable
from .scores import SCORE_LAW, SCORE_RUN, BacktestScore, CandidateError, LawCheck, Selection
from .select import (
    BACKTEST_ALPHA,
    LABEL_TOL,
    _base_mean,
    _shares,
    backtest_margin,
    law_noise,
    law_objective,
    table_budget,
)
from .trust import edge_check, parameter_check, run_noise
from .vocabulary import JOINT, MEAN_PPL, OBSERVED, PROJECTIONS

__all__ = [
    "BIAS_FRACTION",
    "MAX_DISTANCE",
    "ROUTES",
    "TOTAL_TOL",
    "VALIDATION_ALPHA",
    "check_law",
    "choose_by_backtest",
    "distance_tolerance",
    "score_candidates",
    "untrusted",
]

TOTAL_TOL = 0.05  # a run scores a candidate only if its total tokens are within this fraction of the budget's
MAX_DISTANCE = 0.10  # the L1 distance tolerance never exceeds this (a linear slope holds only nearby)
# a run stands in for a candidate where the slope moves the objective by at most this x noise
BIAS_FRACTION = 0.5
# the law fitted without N2 passes when its predictive test on N2's runs has p >= this
VALIDATION_ALPHA = 0.05
# a validated law's predicted gain counts beyond this many times the noise of one run it sees
GAIN_NOISE = 1.0
ROUTES = 2  # a projection can win by the backtest or by the validated law: both share the test's size

ValDomains = Sequence[str] | Mapping[str, float] | None


@dataclass(frozen=True)
class _Held:
    """The held-back budget's runs as the scoring reads them."""

    table: RunTable
    budget: float
    shares: np.ndarray  # (runs, m)
    y: np.ndarray  # (runs,)
    same_total: np.ndarray  # (runs,) bool: total tokens within TOTAL_TOL of the budget

    @classmethod
    def of(cls, table: RunTable, objective: str, val_domains: ValDomains,
           budget: float | None = None) -> _Held:
        """``budget``: the table's budget where known (a DDO design's base run's total), else the median
        total."""
        budget = table_budget(table) if budget is None else float(budget)
        totals = table.tokens_matrix().sum(axis=1)
        return cls(table, budget, _shares(table), run_objective(table, objective, val_domains),
                   np.abs(totals / budget - 1.0) <= TOTAL_TOL)

    def vector(self, weights: Mapping[str, float]) -> np.ndarray:
        w = np.array([float(weights.get(d, 0.0)) for d in self.table.train_domains])
        return w / w.sum() if w.sum() > 0 else w

    def nearest(self, w: np.ndarray, among: np.ndarray) -> tuple[int, float] | None:
        """The run of ``among`` nearest to shares ``w`` (ties: lower objective, then run id) and its
        distance."""
        idx = np.flatnonzero(among)
        if idx.size == 0:
            return None
        dist = np.abs(self.shares[idx] - w[None]).sum(axis=1)
        k = min(range(idx.size), key=lambda i: (round(float(dist[i]), 12), self.y[idx[i]],
                                                 self.table.runs[idx[i]].run_id))
        return int(idx[k]), float(dist[k])


def _law_slope(fit: DDOResult, held: _Held, val_domains: ValDomains) -> float:
    """Half the spread of the DDO law's gradient over the shares, at the base mix (objective per unit of
    L1)."""
    base = _base_mean(fit, held.table, val_domains) if fit.objective == MEAN_PPL else 1.0
    grad = []
    for d in fit.domains:
        law, h = fit.fits[d], 1e-4
        per_x = float(law.predict(1.0 + h) - law.predict(1.0 - h)) / (2 * h)
        grad.append(per_x * fit.budget_tokens / fit.base_tokens[d] * base)
    return (max(grad) - min(grad)) / 2.0


def _linear_slope(held: _Held) -> float | None:
    """Half the spread of the gradient of a linear fit of the objective on the shares over the runs of the
    budget's total; None where they are too few (``m + 2`` distinct mixes needed) or do not span the
    simplex."""
    rows = held.shares[held.same_total]
    y = held.y[held.same_total]
    m = rows.shape[1]
    if len(np.unique(np.round(rows, 9), axis=0)) < m + 2:
        return None
    design = np.column_stack([np.ones(len(rows)), rows[:, :-1]])  # the last share is 1 minus the others
    coef, _, rank, _ = np.linalg.lstsq(design, y, rcond=None)
    if rank < m:
        return None
    grad = np.append(coef[1:], 0.0)
    return float(grad.max() - grad.min()) / 2.0


def distance_tolerance(held: _Held, held_fit: DDOResult | None, noise: float | None,
                       val_domains: ValDomains = None) -> tuple[float, str]:
    """How far (L1 over the shares) a run of the held-back budget's total may lie from a candidate and still
    score it (module doc), and how the tolerance was found."""
    if noise is None:
        return LABEL_TOL, (f"no noise estimate: only runs within {LABEL_TOL:g} (whole-batch rounding of one "
                           "mix) score a candidate")
    slope, source = (None, "")
    if held_fit is not None:
        slope, source = _law_slope(held_fit, held, val_domains), "the DDO law's gradient at the base mix"
    if slope is None:
        slope, source = _linear_slope(held), "a linear fit of the objective on the shares of the runs of that total"
    if slope is None:
        return LABEL_TOL, (f"too few runs of that total for a slope: only runs within {LABEL_TOL:g} "
                           "(whole-batch rounding of one mix) score a candidate")
    if slope <= 0:
        return MAX_DISTANCE, f"{source} is flat: the cap {MAX_DISTANCE:g}"
    tol = min(MAX_DISTANCE, BIAS_FRACTION * noise / slope)
    return tol, (f"{BIAS_FRACTION:g} x noise {noise:.3g} / slope {slope:.3g} ({source}), at most "
                 f"{MAX_DISTANCE:g}: a run that near moves the objective by at most {BIAS_FRACTION:g} x the "
                 "noise of one run")


def score_candidates(held: _Held, backtest: Mapping[str, Any], held_fit: DDOResult | None, tolerance: float,
                     *,
                     val_domains: ValDomains) -> tuple[dict[str, BacktestScore], str]:
    """Every backtest candidate scored one way (module doc) and the way (``"law"`` or ``"run"``); a candidate
    that failed or cannot be scored that way has no objective and a note saying why."""
    raw: dict[str, BacktestScore] = {}
    for name, c in backtest.items():
        if isinstance(c, CandidateError) or c is None:
            raw[name] = BacktestScore(note=c.error if c is not None else "not computed")
            continue
        w = held.vector(c.weights)
        near = held.nearest(w, held.same_total)
        run, dist, run_y = (None, None, None) if near is None else \
            (held.table.runs[near[0]].run_id, near[1], float(held.y[near[0]]))
        law, why = (None, "the held-back budget is not a DDO design") if held_fit is None else \
            law_objective(held_fit, held.table, c.weights, val_domains=val_domains,
                          bound="lower" if name == OBSERVED else "upper")
        raw[name] = BacktestScore(run=run, distance=dist, run_objective=run_y, law_objective=law,
                                  law_note=why)
    obs = raw.get(OBSERVED)
    by_law = obs is not None and obs.law_objective is not None
    out = {}
    for name, s in raw.items():
        if s.note and s.run is None and s.law_objective is None:
            out[name] = s
        elif by_law:
            out[name] = replace(s, objective=s.law_objective,
                                score=SCORE_LAW) if s.law_objective is not None else \
                replace(s, note="not scored: the observed mix is scored by the DDO law at the held-back "
                                f"budget and this candidate lies {s.law_note}")
        elif s.run is not None and s.distance is not None and s.distance <= tolerance:
            out[name] = replace(s, objective=s.run_objective, score=SCORE_RUN)
        else:
            out[name] = replace(s, note=_unscored_by_run(held, backtest[name], s, tolerance))
    return out, SCORE_LAW if by_law else SCORE_RUN


def _unscored_by_run(held: _Held, candidate: Any, s: BacktestScore, tolerance: float) -> str:
    """Why no run scores a candidate: the nearest run of the same total is too far, or there is none; the
    nearest run of any total is named when it is nearer (its other total disqualifies it)."""
    w = held.vector(candidate.weights)
    text = ("no run of the held-back budget's total" if s.run is None else
            f"the nearest run of the held-back budget's total, {s.run!r}, is {s.distance:.3g} away (L1), "
            f"beyond the tolerance {tolerance:.3g}")
    other = held.nearest(w, ~held.same_total)
    if other is not None and (s.distance is None or other[1] < s.distance):
        i, d = other
        ratio = float(held.table.tokens_matrix()[i].sum()) / held.budget
        text += (f"; run {held.table.runs[i].run_id!r} is nearer ({d:.3g}) but trained on {ratio:.2f}x the "
                 "budget's tokens, so it does not score it")
    return "not scored like with like: " + text


def _law_noise_for_check(law: _Law, noise: float | None) -> tuple[float, float, str] | None:
    """The noise the held-back budget's residuals are judged against, its degrees of freedom (``inf``: taken
    as known) and where it came from: the residual of the law fitted to the smaller budgets (their noise and
    the law's misfit there: the scale of ``C`` too, and what its optimiser reaches, where the replicates' pure
    error would be lower than any fit gets), else the noise of one run given (``noise``); None without either.
    Normalised units."""
    dof = law.fit.n_points - int(law.free.sum())
    if dof > 0 and np.isfinite(law.residual) and law.residual > 0:
        return law.residual, float(dof), f"the residual of the law over the smaller budgets ({dof} degrees of freedom)"
    if noise is not None and noise > 0:
        return noise / law.fit.normalizer, float("inf"), "the noise of one run"
    return None


def check_law(sub_joint: JointFit | CandidateError | None, joint: JointFit | CandidateError | None,
              tables: Sequence[RunTable],
              noise: float | None, options: DDOOptions) -> LawCheck:
    """The joint law fitted without the largest budget (``sub_joint``, on ``tables[:-1]``) against that
    budget's runs, and the plausibility of the law fitted to every budget (``joint``):
    :class:`~.scores.LawCheck`.

    A predictive test (Chow's): the residuals ``r = y - ŷ`` of the ``k`` held-back runs are judged against
    their covariance under a right law, ``σ² I + C``: the noise of one run ``σ`` on each, plus ``C``, the
    delta method's covariance of the predictions over the fit (:func:`~.gain.predicted_values`: extrapolating
    one budget step carries the fit's own uncertainty). ``σ`` is estimated from the smaller budgets alone
    (:func:`_law_noise_for_check`: the law's residual there, on its ``ν = n - p`` degrees of freedom), so ``rᵀ
    (σ² I + C)⁻¹ r / k`` is ``F(k, ν)`` under a right law (chi-square ``/ k`` with ``noise``, the noise of one
    run given, when the smaller budgets leave no degree of freedom). A law that predicts the held-back budget
    worse than it fits the smaller ones fails.
    """
    refused = _unusable_laws(sub_joint, joint, tables, options)
    if refused is not None or not isinstance(sub_joint, JointFit):
        return refused or LawCheck(False, "no joint law without the held-back budget")
    last = tables[-1]
    y = run_objective(last, options.objective, options.val_domains)
    tok = last.tokens_matrix()[:, [last.train_domains.index(d) for d in sub_joint.domains]]
    try:
        law = _Law.of(sub_joint, tables[:-1], options)
        pred, cov = predicted_values(sub_joint, tables[:-1], tok, options)
    except ValueError as exc:
        return LawCheck(False, f"the joint law without the held-back budget cannot predict its runs ({exc})")
    resid = y - pred
    rms = float(np.sqrt(np.mean(resid ** 2)))
    found = _law_noise_for_check(law, noise)
    if found is None:
        return LawCheck(False, f"no noise estimate to judge its predictions against (RMS error {rms:.3g})",
                        runs=len(y), rms=rms)
    sigma, dof, source = found[0] * sub_joint.normalizer, found[1], found[2]
    if cov is None or not np.all(np.isfinite(pred)):
        return LawCheck(False, f"its predictions of the held-back budget's runs (RMS error {rms:.3g}) rest "
                               "on what the smaller budgets do not "
                               "determine", runs=len(y), rms=rms, noise=sigma)
    k = len(y)
    stat = float(resid @ np.linalg.solve(sigma ** 2 * np.eye(k) + cov, resid)) / k
    p = float(chi2.sf(stat * k, k) if np.isinf(dof) else f_dist.sf(stat, k, dof))
    ok = p >= VALIDATION_ALPHA
    spread = float(np.sqrt(np.mean(np.diag(cov))))
    test = f"chi-square on {k}" if np.isinf(dof) else f"F on {k} and {dof:g} degrees of freedom"
    return LawCheck(ok, f"the joint law fitted without the held-back budget predicts its {k} runs with RMS "
                        f"error {rms:.3g} against the noise of one run {sigma:.3g} ({source}) and the "
                        f"prediction's own sd {spread:.3g}: {'within' if ok else 'beyond'} them ({test}, p = "
                        f"{p:.3g}, {'>=' if ok else '<'} {VALIDATION_ALPHA:g})",
                    runs=k, rms=rms, noise=sigma, p_value=p)


def _unusable_laws(sub_joint: JointFit | CandidateError | None, joint: JointFit | CandidateError | None,
                   tables: Sequence[RunTable], options: DDOOptions) -> LawCheck | None:
    """The failed check when a law is missing or the law over every budget has implausible parameters."""
    if not isinstance(sub_joint, JointFit):
        return LawCheck(False, "no joint law without the held-back budget "
                               f"({getattr(sub_joint, 'error', None)})")
    if not isinstance(joint, JointFit):
        return LawCheck(False, f"no joint law over every budget ({getattr(joint, 'error', None)})")
    implausible = parameter_check(joint, tables, val_domains=options.val_domains).implausible
    if implausible:
        return LawCheck(False, "the joint law's parameters are implausible: " + "; ".join(implausible))
    return None


def untrusted(tables: Sequence[RunTable], candidates: Mapping[str, Any], *, pooled: bool,
              val_domains: ValDomains) -> dict[str, str]:
    """``{projection: why the trust checks flag it}``: its mix at the target beyond the shares the runs cover
    (:func:`~.trust.edge_check`), or resting on a joint law with implausible parameters (the joint projection,
    and every projection when the per-budget optima are the joint law's)."""
    joint = candidates.get(JOINT)
    implausible = parameter_check(joint, tables, val_domains=val_domains).implausible \
        if isinstance(joint, JointFit) else []
    out = {}
    for name in PROJECTIONS:
        p = candidates.get(name)
        if p is None or isinstance(p, CandidateError):
            continue
        edge = edge_check(tables, p.weights)
        beyond = [f"{d} {p.weights[d]:.3g} ({where} the runs' "
                  f"{edge.ranges[d][0]:.3g}-{edge.ranges[d][1]:.3g})"
                  for d, where in edge.edges.items() if where in ("below", "above")]
        why = []
        if beyond:
            why.append("its mix at the target lies beyond the shares the runs cover: " + ", ".join(beyond))
        if implausible and (name == JOINT or pooled):
            why.append("it rests on a joint law with implausible parameters (" + "; ".join(implausible) + ")")
        if why:
            out[name] = "; ".join(why)
    return out


def _law_margin_noise(fit: DDOResult, last: RunTable, noise: float | None, source: str,
                      val_domains: ValDomains) -> tuple[float | None, str]:
    """The noise a difference of the law's scores is judged against: the larger of the noise of one run and
    the DDO laws' residual sd at the held-back budget (either alone where the other is missing)."""
    resid, how = law_noise(fit, last, val_domains=val_domains)
    options = [(v, w) for v, w in ((noise, source), (resid, how)) if v is not None]
    if not options:
        return None, f"no noise estimate ({source}; {how})"
    v, w = max(options, key=lambda o: o[0])
    others = "; ".join(f"{x:.3g} from {y}" for x, y in options if y != w)
    return v, f"the larger of the noise of one run and the DDO laws' residual: {w}" + (f" (against {others})"
                                                                                      if others else "")


def choose_by_backtest(tables: Sequence[RunTable], candidates: Mapping[str, Any], backtest: Mapping[str, Any],
                       projections: Sequence[str], *, options: DDOOptions, held_fit: DDOResult | None,
                       predicted: Mapping[str, GainEstimate | CandidateError],
                       flags: Mapping[str, str]) -> Selection:
    """The rule of the module doc.

    Args:
        tables: the run tables, smallest budget first (three or more).
        candidates: ``{name: candidate or CandidateError}`` at the target, fitted on every budget.
        backtest: ``{name: candidate or CandidateError}`` computed from all budgets but the largest, for the
            largest.
        projections: the projections computed at the target.
        options: the settings of the fits (objective, validation domains).
        held_fit: the largest budget's DDO result when it is a DDO design (its law scores the candidates).
        predicted: each projection's predicted gain over the observed mix at the target under the joint law
            fitted to every budget (:mod:`.gain`), or why it could not be predicted.
        flags: the projections the trust checks flag (:func:`untrusted`).
    """
    last, objective, val_domains = tables[-1], options.objective, options.val_domains
    held = _Held.of(last, objective, val_domains, None if held_fit is None else held_fit.budget_tokens)
    noise, source = run_noise(tables, candidates.get(JOINT), objective=objective, val_domains=val_domains)
    tolerance, tolerance_source = distance_tolerance(held, held_fit, noise, val_domains)
    scores, scoring = score_candidates(held, backtest, held_fit, tolerance, val_domains=val_domains)
    law_sd, law_source = (None, "") if held_fit is None else _law_margin_noise(held_fit, last, noise, source,
                                                                                 val_domains)
    check = check_law(backtest.get(JOINT), candidates.get(JOINT), tables, noise, options)
    k = ROUTES * max(len(projections), 1)
    sd = law_sd if scoring == SCORE_LAW else noise
    margin = None if sd is None else backtest_margin(sd, k, two_runs=scoring != SCORE_LAW)
    base = scores.get(OBSERVED, BacktestScore(note="no observed candidate"))
    if base.objective is not None:
        for n in projections:
            s = scores.get(n)
            if s is not None and s.objective is not None:
                scores[n] = replace(s, gain=base.objective - s.objective)
    for n, why in flags.items():
        if n in scores:
            scores[n] = replace(scores[n], trust=why)
    record = Selection(OBSERVED, "", "backtest", backtest=scores, held_back_tokens=held.budget, noise=noise,
                       noise_source=source, law_noise=law_sd, law_noise_source=law_source, scoring=scoring,
                       tolerance=tolerance, tolerance_source=tolerance_source, law_check=check,
                       predicted={n: predicted[n] for n in PROJECTIONS if n in predicted},
                       margin=margin if scoring == SCORE_RUN else None,
                       law_margin=None if scoring == SCORE_RUN else margin)
    verdict = _Verdict(scores, projections, margin, check, predicted, flags, k, scoring)
    return verdict.selection(base, held.budget, record)


@dataclass(frozen=True)
class _Verdict:
    """Which projection passes which route (module doc), and the sentence that says so."""

    scores: Mapping[str, BacktestScore]
    projections: Sequence[str]
    margin: float | None
    check: LawCheck
    predicted: Mapping[str, GainEstimate | CandidateError]
    flags: Mapping[str, str]
    tests: int
    scoring: str = SCORE_RUN

    @property
    def z(self) -> float:
        return float(norm.ppf(1.0 - BACKTEST_ALPHA / self.tests))

    def backtest_win(self, n: str) -> bool:
        s = self.scores.get(n)
        if s is None or s.gain is None or self.margin is None or s.gain <= self.margin:
            return False
        if s.score == SCORE_RUN and s.run == self.scores[OBSERVED].run:
            return False  # one run scored both: no evidence
        return n not in self.flags or s.score == SCORE_RUN

    def law_win(self, n: str) -> bool:
        s, e = self.scores.get(n), self.predicted.get(n)
        if not self.check.passed or n in self.flags or not isinstance(e, GainEstimate):
            return False
        if (s is None or s.gain is None) and self.scoring == SCORE_LAW:
            return False  # outside the design's range at the held-back budget: nothing there vouches for it
        if s is not None and s.gain is not None and self.margin is not None and s.gain < -self.margin:
            return False  # the backtest shows it losing
        return bool(np.isfinite(e.sd) and e.gain > self.z * e.sd and e.gain > GAIN_NOISE * e.noise)

    def _no_loss(self, n: str, how: str) -> str:
        s = self.scores.get(n)
        if s is None or s.gain is None:
            return f"could not score it like with like ({s.note if s is not None else 'not computed'})"
        return f"scored by {how} shows no loss beyond the margin ({s.gain:+.4g})"

    def why_not(self, n: str) -> str:
        s, e = self.scores.get(n), self.predicted.get(n)
        if s is None or s.gain is None:
            parts = [f"backtest: {s.note if s is not None else 'not computed'}"]
        else:
            parts = ["backtest gain "
                     f"{s.gain:+.4g}" + ("" if self.margin is None else f" (margin {self.margin:.3g})")]
        if isinstance(e, GainEstimate):
            sd = f"sd {e.sd:.3g}" if np.isfinite(e.sd) else "sd not determined"
            parts.append(f"predicted gain at the target {e.gain:+.4g} ({sd}, needs > {self.z:.2f} sd and > "
                         f"{GAIN_NOISE:g} x the noise {e.noise:.3g})")
        elif isinstance(e, CandidateError):
            parts.append(f"no predicted gain ({e.error})")
        if n in self.flags:
            parts.append(f"trust: {self.flags[n]}")
        return f"{n}: " + ", ".join(parts)

    def selection(self, base: BacktestScore, held: float, record: Selection) -> Selection:
        """``record`` (every number of the backtest) with the choice and its reason."""
        at = f"at {held:.4g} tokens (fitted on the smaller budgets)"
        # score_candidates asks the law for a lower bound of the observed mix: a note says it gave one
        how = {SCORE_LAW: "the DDO law fitted there" + (", the observed mix by a lower bound as it lies outside "
                                                          "the design's range" if base.law_note else ""),
               SCORE_RUN: "runs of that total within the distance tolerance "
                          f"{record.tolerance:.3g}"}[record.scoring]
        if base.objective is None:
            return replace(record, chosen=OBSERVED, reason=(
                f"backtest {at}: the observed mix could not be scored like with like ({base.note}), so no "
                "projection can be compared with it: the best mix observed at the largest budget"))
        by_law = [n for n in self.projections if self.law_win(n)]
        if by_law:
            best = max(by_law,
                       key=lambda n: (self.predicted[n].gain, -PROJECTIONS.index(n)))  # type: ignore[union-attr]
            e: Any = self.predicted[best]
            return replace(record, chosen=best, reason=(
                f"{self.check.note}; the joint law over every budget predicts the {best} projection beats "
                f"the best observed mix at the target by {e.gain:.4g} (sd {e.sd:.3g}: more than {self.z:.2f} "
                f"sd and the noise of one run {e.noise:.3g}), and the backtest {at} "
                f"{self._no_loss(best, how)}, so it is used"))
        by_backtest = [n for n in self.projections if self.backtest_win(n)]
        if by_backtest:
            best = max(by_backtest, key=lambda n: (self.scores[n].gain, -PROJECTIONS.index(n)))
            return replace(record, chosen=best, reason=(
                f"backtest {at}, every candidate scored by {how}: the {best} projection beat the best "
                f"observed mix by {self.scores[best].gain:.4g}, more than the margin ({self.margin:.3g}: a "
                f"one-sided {BACKTEST_ALPHA:.1%} test over {self.tests} tests)"))
        law = f"law check: {self.check.note}"
        reasons = "; ".join(self.why_not(n) for n in self.projections)
        return replace(record, chosen=OBSERVED, reason=(
            f"backtest {at}, every candidate scored by {how}: no projection passed ({reasons}; {law}), so "
            "the best mix observed at the largest budget is used"))
