"""The default answer: the best mix observed at the largest budget, unless the runs show a projection does
better.

A projection extrapolates a trend; where the runs do not determine it, the plainest answer (the
mixture that did best at the largest budget the user ran) is better on published multi-scale runs
(docs/solver.md, "Evidence on published runs"). ``method="auto"`` (the default of the library, the
CLI and the runner) therefore treats that mix as a candidate beside the projections and chooses from
evidence in the user's own runs:

* **three budgets or more: a backtest on one footing, and the joint law validated at the held-back
  budget** (:mod:`.backtest`: every candidate scored one way at the largest budget, by its DDO law or by a
  run of its total within a distance tolerance; a projection is chosen when it wins that backtest beyond
  :func:`backtest_margin`, or when the joint law fitted without that budget predicts its runs within their
  noise and the law over every budget predicts a gain at the target beyond its uncertainty; the trust
  checks feed the decision).
* **two budgets: a predicted gain the runs can vouch for.** No budget is left to check against, so
  the evidence comes from the fit: the law fitted jointly to both budgets' runs predicts, at the
  target, the objective of each projection and of the observed mix (:mod:`.gain`). A projection is
  chosen only if (a) the runs hold replicates (an allocation run with two seeds or more, e.g. the
  base run twice at each budget) and the law fits within ``MISFIT_RATIO`` times their noise (its
  residual standard deviation against theirs), and (b) its predicted gain over the observed mix exceeds twice
  its standard deviation (the delta method over the fit; infinite where it rests on what the runs do not
  determine) and twice the noise of one run; the larger gain wins. Otherwise: the observed mix, with the
  numbers. Without (a) the fit's uncertainty cannot be trusted (docs/solver.md: on published two-checkpoint
  windows every threshold on (b) alone that ever chose a projection lost beyond noise).
* **one budget, or no projection could be fitted:** the observed mix, with the reason.

The observed candidate (:func:`observed_best`) is the lowest-objective run of the largest budget for
runs of any mixtures, and the DDO optimum there (DDO(N2)) for a DDO design, whose runs all lie
around one base mix.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from scipy.stats import norm

from .._records import Record
from .ddo import DDOResult
from .design import run_objective
from .gain import GainEstimate
from .runs import RunTable
from .scores import CandidateError, Selection
from .vocabulary import DEFAULT_OBJECTIVE, GEOMETRIC, JOINT, MEAN_PPL, OBSERVED, PROJECTIONS, ROBUST

__all__ = [
    "Observed",
    "backtest_margin",
    "choose",
    "computed_projections",
    "law_noise",
    "law_objective",
    "mix_groups",
    "noise_estimate",
    "observed_best",
    "passes",
    "trend_evidence",
    "vouched",
]

TREND_Z = 2.0  # a two-budget trend counts as determined beyond this many standard deviations
MARGIN_NOISE = 2.0  # a two-budget predicted gain counts beyond this many times the noise of one run
BACKTEST_ALPHA = 0.025  # a backtest win is a one-sided test at this level over all the projections scored
GAIN_Z = 2.0  # a two-budget predicted gain counts beyond this many of its standard deviations
LABEL_TOL = 0.01  # runs with one label are one mixture when their shares differ by at most this (L1)
SHARE_TOL = 1e-6  # runs are one mixture when no share differs by more than this
MIN_CURVE_DOF = 3  # a noise estimate from power laws in the budget needs this many degrees of freedom left
RANGE_TOL = 1e-6  # a multiplier this close (relative) to the design's range counts as inside it
_BOUNDS = ("", "lower", "upper")  # law_objective outside the design's range: none, or a bound from one side
# the law's residual sd may exceed the replicates' by this factor for its predicted gain to count
MISFIT_RATIO = 1.5


@dataclass(frozen=True)
class Observed(Record):
    """The observed candidate: the largest budget's best mix, used as is at the target.

    Attributes:
        weights: its shares; allocation_tokens: those shares times ``budget_tokens``.
        budget_tokens: the target; source_budget: the budget it was observed at.
        source: ``"run"`` (the lowest-objective run) or ``"ddo"`` (the DDO optimum of a design).
        run_id: the run (``source == "run"``); objective: its objective value as run (or None).
        method: ``"observed"``; description: :meth:`describe` (both written, not read).
    """

    weights: dict[str, float]
    allocation_tokens: dict[str, float]
    budget_tokens: float
    source_budget: float
    source: str
    run_id: str | None = None
    objective: float | None = None
    warnings: list[str] = field(default_factory=list)
    method: str = field(init=False, default=OBSERVED)
    description: str = field(init=False, default="")

    def __post_init__(self) -> None:
        if self.source not in ("run", "ddo"):
            raise ValueError(f"Observed.source must be 'run' or 'ddo', got {self.source!r}")
        object.__setattr__(self, "description", self.describe())

    def describe(self) -> str:
        """One line: which mix this is."""
        if self.source == "ddo":
            return f"the DDO optimum at {self.source_budget:.4g} tokens"
        return f"run {self.run_id!r}, the best at {self.source_budget:.4g} tokens (objective {self.objective:.5g})"


def table_budget(table: RunTable) -> float:
    """A run table's budget: the median of its runs' total tokens."""
    return float(np.median(table.tokens_matrix().sum(axis=1)))


def _shares(table: RunTable) -> np.ndarray:
    tok = table.tokens_matrix()
    tot = tok.sum(axis=1, keepdims=True)
    return np.divide(tok, tot, out=np.zeros_like(tok), where=tot > 0)


def observed_best(table: RunTable, target_tokens: float, *, objective: str = DEFAULT_OBJECTIVE,
                  val_domains: Sequence[str] | Mapping[str, float] | None = None,
                  optimum: Any = None) -> Observed:
    """The largest budget's best mix as the answer at ``target_tokens``.

    Args:
        table: the runs of the largest budget.
        target_tokens: the budget the mix is used at.
        objective, val_domains: as for :class:`~.ddo.DDOOptions` (lower is better).
        optimum: the table's DDO result when it is a DDO design: its optimum is the observed mix.

    Raises:
        ValueError: a bad objective, or no run with tokens.
    """
    if isinstance(optimum, DDOResult):  # the design's optimum
        w = {d: float(v) for d, v in optimum.weights.items()}
        return Observed(weights=w, allocation_tokens={d: v * target_tokens for d, v in w.items()},
                        budget_tokens=float(target_tokens), source_budget=float(optimum.budget_tokens),
                        source="ddo")
    y = run_objective(table, objective, val_domains)
    shares = _shares(table)
    ok = shares.sum(axis=1) > 0
    if not ok.any():
        raise ValueError("no run has training tokens")
    order = sorted(np.flatnonzero(ok), key=lambda i: (y[i], table.runs[i].run_id))
    i = int(order[0])
    w = {d: float(v) for d, v in zip(table.train_domains, shares[i], strict=True)}
    return Observed(weights=w, allocation_tokens={d: v * target_tokens for d, v in w.items()},
                    budget_tokens=float(target_tokens), source_budget=table_budget(table), source="run",
                    run_id=table.runs[i].run_id, objective=float(y[i]))


def mix_groups(tables: Sequence[RunTable]) -> list[np.ndarray]:
    """Which runs are one mixture, across tables: per table, a group id per run (ids shared across tables).

    Two runs are one mixture when they carry the same non-empty label and their shares are within
    ``LABEL_TOL`` (L1) of each other (a DDO design's ``"base"``, ``"code x3"``, ... at every budget, whose
    shares whole-batch rounding moves a little), or when their shares agree within ``SHARE_TOL``
    (largest absolute difference; runs without labels). A run joins the first group it matches.
    """
    labels: list[str] = []
    rows: list[np.ndarray] = []
    out = []
    for table in tables:
        ids = np.empty(len(table), dtype=np.int64)
        for i, (run, row) in enumerate(zip(table.runs, _shares(table), strict=True)):
            label = run.label.strip()
            diff = np.abs(np.asarray(rows) - row) if rows else np.zeros((0, row.size))
            same = (diff.max(axis=1) <= SHARE_TOL) | ((diff.sum(axis=1) <= LABEL_TOL)
                                                     & np.array([bool(label) and x == label for x in labels],
                                                                dtype=bool))
            if same.any():
                ids[i] = int(np.argmax(same))
            else:
                labels.append(label)
                rows.append(row)
                ids[i] = len(rows) - 1
        out.append(ids)
    return out


def _replicate_sd(groups: Sequence[tuple[np.ndarray, np.ndarray]]) -> tuple[float, int, int] | None:
    """Pooled sd of the runs of one mixture within one table, its degrees of freedom and the number of
    mixtures run more than once (``groups``: per table, its group ids and objective values); None without
    replicates."""
    ss, dof, mixes = 0.0, 0, 0
    for ids, y in groups:
        for g in np.unique(ids):
            v = y[ids == g]
            if v.size >= 2:
                ss += float(np.sum((v - v.mean()) ** 2))
                dof += v.size - 1
                mixes += 1
    return (float(np.sqrt(ss / dof)), dof, mixes) if dof else None


def _base_mean(fit: DDOResult, table: RunTable,
               val_domains: Sequence[str] | Mapping[str, float] | None) -> float:
    """The base runs' mean raw objective (the fit's objective)."""
    ids = [r.run_id for r in table.runs]
    y = run_objective(table, fit.objective, val_domains)
    return float(np.mean([y[ids.index(r)] for r in fit.base_runs]))


def law_objective(fit: DDOResult, table: RunTable, weights: Mapping[str, float], *,
                  val_domains: Sequence[str] | Mapping[str, float] | None = None,
                  bound: str = "") -> tuple[float | None, str]:
    """The objective DDO's law fitted to ``table`` (its budget's design) predicts for ``weights`` there.

    With the multipliers ``x_j = w_j N / base_j`` (``N``: the fit's budget, the base run's total), the
    prediction is the base runs' mean objective plus ``Σ_j [L_j(x_j) - L_j(1)]``, ``L_j`` the domain's
    fitted law ``amplitude_j (x + a_j)^(-b_j) + c_j`` (the sum DDO minimises; for ``mean_ppl`` the change
    is scaled by the base runs' mean, as the fit divides by it). Only inside the region the design
    covers: every ``x_j`` within the multipliers fitted for domain j.

    Outside it, a bound where ``bound`` asks for one: the law is a sum over the domains of laws of each
    domain's tokens (fitted on runs of unequal totals), so where each domain that lies outside has a law that
    falls with its tokens, the law at the range's lowest multiplier for the domains below it is a **lower**
    bound of the objective (those tokens raised, the others kept: no domain's tokens lowered), and at the
    range's highest multiplier for the domains above it an **upper** bound. ``bound="lower"`` gives the first
    where no domain lies above the range, ``"upper"`` the second where none lies below; a run of a law whose
    loss never rises with a domain's tokens obeys the same bound.

    Returns:
        ``(objective, "")`` inside the range; ``(bound, what)`` for a bound (``what`` says which and where);
        ``(None, why)`` where a domain lies outside the fitted range and no bound applies, or lacks a share.

    Raises:
        ValueError: ``bound`` not ``""``, ``"lower"`` or ``"upper"``.
    """
    if bound not in _BOUNDS:
        raise ValueError(f"bound must be one of {_BOUNDS}, got {bound!r}")
    missing = [d for d in fit.domains if d not in weights]
    if missing:
        return None, f"no share for {missing}"
    total = sum(float(weights[d]) for d in fit.domains)
    if not total > 0:
        return None, "the shares sum to 0"
    base = _base_mean(fit, table, val_domains)
    scale = base if fit.objective == MEAN_PPL else 1.0
    xs, below, above, texts = _multipliers(fit, weights, total)
    how = ""
    if below or above:
        where = below if bound == "lower" else above
        falls = all(float(fit.fits[d].predict(min(fit.fits[d].x))) >= float(fit.fits[d].predict(max(fit.fits[d].x)))
                    for d in below + above)
        if not bound or not falls or len(where) != len(below) + len(above):
            return None, "outside the design's range: " + ", ".join(texts)
        edge = min if bound == "lower" else max
        xs.update({d: float(edge(fit.fits[d].x)) for d in where})
        how = (f"a {bound} bound (the law falls with each domain's tokens): at the range's "
               f"{'lowest' if bound == 'lower' else 'highest'} tokens for " + ", ".join(texts))
    change = sum(float(fit.fits[d].predict(xs[d]) - fit.fits[d].predict(1.0)) for d in fit.domains)
    return base + scale * change, how


def _multipliers(fit: DDOResult, weights: Mapping[str, float],
                 total: float) -> tuple[dict[str, float], list[str], list[str], list[str]]:
    """Each domain's multiplier ``x_j`` for ``weights`` (shares summing to ``total``), the domains below and
    above the multipliers fitted for them, and a text for each domain outside."""
    xs: dict[str, float] = {}
    below: list[str] = []
    above: list[str] = []
    texts: list[str] = []
    for d in fit.domains:
        law = fit.fits[d]
        x = float(weights[d]) / total * fit.budget_tokens / fit.base_tokens[d]
        lo, hi = min(law.x), max(law.x)
        xs[d] = x
        if x < lo * (1 - RANGE_TOL) or x > hi * (1 + RANGE_TOL):
            (below if x < lo else above).append(d)
            texts.append(f"{d} x{x:.3g} (runs x{lo:.3g} to x{hi:.3g})")
    return xs, below, above, texts


def law_noise(fit: DDOResult, table: RunTable, *,
              val_domains: Sequence[str] | Mapping[str, float] | None = None) -> tuple[float | None, str]:
    """The residual standard deviation of DDO's laws at one budget (objective units), pooled over the
    domains' fits that have degrees of freedom left; None where every fit is exact."""
    sse = sum(f.sse for f in fit.fits.values() if f.dof > 0)
    dof = sum(f.dof for f in fit.fits.values() if f.dof > 0)
    if not dof:
        return None, "the DDO laws fit their points exactly (no degrees of freedom left)"
    scale = _base_mean(fit, table, val_domains) if fit.objective == MEAN_PPL else 1.0
    return float(np.sqrt(sse / dof)) * scale, f"the DDO laws' residual sd at the held-back budget ({dof} degrees of freedom)"


def noise_estimate(tables: Sequence[RunTable], *, objective: str = DEFAULT_OBJECTIVE,
                   val_domains: Sequence[str] | Mapping[str, float] | None = None) -> tuple[float | None, str]:
    """The noise of one run's objective, from the runs themselves: ``(sd or None, how it was found)``.

    Runs of one mixture (:func:`mix_groups`: same label and shares within ``LABEL_TOL``, or shares within
    ``SHARE_TOL``) are matched. Replicates (runs of one mix at the largest budget, e.g. its seeds) give
    their pooled standard deviation; else replicates at the smaller budgets; else mixtures run at three
    budgets or more give the median RMS residual of a power law in the budget through each one's values
    (``E_m + B_m N^-β_m``: each its own ``β_m`` with four budgets or more, one shared ``β`` with three;
    divided by the degrees of freedom left; replicates averaged), where they leave at least
    ``MIN_CURVE_DOF`` degrees of freedom (one mixture at three budgets leaves 0); else None.
    """
    ids = mix_groups(tables)
    ys = [run_objective(t, objective, val_domains) for t in tables]
    for scope, where in ((slice(-1, None), "at the largest budget"), (slice(None), "at the smaller budgets")):
        reps = _replicate_sd(list(zip(ids[scope], ys[scope], strict=True)))
        if reps is not None:
            sd, dof, mixes = reps
            return sd, f"replicates: {mixes} mix(es) run more than once {where} ({dof} degrees of freedom)"
    if len(tables) < 3:
        return None, "no replicates and fewer than 3 budgets"
    budgets = np.array([table_budget(t) for t in tables])
    curves: dict[int, dict[int, float]] = {}
    for k, (g, y) in enumerate(zip(ids, ys, strict=True)):
        for m in np.unique(g):
            curves.setdefault(int(m), {})[k] = float(np.mean(y[g == m]))
    full = np.array([[c[k] for k in range(len(tables))] for c in curves.values() if len(c) == len(tables)])
    if len(full) == 0:
        return None, "no mixture was run at every budget"
    k = len(tables)
    xs = budgets / budgets[0]
    betas = np.geomspace(0.01, 5.0, 400)
    sse = np.empty((len(betas), len(full)))
    for i, beta in enumerate(betas):  # E_m + B_m x^-β: E and B in closed form for every mixture at once
        design = np.stack([np.ones_like(xs), xs ** -beta], axis=1)
        coef, *_ = np.linalg.lstsq(design, full.T, rcond=None)
        sse[i] = np.sum((design @ coef - full.T) ** 2, axis=0)
    dof = len(full) * (k - 3) if k >= 4 else len(full) * (k - 2) - 1
    if dof < MIN_CURVE_DOF:
        return None, (f"no replicates, and the {len(full)} mixture(s) run at all {k} budgets leave {dof} "
                      f"degree(s) of freedom to a power law in the budget (at least {MIN_CURVE_DOF} needed)")
    if k >= 4:  # each mixture its own exponent: 3 parameters per curve
        rms = np.sqrt(sse.min(axis=0) / (k - 3))
        how = "its own exponent"
    else:  # three budgets: one exponent shared by the mixtures, 2 parameters per curve
        rms = np.sqrt(sse[int(np.argmin(sse.sum(axis=1)))] / (k - 2))
        how = "one shared exponent"
    return float(np.median(rms)), (f"median residual of a power law in the budget ({how}) through each of "
                                   f"the {len(full)} mixture(s) run at all {k} budgets")


def trend_evidence(robust: Any) -> tuple[bool, str]:
    """Whether a robust projection's share trends are determined: some ``|δ_i| > 2 σ_i`` (module doc)."""
    strong = {d: robust.trend[d] / robust.sd[d] if robust.sd[d] > 0 else float("inf")
              for d in robust.trend if abs(robust.trend[d]) > TREND_Z * robust.sd[d]}
    if strong:
        names = ", ".join(f"{d} ({v:+.1f} sd)" for d, v in sorted(strong.items()))
        return True, f"the share trend of {names} lies beyond {TREND_Z:g} standard deviations of its uncertainty"
    ratio = max((abs(robust.trend[d]) / robust.sd[d] for d in robust.trend if robust.sd[d] > 0), default=0.0)
    return False, (f"no share trend lies beyond {TREND_Z:g} standard deviations of its uncertainty "
                   f"(largest {ratio:.1f})")


def vouched(e: GainEstimate) -> bool:
    """Whether the runs can vouch for the law's uncertainty: replicates, and the law's residual within
    ``MISFIT_RATIO`` times their standard deviation; replicates that agree exactly (sd 0) need the exact fit
    of the lack-of-fit test instead, as a fitted residual is never exactly 0 in floating point."""
    return (e.replicate_sd is not None and e.residual_sd is not None and e.replicate_sd > 0
            and e.residual_sd <= MISFIT_RATIO * e.replicate_sd) or (e.replicate_sd == 0
                                                                    and e.lack_of_fit_p == 1.0)


def passes(e: GainEstimate) -> bool:
    """Whether a predicted gain is evidence (module doc): :func:`vouched`, ``gain > GAIN_Z·sd`` and
    ``gain > MARGIN_NOISE·noise``."""
    return bool(vouched(e) and np.isfinite(e.sd) and e.gain > GAIN_Z * e.sd
                and e.gain > MARGIN_NOISE * e.noise)


def _choose_by_gain(projections: Sequence[str], predicted: Mapping[str, GainEstimate | CandidateError],
                    flags: Mapping[str, str]) -> Selection:
    """The two-budget rule of the module doc."""
    table = {n: replace(predicted[n], trust=flags.get(n, "")) for n in PROJECTIONS if n in predicted}
    scored = {n: e for n, e in predicted.items() if n in projections and isinstance(e, GainEstimate)}
    if not scored:
        why = "; ".join(f"{n}: {e.error}" for n, e in predicted.items() if isinstance(e, CandidateError)) \
            or "no joint law"
        return Selection(OBSERVED, f"two budgets: the gain of a projection could not be predicted ({why}), "
                                     "so the best mix observed at the largest budget is "
                                     "used", "gain", predicted=table)
    good = {n: e for n, e in scored.items() if passes(e) and n not in flags}
    if good:
        best = max(good, key=lambda n: (good[n].gain, -PROJECTIONS.index(n)))
        e = good[best]
        return Selection(best, f"two budgets: the joint law (residual sd {e.residual_sd:.3g}, within "
                               f"{MISFIT_RATIO:g}x the replicates' {e.replicate_sd:.3g}) predicts the {best} "
                               f"projection beats the best observed mix by {e.gain:.4g} (sd {e.sd:.3g}, "
                               f"noise of one run {e.noise:.3g}): more than {GAIN_Z:g} sd and "
                               f"{MARGIN_NOISE:g}x the noise, so it is used", "gain", predicted=table)
    best = max(scored, key=lambda n: (scored[n].z, -PROJECTIONS.index(n)))
    e = scored[best]
    sd = "not determined by the runs" if not np.isfinite(e.sd) else f"sd {e.sd:.3g}"
    numbers = f"best: {best}, {e.gain:+.4g}, {sd}, noise {e.noise:.3g}"
    if passes(e) and best in flags:
        return Selection(OBSERVED, f"two budgets: the {best} projection's predicted gain passes ({numbers}), "
                                     f"but the trust checks flag it ({flags[best]}) and two budgets leave no "
                                     "run to vouch for it there, so the best mix observed at the largest "
                                     "budget is used", "gain",
                         predicted=table)
    if not vouched(e):
        why = ("no replicate runs (an allocation run with two seeds or more) to test the joint law's fit "
               "against, so its uncertainty cannot be trusted" if e.replicate_sd is None else
               f"the joint law misfits the replicate runs (residual sd {e.residual_sd:.3g} against their "
               f"{e.replicate_sd:.3g}, more than {MISFIT_RATIO:g}x)")
        return Selection(OBSERVED, f"two budgets: the projections' predicted gains cannot be judged: {why}; "
                                     f"the best mix observed at the largest budget is used ({numbers}; a "
                                     "backtest needs runs at three budgets or "
                                     "more)", "gain", predicted=table)
    return Selection(OBSERVED, "two budgets: no projection's predicted gain over the best observed mix is "
                                 f"beyond {GAIN_Z:g} sd and {MARGIN_NOISE:g}x the noise of one run "
                                 f"({numbers}), so the best mix observed at the largest budget is used (a "
                                 "backtest needs runs at three budgets or more)", "gain", predicted=table)


def choose(candidates: Mapping[str, Any], *, fallback: str = "",
           predicted: Mapping[str, GainEstimate | CandidateError] | None = None,
           flags: Mapping[str, str] | None = None) -> Selection:
    """The rule of one or two budgets (module doc); three budgets or more:
    :func:`~.backtest.choose_by_backtest`.

    Args:
        candidates: ``{name: projection or CandidateError}`` at the target (``observed`` included).
        fallback: why no projection could be computed (when none could).
        predicted: with two budgets, ``{projection: its GainEstimate or CandidateError}`` (:mod:`.gain`).
        flags: the projections the trust checks flag (:func:`~.backtest.untrusted`): never chosen here, as two
            budgets leave no run to vouch for them.
    """
    projections = computed_projections(candidates)
    if not projections:
        why = fallback or "; ".join(f"{n}: {c.error}" for n in PROJECTIONS
                                    if isinstance(c := candidates.get(n), CandidateError))
        return Selection(OBSERVED, "the best mix observed at the largest budget: no projection could be "
                                     f"computed ({why})", "fallback")
    return _choose_by_gain(projections, predicted or {}, flags or {})


def computed_projections(candidates: Mapping[str, Any]) -> list[str]:
    """The projections of ``candidates`` that were computed (not a CandidateError), in the rule's order of
    preference."""
    return [n for n in (ROBUST, GEOMETRIC, JOINT)
            if not isinstance(candidates.get(n), (CandidateError, type(None)))]


def backtest_margin(sd: float, candidates: int, *, two_runs: bool) -> float:
    """The gain a backtest win must exceed: ``z · sd_diff`` with ``z`` the one-sided ``BACKTEST_ALPHA``
    quantile Bonferroni-corrected over ``candidates`` projections, and ``sd_diff`` the standard deviation of a
    score difference: ``√2 · sd`` for the objectives of two runs (``two_runs``), ``sd`` for two predictions of
    one law.

    Raises:
        ValueError: ``sd`` negative or not finite, or fewer than one candidate.
    """
    if not np.isfinite(sd) or sd < 0:
        raise ValueError(f"sd must be a finite number >= 0, got {sd!r}")
    if candidates < 1:
        raise ValueError(f"candidates must be >= 1, got {candidates!r}")
    z = float(norm.ppf(1.0 - BACKTEST_ALPHA / candidates))
    return z * (float(np.sqrt(2.0)) if two_runs else 1.0) * float(sd)
