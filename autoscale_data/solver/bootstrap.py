"""Uncertainty of DDO weights and of projections: bootstrap CIs and a held-out-scale check.

Methods (``method=``):

* ``"seeds"`` — resample the runs at each allocation (seeds) with replacement; needs >= 2 runs at
  every allocation. The base value that normalises ``mean_ppl`` is recomputed per replicate.
* ``"parametric"`` — add Gaussian noise of ``noise_std`` (units of the fitted objective: relative
  for ``mean_ppl``) to every run; ``noise_std`` defaults to the pooled within-allocation seed std.
* ``"residuals"`` — per domain, resample the fit's residuals (scaled by ``sqrt(n / dof)``) around
  the fitted curve; needs more points than parameters.
* ``"consistent_fits"`` — no resampling: the optimal weights over every fit consistent with the
  data (:mod:`.identify`); the interval is their range, not a confidence interval.
* ``"auto"`` — seeds if every allocation has replicates, else parametric if some has (or
  ``noise_std`` is given), else residuals if the fits have spare points; otherwise
  consistent_fits: 2m+1 single-seed runs with a 3-parameter law carry no information about noise,
  but they do say how far the weights could move over the exact fits.

Whether the weights differ from the base mix is judged per domain (does its CI contain the base
weight?) and overall with Bonferroni-adjusted intervals (level ``1 - (1 - level)/m``), so that the
flag ``distinguishable_from_base`` is not set by chance with many domains (never with
``consistent_fits``, which has no noise estimate to judge by).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._options import build_options
from .._records import Record, transient
from .allocate import allocate, multiplier_bounds
from .allocation_path import as_scales, fit_path, one_scale, project
from .ddo import DDOOptions, DDOResult, fit_ddo, objective_values, token_caps_array
from .design import read_design
from .laws import fit_power_law_batch
from .runs import RunTable
from .select import _replicate_sd
from .vocabulary import AUTO, MEAN_PPL, check_name

__all__ = ["BootstrapResult", "HeldoutCheck", "ProjectionBootstrap", "bootstrap_ddo",
           "bootstrap_projection", "heldout_scale_check"]


@dataclass(frozen=True)
class BootstrapResult(Record):
    """Bootstrap distribution of DDO weights at the fit budget.

    A record (:mod:`autoscale_data._records`): its JSON (the runner's ``fits/bootstrap_<N>.json``) has
    one key per field but the two kept in memory; ``available`` is always true (a bootstrap that could
    not run is the runner's :class:`~autoscale_data.runner.records.BootstrapUnavailable`).

    Attributes:
        weights: the point estimate, the DDO weights on the original runs (domain order of ``samples``).
        ci_low, ci_high: percentile CI per domain at ``level``.
        base_weights: the base mix's weights.
        contains_base: per domain, whether its CI contains the base weight.
        distinguishable_from_base: some domain's Bonferroni-adjusted CI excludes its base weight.
        method, noise_std, level, n_boot, n_failed: how it was computed.
        available: true (written for the runner's file, whose other shape says why a bootstrap is not).
        summary: :meth:`describe` (written, made again when read).
        point: the DDO result on the original runs (in memory only: None once read from a file).
        samples: weights per replicate, shape ``(n_ok, m)`` (in memory only: empty once read).
    """

    weights: dict[str, float]
    ci_low: dict[str, float]
    ci_high: dict[str, float]
    base_weights: dict[str, float]
    contains_base: dict[str, bool]
    distinguishable_from_base: bool
    method: str
    noise_std: float | None
    level: float
    n_boot: int
    n_failed: int
    available: bool = field(init=False, default=True)
    summary: str = field(init=False)
    point: DDOResult | None = transient(default=None, compare=False, repr=False)
    samples: np.ndarray = transient(default_factory=lambda: np.empty((0, 0)), compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "summary", self.describe())

    @property
    def domains(self) -> tuple[str, ...]:
        """Domain order of ``samples`` (that of :attr:`weights`)."""
        return tuple(self.weights)

    def describe(self) -> str:
        """A short human-readable table."""
        kind = "range" if self.method == "consistent_fits" else f"{self.level:.0%} CI"
        lines = [f"DDO bootstrap ({self.method}, {self.n_boot - self.n_failed}/{self.n_boot} replicates, "
                 f"{kind})"]
        for d in self.domains:
            mark = "" if self.contains_base[d] else "  *differs from base*"
            lines.append(f"  {d:>16}: {self.weights[d]:.3f}  [{self.ci_low[d]:.3f}, {self.ci_high[d]:.3f}]"
                         f"  base {self.base_weights[d]:.3f}{mark}")
        verdict = ("distinguishable from the base mix" if self.distinguishable_from_base
                   else "NOT distinguishable from the base mix (more seeds or tokens needed)")
        if self.method == "consistent_fits":
            verdict = ("not judged: the runs carry no estimate of noise; the intervals are the range over "
                       "the fits consistent with the data")
        lines.append(f"  weights are {verdict}")
        return "\n".join(lines)


def _residual_replicates(design, fits, n_boot, rng):
    """Per-domain (Y, W) arrays of the residual bootstrap: each law's predictions plus its resampled
    residuals."""
    out = []
    for j, d in enumerate(design.domains):
        f = fits[d]
        idx = design.domain_points(j)
        res = np.asarray(f.residuals)
        res = (res - res.mean()) * np.sqrt(res.size / max(f.dof, 1))
        pred = f.predict(design.multiplier[idx])
        ys = pred + rng.choice(res, size=(n_boot, idx.size), replace=True)
        out.append((ys, np.ones_like(ys)))
    return out


def _replicates(method, y, design, objective, noise_std, n_boot, rng):
    """Per-domain (Y, W) arrays of the seeds or the parametric bootstrap."""
    groups = [np.flatnonzero(design.point_of_run == p) for p in np.unique(design.point_of_run)]
    n = y.size
    out = []
    if method == "seeds":
        w = np.zeros((n_boot, n))
        for g in groups:
            w[:, g] = rng.multinomial(g.size, np.full(g.size, 1.0 / g.size), size=n_boot)
        ys = np.broadcast_to(y, (n_boot, n)).copy()
    else:  # parametric
        w = np.ones((n_boot, n))
        ys = y + noise_std * rng.standard_normal((n_boot, n))
    if objective == MEAN_PPL:
        bw = w[:, design.base_runs]
        ys = ys / ((bw * ys[:, design.base_runs]).sum(1) / bw.sum(1))[:, None]
    for j in range(len(design.domains)):
        idx = design.domain_points(j)
        out.append((ys[:, idx], w[:, idx]))
    return out


_METHODS = (AUTO, "seeds", "parametric", "residuals", "consistent_fits")


def bootstrap_ddo(runs: RunTable, options: DDOOptions | None = None, *, n_boot: int = 1000,
                  method: str = AUTO,
                  noise_std: float | None = None, level: float = 0.95, seed: int = 0,
                  point: DDOResult | None = None, **settings: Any) -> BootstrapResult:
    """Bootstrap confidence intervals of the DDO weights (see the module doc for the methods).

    Args:
        runs: the DDO runs (as for :func:`~autoscale_data.solver.ddo.fit_ddo`).
        options: the DDO settings (:class:`~autoscale_data.solver.ddo.DDOOptions`); its fields may
            also be given as keywords, as for ``fit_ddo``.
        method: ``"auto"``, ``"seeds"``, ``"parametric"``, ``"residuals"`` or ``"consistent_fits"``.
        noise_std: noise of one run's objective (parametric method).
        level: CI level in (0, 1).
        point: ``fit_ddo(runs, options)`` when the caller already has it (it is not fitted again).

    Raises:
        ValueError: bad options, or no source of noise information for the chosen method.
    """
    _check_settings(n_boot, method, noise_std, level)
    o = build_options(DDOOptions, options, settings, caller="bootstrap_ddo")
    point = fit_ddo(runs, o) if point is None else point
    design = read_design(runs, o.base_run)
    y = objective_values(runs, design, o.objective, o.val_domains)
    replicates = _replicate_sd([(design.point_of_run, y)])
    pooled = None if replicates is None else replicates[0]
    method = _chosen_method(method, noise_std, np.bincount(design.point_of_run), pooled,
                            min(f.dof for f in point.fits.values()))
    if method == "consistent_fits":
        assert point.identifiability is not None  # fit_ddo always sets it
        samples = point.identifiability.samples
        return _summarise(design, point, samples, method, None, level, samples.shape[0])
    if method == "parametric":
        noise_std = pooled if noise_std is None else float(noise_std)
    rng = np.random.default_rng(seed)
    reps = (_residual_replicates(design, point.fits, int(n_boot), rng) if method == "residuals" else
            _replicates(method, y, design, o.objective, noise_std, int(n_boot), rng))
    return _summarise(design, point, _refit(reps, design, point, o, int(n_boot)), method,
                      None if method != "parametric" else float(noise_std), level, int(n_boot))


def _check_settings(n_boot: int, method: str, noise_std: float | None, level: float) -> None:
    if not (0 < level < 1):
        raise ValueError(f"level must be in (0, 1), got {level}")
    if int(n_boot) < 2:
        raise ValueError(f"n_boot must be >= 2, got {n_boot}")
    check_name("method", method, _METHODS)
    if noise_std is not None and not (np.isfinite(noise_std) and noise_std > 0):
        raise ValueError(f"noise_std must be > 0, got {noise_std}")


def _chosen_method(method: str, noise_std: float | None, sizes: np.ndarray, pooled: float | None,
                   min_dof: int) -> str:
    """``method``, or for ``"auto"`` the first the runs support (module doc); ``ValueError`` where they do not
    support the one asked (``sizes``: runs per point, ``pooled``: the replicates' sd, ``min_dof``: of the
    fits)."""
    if method == AUTO:
        if noise_std is not None:
            return "parametric"
        if np.all(sizes >= 2):
            return "seeds"
        if pooled is not None:
            return "parametric"
        return "residuals" if min_dof > 0 else "consistent_fits"
    if method == "seeds" and not np.any(sizes >= 2):
        raise ValueError("method='seeds' needs replicate runs (several seeds) at some allocation")
    if method == "residuals" and min_dof <= 0:
        raise ValueError("method='residuals' needs more points than parameters in every domain's fit")
    if method == "parametric" and noise_std is None and pooled is None:
        raise ValueError("method='parametric' needs noise_std= or replicate runs to estimate it")
    return method


def _refit(reps: list[tuple[np.ndarray, np.ndarray]], design: Any, point: DDOResult, o: DDOOptions,
           n_boot: int) -> np.ndarray:
    """The DDO optimum's weights of every replicate whose laws (refitted from the point fit's) are valid."""
    params = np.empty((3, n_boot, len(design.domains)))
    for j, (ys, ws) in enumerate(reps):
        f = point.fits[design.domains[j]]
        init = {"a": f.a, "b": f.b, "c": f.c, "amplitude": f.amplitude}
        out = fit_power_law_batch(design.multiplier[design.domain_points(j)], ys, ws, law=o.law,
                                  n_starts=1, init=init, grid="coarse")
        params[0, :, j], params[1, :, j], params[2, :, j] = out["amplitude"], out["a"], out["b"]
    ok = np.all(np.isfinite(params), axis=(0, 2))
    base, nb = design.base_tokens, design.budget_tokens
    caps = token_caps_array(design.domains, o.token_caps, o.max_epochs)
    lo, hi = multiplier_bounds(base, nb, o.min_weight, o.max_weight, caps, design.domains)
    ok &= np.all(hi[None, :] + params[1] > 0, axis=1)
    return allocate(params[0, ok], params[1, ok], params[2, ok], base, nb, lo, hi).x * base / nb


def _summarise(design, point, samples, method, noise_std, level, n_boot) -> BootstrapResult:
    domains, base_w = design.domains, design.base_tokens / design.budget_tokens
    alpha = 1 - level
    tol = 1e-12
    if method == "consistent_fits":  # a range over fits, not a sampling distribution
        lo, hi = samples.min(axis=0), samples.max(axis=0)
        distinct = False
    else:
        lo, hi = np.quantile(samples, [alpha / 2, 1 - alpha / 2], axis=0)
        adj = alpha / len(domains)
        blo, bhi = np.quantile(samples, [adj / 2, 1 - adj / 2], axis=0)
        distinct = bool(np.any((blo - tol > base_w) | (base_w > bhi + tol)))
    contains = (lo - tol <= base_w) & (base_w <= hi + tol)
    return BootstrapResult(
        weights=dict(point.weights), point=point, samples=samples,
        ci_low={d: float(v) for d, v in zip(domains, lo, strict=False)},
        ci_high={d: float(v) for d, v in zip(domains, hi, strict=False)},
        base_weights={d: float(v) for d, v in zip(domains, base_w, strict=False)},
        contains_base={d: bool(v) for d, v in zip(domains, contains, strict=False)},
        distinguishable_from_base=distinct, method=method, noise_std=noise_std, level=level,
        n_boot=n_boot, n_failed=n_boot - samples.shape[0],
    )


@dataclass(frozen=True)
class ProjectionBootstrap(Record):
    """Bootstrap CI of projected weights (replicates of two scales paired by index).

    A record (:mod:`autoscale_data._records`): its JSON has one key per field but ``samples``.

    Attributes:
        budget_tokens: the target budget.
        weights: projection of the two point estimates.
        ci_low, ci_high: percentile CI per domain; level; n_failed: replicates that could not be
            projected (e.g. a decreasing path that never reaches the target).
        samples: projected weights per replicate, ``(n_ok, m)`` (in memory only: empty once read).
    """

    budget_tokens: float
    weights: dict[str, float]
    ci_low: dict[str, float]
    ci_high: dict[str, float]
    level: float
    n_failed: int
    samples: np.ndarray = transient(default_factory=lambda: np.empty((0, 0)), compare=False, repr=False)

    @property
    def domains(self) -> tuple[str, ...]:
        """Domain order of ``samples`` (that of :attr:`weights`)."""
        return tuple(self.weights)


def bootstrap_projection(small: BootstrapResult, large: BootstrapResult,
                         target_tokens: float) -> ProjectionBootstrap:
    """Project each pair of replicates (small-budget i, large-budget i) to ``target_tokens``.

    Raises:
        ValueError: domains differ, budgets not increasing, target <= 0, or no replicate projects.
    """
    if small.domains != large.domains:
        raise ValueError(f"domains differ: {list(small.domains)} vs {list(large.domains)}")
    target = float(target_tokens)
    n1, n2 = small.point.budget_tokens, large.point.budget_tokens
    point = project([small.point, large.point], target).weights
    k = min(len(small.samples), len(large.samples))
    out, failed = [], 0
    for i in range(k):
        try:
            path = fit_path([(n1, dict(zip(small.domains, small.samples[i] * n1, strict=False))),
                             (n2, dict(zip(small.domains, large.samples[i] * n2, strict=False)))])
            out.append(path.allocations(target)[0] / target)
        except ValueError:
            failed += 1
    if not out:
        raise ValueError("no bootstrap replicate could be projected to the target")
    samples = np.array(out)
    alpha = 1 - small.level
    lo, hi = np.quantile(samples, [alpha / 2, 1 - alpha / 2], axis=0)
    return ProjectionBootstrap(
        budget_tokens=target, weights=point, samples=samples,
        ci_low={d: float(v) for d, v in zip(small.domains, lo, strict=False)},
        ci_high={d: float(v) for d, v in zip(small.domains, hi, strict=False)}, level=small.level,
        n_failed=failed + (max(len(small.samples), len(large.samples)) - k),
    )


@dataclass(frozen=True)
class HeldoutCheck(Record):
    """Projection from two budgets to a third where DDO also ran.

    Attributes:
        budget_tokens: the held-out budget.
        projected: projected weights; observed: the held-out DDO weights.
        error: projected − observed per domain; max_abs_error; total_variation (half L1).
    """

    budget_tokens: float
    projected: dict[str, float]
    observed: dict[str, float]
    error: dict[str, float]
    max_abs_error: float
    total_variation: float


def heldout_scale_check(first: Any, second: Any, heldout: Any) -> HeldoutCheck:
    """Project from two budgets to a third, held-out one and compare with DDO there.

    Args:
        first, second: optimal allocations at N1 < N2 (DDO results or ``(N, {domain: tokens})``).
        heldout: the DDO answer at the held-out budget N3 (same forms).

    Raises:
        ValueError: as for :func:`~autoscale_data.solver.allocation_path.project`.
    """
    _, _, _ = as_scales([first, second])
    n3, alloc3 = one_scale(heldout, 2)
    proj = project([first, second], n3)
    if set(alloc3) != set(proj.weights):
        raise ValueError(f"held-out domains {sorted(alloc3)} differ from {sorted(proj.weights)}")
    tot = sum(alloc3.values())
    obs = {d: alloc3[d] / tot for d in proj.weights}
    err = {d: proj.weights[d] - obs[d] for d in proj.weights}
    e = np.array(list(err.values()))
    return HeldoutCheck(budget_tokens=n3, projected=dict(proj.weights), observed=obs, error=err,
                        max_abs_error=float(np.abs(e).max()), total_variation=float(0.5 * np.abs(e).sum()))
