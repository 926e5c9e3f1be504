"""Are DDO's weights determined by the data? The range of optima over all fits consistent with it.

Per domain, the fits *consistent* with the points are:

* with no more points than parameters (the paper's 2m+1 design: x = 1/r, 1, r for a 3-parameter
  law) every exact fit through the points: there may be several, with different optima, and the
  points cannot tell them apart (nor check the law at all);
* with spare points, the fits whose error stays within the noise,
  ``SSE <= SSE_min + s² · χ²₁(level)`` with ``s²`` the pure-error variance of repeated runs
  (seeds) when there are some, else ``SSE_min / dof`` (a profile-likelihood region). What moves
  the optimum is a domain's marginal value, the slope ``-L'(x)`` at its optimal multiplier; the
  fits with the smallest and the largest slope in the region stand for it.

The weights are optimised for every combination of the domains' consistent fits (at most
``MAX_COMBINATIONS`` combinations, else one domain at a time) and ``weight_range`` is the span per
domain. The weights count as *identified*
when every fit has spare points and no weight moves by more than ``weight_tol``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from scipy.stats import chi2

from .._records import Record, omitted, transient
from .laws import B_MAX, PROFILE_B, PowerLawFit, fit_on_grid, local_fits, shift_frame
from .vocabulary import law_parameters

__all__ = ["MAX_COMBINATIONS", "DomainFits", "Identifiability", "JointIdentifiability", "consistent_fits",
           "identify"]

MAX_COMBINATIONS = 4096
"""Most combinations of per-domain fits optimised jointly (beyond it: one domain at a time)."""

Params = tuple[float, float, float, float]  # (amplitude, a, b, c)
# (amp, a, b), each (B, m) -> weights (B, m)
Optimum = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]


@dataclass(frozen=True)
class DomainFits(Record):
    """One domain's fits consistent with its points.

    Attributes:
        points: points fitted; ``parameters``: parameters of the law.
        consistent_fits: how many fits are consistent with the points.
        b_range: smallest and largest exponent ``b`` among them.
        slope_range: smallest and largest marginal value ``-L'(x)`` at the optimum among them.
        fits: ``(amplitude, a, b, c)`` of each consistent fit, the chosen fit first (in memory only:
            empty once read from a file).
        threshold: the SSE bound that defines "consistent" (exact fits: rounding level; in memory only).
    """

    points: int
    parameters: int
    consistent_fits: int
    b_range: tuple[float, float]
    slope_range: tuple[float, float]
    fits: tuple[Params, ...] = transient(default=())
    threshold: float = transient(default=math.nan)

    @property
    def checkable(self) -> bool:
        """Whether there are spare points (a residual that can test the law)."""
        return self.points > self.parameters


def _pure_error(x: np.ndarray, y: np.ndarray) -> tuple[float, int]:
    """Sum of squares and degrees of freedom of repeated runs at the same multiplier."""
    ss, dof = 0.0, 0
    for v in np.unique(x):
        rep = y[x == v]
        ss += float(((rep - rep.mean()) ** 2).sum())
        dof += rep.size - 1
    return ss, dof


def _params(f: PowerLawFit) -> Params:
    return (f.amplitude, f.a, f.b, f.c)


def _slope(p: Params, at: float) -> float:
    amp, a, b, _ = p
    return float(amp * b * (at + a) ** (-b - 1.0))


_GRID = 41  # points per side of the local grids that scan the region
_GROW = 20  # doublings of the local grid's extent at most


def _slope_extremes(best: PowerLawFit, threshold: float, at: float) -> list[Params]:
    """The fits with the smallest and largest slope at ``at`` among those with SSE <= threshold.

    The slope depends on ``a`` and ``b`` only (and the amplitude, for the 4-parameter law, taken at
    its best value for each ``a, b``), and the smallest SSE for given ``a, b`` has the floor in
    closed form. So the region is scanned on a grid over (log shift, log b) centred on the best fit,
    grown until no point on its border is inside the region, then on a finer grid around each
    extreme.
    """
    x, y = np.asarray(best.x), np.asarray(best.y)
    xmin, s_lo, s_hi = shift_frame(x)
    if at < xmin:  # keep at + a > 0: exp(s) > xmin - at
        s_lo = max(s_lo, float(np.log(xmin - at)) + 1e-9)
    lb_lo, lb_hi = np.log(PROFILE_B[1]), np.log(B_MAX)
    s0 = float(np.clip(np.log(max(best.a + xmin, 1e-300)), s_lo, s_hi))
    lb0 = float(np.clip(np.log(max(best.b, PROFILE_B[1])), lb_lo, lb_hi))

    def scan(cs: float, cb: float, es: float, eb: float):
        sg = np.clip(cs + np.linspace(-es, es, _GRID), s_lo, s_hi)[:, None] + np.zeros((1, _GRID))
        bg = np.exp(np.clip(cb + np.linspace(-eb, eb, _GRID), lb_lo, lb_hi))[None, :] + np.zeros((_GRID, 1))
        g = fit_on_grid(x, y, sg, bg, law=best.law)
        with np.errstate(all="ignore"):
            slope = g["amplitude"] * g["b"] * np.power(at + g["a"], -g["b"] - 1.0)
        return sg, bg, slope, (g["sse"] <= threshold) & np.isfinite(slope)

    es, eb = 1e-3, 1e-3
    for _ in range(_GROW):
        sg, bg, slope, inside = scan(s0, lb0, es, eb)
        grow_s = (inside[0].any() and sg[0, 0] > s_lo) or (inside[-1].any() and sg[-1, 0] < s_hi)
        grow_b = ((inside[:, 0].any() and bg[0, 0] > np.exp(lb_lo)) or
                  (inside[:, -1].any() and bg[0, -1] < np.exp(lb_hi)))
        if not (grow_s or grow_b):
            break
        es, eb = es * (2 if grow_s else 1), eb * (2 if grow_b else 1)
    out = []
    for pick in (np.nanargmin, np.nanargmax):
        if not inside.any():
            break
        k = pick(np.where(inside, slope, np.nan))
        fs, fb, fslope, fin = scan(float(sg.flat[k]), float(np.log(bg.flat[k])), 2 * es / (_GRID - 1),
                                   2 * eb / (_GRID - 1))
        if fin.any():
            k, sg_, bg_ = pick(np.where(fin, fslope, np.nan)), fs, fb
        else:
            sg_, bg_ = sg, bg
        g = fit_on_grid(x, y, np.array(sg_.flat[k]), np.array(bg_.flat[k]), law=best.law)
        out.append((float(g["amplitude"]), float(g["a"]), float(g["b"]), float(g["c"])))
    return out


def consistent_fits(best: PowerLawFit, *, level: float = 0.95, at: float = 1.0,
                    candidates: Sequence[PowerLawFit] | None = None) -> DomainFits:
    """The fits of ``best``'s points that the data cannot tell apart from ``best`` (see module doc).

    Args:
        level: profile level of the region, for fits with spare points.
        at: the multiplier where slopes are compared (the domain's optimal multiplier).
        candidates: :func:`~.laws.local_fits` of the same points, if already computed.

    Raises:
        ValueError: ``level`` outside (0, 1).
    """
    if not (0.0 < level < 1.0):
        raise ValueError(f"level must be in (0, 1), got {level}")
    x, y = np.asarray(best.x), np.asarray(best.y)
    k = law_parameters(best.law)
    points = y.size
    scale = float(y @ y)
    local = list(candidates) if candidates is not None else local_fits(x, y, law=best.law)
    if points <= k:
        threshold = 1e-9 * scale
        fits = [_params(best)] + [_params(f) for f in local if f.sse <= threshold]
    else:
        ss, dof_pe = _pure_error(x, y)
        s2 = ss / dof_pe if dof_pe > 0 else best.sse / (points - k)
        threshold = best.sse + max(s2, 1e-12 * scale) * float(chi2.ppf(level, 1))
        fits = [_params(best)] + _slope_extremes(best, threshold, at)
        fits += [_params(f) for f in local if f.sse <= threshold]
    unique: list[Params] = []
    for i, p in enumerate(fits):
        if i > 0 and p[1] + at <= 0:  # the law is undefined at the optimum ((x + a)^-b needs x + a > 0)
            continue
        if not any(np.allclose(p, q, rtol=1e-7, atol=1e-12) for q in unique):
            unique.append(p)
    bs = [p[2] for p in unique]
    slopes = [_slope(p, at) for p in unique]
    return DomainFits(points, k, len(unique), (min(bs), max(bs)), (min(slopes), max(slopes)), tuple(unique),
                      float(threshold))


def _combinations(per_domain: Sequence[Sequence[Params]]) -> np.ndarray:
    """Rows of per-domain fit indices: the full product, or one domain at a time when too many."""
    sizes = [len(f) for f in per_domain]
    if int(np.prod(sizes, dtype=np.float64)) <= MAX_COMBINATIONS:
        return np.array(list(itertools.product(*[range(s) for s in sizes])), dtype=np.int64)
    unit = np.eye(len(sizes), dtype=np.int64)
    return np.stack([0 * unit[0]] + [i * unit[j] for j, s in enumerate(sizes) for i in range(1, s)])


@dataclass(frozen=True)
class Identifiability(Record):
    """Whether the data determine the optimal weights, and how far they could move.

    A record (:mod:`autoscale_data._records`): its JSON has one key per field but the two kept in memory,
    ranges as ``[lo, hi]`` lists.

    Attributes:
        identified: every fit has spare points and no weight moves by more than ``weight_tol``
            over the consistent fits.
        weight_range: ``{domain: (lo, hi)}`` of the optimal weight over the consistent fits.
        spread: the largest ``hi - lo``.
        domains: the consistent fits per domain.
        level, weight_tol: settings used.
        summary: :meth:`describe` (written, made again when read).
        combinations: how many combinations of fits were optimised (in memory only: 0 once read).
        samples: optimal weights of every combination, shape ``(combinations, m)`` (in memory only).
    """

    identified: bool
    weight_range: dict[str, tuple[float, float]]
    spread: float
    domains: dict[str, DomainFits]
    level: float
    weight_tol: float
    summary: str = field(init=False)
    combinations: int = transient(default=0)
    samples: np.ndarray = transient(repr=False, compare=False, default_factory=lambda: np.empty((0, 0)))

    def __post_init__(self) -> None:
        object.__setattr__(self, "summary", self.describe())

    def describe(self) -> str:
        """One or two sentences for a report."""
        ranges = ", ".join(f"{d} {lo:.3f}-{hi:.3f}" for d, (lo, hi) in self.weight_range.items()
                           if hi - lo > 5e-4)
        if self.identified:
            return (f"Identified: every fit has spare points, and the fits within the noise move no weight "
                    f"by more than {self.spread:.3f}.")
        exact = [d for d, f in self.domains.items() if not f.checkable]
        several = [d for d, f in self.domains.items() if f.consistent_fits > 1]
        if exact:
            why = (f"{len(exact)} of {len(self.domains)} domains have no more points than the law has "
                   f"parameters, so their fits pass through every point and nothing checks them"
                   + (f"; {len(several)} of them have several exact fits" if several else ""))
        else:
            why = ("the design could identify the law, but these runs do not: laws that fit them within "
                   f"their noise ({self.level:.0%} profile) put the optimum at different mixes")
        move = (f" Over the consistent fits the weights could move by up to {self.spread:.3f}: {ranges}."
                if ranges else " All of the consistent fits give the same weights.")
        return f"NOT identified by the data: {why}.{move} More multipliers or seeds per domain narrow this."


@dataclass(frozen=True)
class JointIdentifiability(Record):
    """Whether the runs determine the optimum of the joint law (:func:`~.joint.fit_joint`), and how far it
    could move.

    The consistent fits are those whose SSE stays within ``noise_variance · χ²₁(level)`` of the best
    one (linearised); see :func:`~.joint.fit_joint`.

    Attributes:
        identified: spare points, no undetermined direction, and no weight moves by more than ``weight_tol``.
        weight_range: ``{domain: (lo, hi)}`` of the optimal weight at the target over the consistent fits.
        spread: the largest ``hi - lo``.
        undetermined_directions: parameter combinations the runs do not determine (null directions).
        points, parameters: runs fitted and parameters of the law.
        noise_variance: ``s²`` of one run's objective; noise_source: ``"replicates"`` (pure error of
            repeated runs), ``"residual"`` (``SSE / (runs - parameters)``) or ``"none"``.
        level, weight_tol: settings used.
        fits_evaluated: the fits the optimum was computed at.
        per_budget: ``{budget (as "%.17g"): {domain: (lo, hi)}}``, the same range at each fitted budget
            (None in a record written before it was stated).
        pooled: this is the statement carried to one fitted budget (:meth:`at_budget`): ``weight_range``
            is the range there; the other fields are those at the target.
        summary: :meth:`describe` (written, made again when read).

    A record (:mod:`autoscale_data._records`): its JSON has one key per field, ranges as ``[lo, hi]`` lists;
    ``per_budget`` and ``pooled`` are written when set.
    """

    identified: bool
    weight_range: dict[str, tuple[float, float]]
    spread: float
    undetermined_directions: int
    points: int
    parameters: int
    noise_variance: float
    noise_source: str
    level: float
    weight_tol: float
    fits_evaluated: int
    summary: str = field(init=False)
    per_budget: dict[str, dict[str, tuple[float, float]]] | None = omitted(default=None)
    pooled: bool = omitted(default=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "summary", self.describe())

    def at_budget(self, budget: float) -> JointIdentifiability | None:
        """The statement at one fitted budget (its ``per_budget`` range), or None if it has none there."""
        ranges = (self.per_budget or {}).get(f"{float(budget):.17g}")
        if ranges is None:
            return None
        return replace(self, weight_range=dict(ranges), per_budget=None, pooled=True)

    def describe(self) -> str:
        """One or two sentences for a report."""
        if self.identified:
            return (f"Identified: {self.points} runs for {self.parameters} parameters, and the fits within "
                    f"the noise move no weight by more than {self.spread:.3f}.")
        why = []
        if self.undetermined_directions:
            why.append(f"{self.undetermined_directions} parameter combination(s) are not determined by the "
                       "runs")
        if self.spread > self.weight_tol:
            why.append(f"fits within the noise ({self.level:.0%} profile) move a weight by {self.spread:.3f} "
                       f"> {self.weight_tol}")
        ranges = ", ".join(f"{d} {lo:.3f}-{hi:.3f}" for d, (lo, hi) in self.weight_range.items()
                           if hi - lo > 5e-4)
        return (f"NOT identified by the data: {'; '.join(why)}. Over the consistent fits the weights could "
                f"move: {ranges or 'none'}. Runs that vary the uncertain domains' shares more (or at more "
                "budgets) narrow this.")


def identify(fits: Mapping[str, PowerLawFit], optimum: Optimum, *, at: Mapping[str, float] | None = None,
             candidates: Mapping[str, Sequence[PowerLawFit]] | None = None, level: float = 0.95,
             weight_tol: float = 0.01) -> Identifiability:
    """Range of the optimal weights over the fits consistent with each domain's points.

    Args:
        fits: the chosen fit per domain (domain order = the order of ``optimum``'s columns).
        optimum: maps batched ``(amplitude, a, b)`` arrays of shape ``(B, m)`` to optimal weights.
        at: each domain's optimal multiplier, where slopes are compared (default 1, the base).
        candidates: each domain's :func:`~.laws.local_fits`, if already computed.
        level: profile level of the consistent set for fits with spare points.
        weight_tol: largest weight movement that still counts as identified.

    Raises:
        ValueError: ``level`` outside (0, 1) or ``weight_tol`` < 0.
    """
    if not (weight_tol >= 0):
        raise ValueError(f"weight_tol must be >= 0, got {weight_tol}")
    domains = list(fits)
    per = {d: consistent_fits(fits[d], level=level, at=1.0 if at is None else float(at[d]),
                              candidates=None if candidates is None else candidates[d]) for d in domains}
    combos = _combinations([per[d].fits for d in domains])
    table = [np.array(per[d].fits) for d in domains]  # (n_fits_j, 4)
    chosen = np.stack([table[j][combos[:, j]] for j in range(len(domains))], axis=1)  # (B, m, 4)
    weights = optimum(chosen[..., 0], chosen[..., 1], chosen[..., 2])
    lo, hi = weights.min(axis=0), weights.max(axis=0)
    spread = float(np.max(hi - lo))
    ok = all(f.checkable for f in per.values()) and spread <= weight_tol
    return Identifiability(
        identified=bool(ok),
        weight_range={d: (float(lo[j]), float(hi[j])) for j, d in enumerate(domains)},
        spread=spread, domains=per, combinations=int(combos.shape[0]), level=float(level),
        weight_tol=float(weight_tol), samples=weights,
    )
