"""Per-domain loss laws ``L(x) = A·(x + a)^(-b) + c`` and their bounded least-squares fits.

``x`` is a domain's multiplier of the base allocation (x = 1 at the base run). The 3-parameter law
of the paper fixes the amplitude ``A = 1``; the 4-parameter law fits it (``A >= 0``).

Fits are bounded (``b in [0, B_MAX]``, ``x + a > 0`` for every observed x) and multi-start: the
linear parameters (``c``, and ``A`` for the 4-parameter law) are profiled out in closed form over a
grid of the non-linear ones (``a``, ``b``); the best grid points seed a batched Levenberg–Marquardt
refinement (vectorised over starts and over bootstrap replicates), and single fits are polished with
``scipy.optimize.least_squares``. Points may carry weights (seed multiplicities in a bootstrap,
zero to leave a point out).

A law with as many parameters as distinct points can pass through the points in more than one way
(two exact fits of the same three points, with different optima). The single fit is then chosen by
a fixed rule, never by the order in which starts happen to converge: among fits whose error ties
with the best (within rounding), the one with the highest floor ``c``, i.e. the most conservative
extrapolation. :func:`profile_over_b` and :func:`local_fits` expose the alternatives
(see :mod:`.identify`). :func:`fit_power_law_paper` is the authors' own procedure, for comparison.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from scipy.optimize import curve_fit, least_squares

from .._records import Record, transient
from .vocabulary import DEFAULT_LAW, LAW_3P, LAW_4P, law_parameters

__all__ = [
    "B_MAX", "PAPER_START", "PROFILE_B", "PROFILE_SHIFTS", "SHIFT_RANGE", "PowerLawFit", "fit_on_grid",
    "fit_power_law", "fit_power_law_batch", "fit_power_law_paper", "local_fits", "power_law",
    "profile_over_b",
    "shift_frame",
]

B_MAX = 20.0
"""Upper bound of the saturation exponent ``b``."""

SHIFT_RANGE = (1e-4, 1e4)
"""Bounds of ``x_min + a`` relative to ``max |x|`` (the offset ``a`` of a fit)."""
_GRIDS = {  # (number of shift values, b values); "fine" for single fits, "coarse" for replicates
    "fine": (49, np.concatenate([[0.0], np.geomspace(0.02, 16.0, 28)])),
    "coarse": (17, np.concatenate([[0.0], np.geomspace(0.05, 8.0, 12)])),
}
_SCREEN_ITERS = 30
PROFILE_B = np.concatenate([[0.0], np.geomspace(1e-3, B_MAX, 120)])
"""Exponents ``b`` of the profile (:func:`profile_over_b`) and of the consistent-fit grid."""
PROFILE_SHIFTS = 120
"""Log-shift grid points over the whole shift range (profile and consistent-fit grid)."""
_GOLDEN_ITERS = 24
_TIE_RTOL = 1e-9  # fits whose SSE differs by less than this (relative to Σ w y²) are tied

PAPER_START = (1.0, 1.0, 1.0)
"""Start ``(a, b, c)`` of the authors' fit: ``scipy.optimize.curve_fit``'s default."""


def power_law(x: np.ndarray | float, a: float, b: float, c: float, amplitude: float = 1.0) -> np.ndarray:
    """Evaluate ``amplitude · (x + a)^(-b) + c`` elementwise."""
    return amplitude * np.power(np.asarray(x, dtype=np.float64) + a, -b) + c


@dataclass(frozen=True)
class PowerLawFit(Record):
    """One domain's fitted law ``L(x) = amplitude · (x + a)^(-b) + c`` and its diagnostics.

    Attributes:
        a, b, c: fitted offset, saturation exponent and floor.
        amplitude: 1.0 for the 3-parameter law, fitted for ``law="4p"``.
        law: ``"3p"`` or ``"4p"``.
        x, y: the points fitted (multipliers and objective values), in input order.
        residuals: ``y - prediction`` per point.
        sse: sum of squared residuals; ``aar``: mean absolute relative error ``|res| / |y|``.
        dof: points minus parameters.
        at_bound: names of parameters that ended at a bound (``"b=0"``, ``"b=max"``, ``"a=min"``,
            ``"a=max"``, ``"amplitude=0"``); a fit with a bound active is a warning sign.
        n_distinct: number of distinct multipliers fitted (in memory only: None once read from a file).

    A record (:mod:`autoscale_data._records`): its JSON has one key per field, as the ``diagnostics``
    of a DDO file hold it.
    """

    a: float
    b: float
    c: float
    amplitude: float
    law: str
    x: tuple[float, ...]
    y: tuple[float, ...]
    residuals: tuple[float, ...]
    sse: float
    aar: float
    dof: int
    at_bound: tuple[str, ...]
    n_distinct: int | None = transient(default=None)

    def predict(self, x: np.ndarray | float) -> np.ndarray:
        """Predicted objective at multiplier(s) ``x``."""
        return power_law(x, self.a, self.b, self.c, self.amplitude)

    @property
    def parameters(self) -> dict[str, float]:
        """``a``, ``b``, ``c`` (and ``amplitude`` for the 4-parameter law): a DDO file's ``fit`` entry."""
        return {"a": self.a, "b": self.b,
                "c": self.c} | ({"amplitude": self.amplitude} if self.law == LAW_4P else {})


def _n_params(law: str) -> int:
    if law not in (LAW_3P, LAW_4P):
        raise ValueError(f"law must be '3p' or '4p', got {law!r}")
    return law_parameters(law)


def shift_frame(x: np.ndarray) -> tuple[float, float, float]:
    """``xmin`` and the bounds of the log shift ``s`` (``a = exp(s) - xmin``) for points ``x``."""
    scale = max(float(np.max(np.abs(x))), 1e-12)
    return float(np.min(x)), np.log(SHIFT_RANGE[0] * scale), np.log(SHIFT_RANGE[1] * scale)


def _basis(x: np.ndarray, xmin: float, s: np.ndarray, b: np.ndarray):
    """z = x + a with a = exp(s) - xmin; returns z, log z, z^-b (all shaped (..., n))."""
    z = x - xmin + np.exp(s)[..., None]
    logz = np.log(z)
    return z, logz, np.exp(-b[..., None] * logz)


def _profile(phi: np.ndarray, y: np.ndarray, w: np.ndarray, four: bool):
    """Closed-form linear parameters (amplitude, c) for fixed basis ``phi``; weighted LS."""
    sw = w.sum(-1)
    if not four:
        amp = np.ones(phi.shape[:-1])
        c = (w * (y - phi)).sum(-1) / sw
        return amp, c
    mp = (w * phi).sum(-1) / sw
    my = (w * y).sum(-1) / sw
    vp = (w * (phi - mp[..., None]) ** 2).sum(-1)
    cov = (w * (phi - mp[..., None]) * (y - my[..., None])).sum(-1)
    amp = np.where(vp > 1e-300, cov / np.where(vp > 1e-300, vp, 1.0), 0.0)
    amp = np.maximum(amp, 0.0)
    return amp, my - amp * mp


def _validate(x: np.ndarray, y: np.ndarray, w: np.ndarray, law: str) -> None:
    k = _n_params(law)
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"x must be a non-empty 1-D array, got shape {x.shape}")
    if not np.all(np.isfinite(x)) or np.any(x < 0):
        raise ValueError(f"multipliers must be finite and >= 0, got {x.tolist()}")
    if y.shape[-1] != x.size or w.shape != y.shape:
        raise ValueError(f"y {y.shape} and weights {w.shape} must end in len(x) = {x.size}")
    if not np.all(np.isfinite(y)):
        raise ValueError("objective values must be finite (got NaN or inf)")
    if np.any(w < 0) or not np.all(np.isfinite(w)):
        raise ValueError("point weights must be finite and >= 0")
    distinct = np.array([np.unique(x[row > 0]).size for row in w.reshape(-1, x.size)])
    if np.any(distinct < k):
        raise ValueError(
            f"the {law} law needs at least {k} distinct multipliers with data, got "
            f"{int(distinct.min())} (x = {sorted(set(np.round(x, 6).tolist()))})"
        )


def fit_power_law_batch(x: np.ndarray, y: np.ndarray, weights: np.ndarray | None = None, *,
                        law: str = DEFAULT_LAW,
                        n_starts: int = 1, per_b_starts: bool = False, init: dict[str, float] | None = None,
                        grid: str = "fine", max_iter: int = 200) -> dict[str, np.ndarray]:
    """Fit the law to many data sets sharing the multipliers ``x`` at once.

    Args:
        x: multipliers, shape ``(n,)``.
        y: objective values, shape ``(B, n)`` (or ``(n,)``).
        weights: per-point weights, same shape as ``y`` (default 1).
        law: ``"3p"`` (amplitude fixed at 1) or ``"4p"``.
        n_starts: best grid points refined per data set; the best refinement is kept.
        per_b_starts: also refine, for every grid value of b, the best grid point with that b
            (a diverse set of starts; the valleys of the 3-parameter law are narrow).
        init: an extra start for every data set (``a``, ``b``, ``c``, ``amplitude``), e.g. the
            point estimate when refitting bootstrap replicates.
        grid: ``"fine"`` (49 x 29 grid of shift and b) or ``"coarse"`` (17 x 13, for refits that
            also get ``init``).
        max_iter: Levenberg–Marquardt iterations. All starts are screened for a few iterations;
            the best one per data set is then refined to convergence.

    Returns:
        dict of arrays shaped ``(B,)``: ``a``, ``b``, ``c``, ``amplitude``, ``sse``.
    """
    x = np.asarray(x, dtype=np.float64)
    y2 = np.atleast_2d(np.asarray(y, dtype=np.float64))
    w2 = np.ones_like(y2) if weights is None else np.atleast_2d(np.asarray(weights, dtype=np.float64))
    _validate(x, y2, w2, law)
    four = law == LAW_4P
    nb = y2.shape[0]
    xmin, s_lo, s_hi = shift_frame(x)
    batch = _Batch(x, y2, w2, four, xmin, s_lo, s_hi)
    params = _grid_starts(batch, grid, n_starts, per_b_starts)  # (B, starts, k)
    if init is not None:
        params = np.concatenate([params, _init_start(batch, init, nb)], 1)
    n_starts = params.shape[1]
    params = params.reshape(nb * n_starts, -1)
    if n_starts > 1:  # screen every start briefly, keep the best per data set
        rows = np.repeat(np.arange(nb), n_starts)
        params, fsse = _levenberg_marquardt(batch._replace(y=y2[rows], w=w2[rows]), params, _SCREEN_ITERS)
        best = np.argmin(fsse.reshape(nb, n_starts), axis=1)
        params = params.reshape(nb, n_starts, -1)[np.arange(nb), best]
    params, fsse = _levenberg_marquardt(batch, params, max_iter)
    amplitude = params[:, 2] if four else np.ones(nb)
    return {"a": np.exp(params[:, 0]) - xmin, "b": params[:, 1], "amplitude": amplitude, "c": params[:, -1],
            "sse": fsse}


def _init_start(batch: _Batch, init: dict[str, float], nb: int) -> np.ndarray:
    """The start ``init`` gives (``a``, ``b``, ``c``, ``amplitude``) in the fit's parameters, for each of
    ``nb`` data sets: shape ``(nb, 1, k)``."""
    s0 = np.clip(np.log(np.maximum(init["a"] + batch.xmin, 1e-300)), batch.s_lo, batch.s_hi)
    extra = [s0, np.clip(init["b"], 0.0, B_MAX),
             *([max(init.get("amplitude", 1.0), 0.0)] if batch.four else []),
             init["c"]]
    return np.broadcast_to(np.array(extra, dtype=np.float64), (nb, 1, len(extra)))


class _Batch(NamedTuple):
    """Data sets sharing the multipliers ``x`` (their shift frame ``xmin`` and log-shift range ``s_lo``,
    ``s_hi``): targets ``y`` and weights ``w``, shape ``(batch, n)``; ``four``: the 4-parameter law (a fitted
    amplitude)."""

    x: np.ndarray
    y: np.ndarray
    w: np.ndarray
    four: bool
    xmin: float
    s_lo: float
    s_hi: float

    def box(self) -> tuple[np.ndarray, np.ndarray]:
        """The bounds of the parameters (log shift, b, [amplitude,] c)."""
        return (np.array([self.s_lo, 0.0] + ([0.0] if self.four else []) + [-np.inf]),
                np.array([self.s_hi, B_MAX] + ([np.inf] if self.four else []) + [np.inf]))


def _grid_starts(batch: _Batch, grid: str, n_starts: int, per_b_starts: bool) -> np.ndarray:
    """The starts of :func:`fit_power_law_batch` per data set, ``(B, starts, k)``: its best points of the grid
    of (log shift, b), the linear parameters profiled (and with ``per_b_starts`` the best point of every
    b)."""
    x, y2, w2, four, xmin, s_lo, s_hi = batch
    if grid not in _GRIDS:
        raise ValueError(f"grid must be 'fine' or 'coarse', got {grid!r}")
    n_shift, b_grid = _GRIDS[grid]
    sg, bg = np.meshgrid(np.linspace(s_lo, s_hi, n_shift), b_grid, indexing="ij")
    sg, bg = sg.ravel(), bg.ravel()
    _, _, phi = _basis(x, xmin, sg, bg)  # (G, n)
    amp, c = _profile(phi[None], y2[:, None, :], w2[:, None, :], four)  # (B, G)
    res = y2[:, None, :] - amp[..., None] * phi[None] - c[..., None]
    sse = (w2[:, None, :] * res * res).sum(-1)
    order = np.argsort(sse, axis=1)[:, :max(1, min(n_starts, sg.size))]  # (B, S)
    if per_b_starts:
        nbg = b_grid.size
        per_b = np.argmin(sse.reshape(len(y2), n_shift, nbg), axis=1) * nbg + np.arange(nbg)
        order = np.concatenate([order, per_b], axis=1)
    rows = np.arange(len(y2))[:, None]
    return np.stack([sg[order], bg[order], *([amp[rows, order]] if four else []), c[rows, order]], axis=-1)


def _model_jac(x: np.ndarray, xmin: float, p: np.ndarray, four: bool) -> tuple[np.ndarray, np.ndarray]:
    """The law and its Jacobian for a batch of parameter rows ``p`` = (log shift, b, [amplitude,] c):
    predictions ``(batch, n)`` and derivatives ``(batch, n, k)`` at the multipliers ``x``."""
    s, b = p[:, 0], p[:, 1]
    amp = p[:, 2] if four else np.ones(len(p))
    z, logz, phi = _basis(x, xmin, s, b)
    f = amp[:, None] * phi + p[:, -1][:, None]
    cols = [-amp[:, None] * b[:, None] * phi / z * np.exp(s)[:, None], -amp[:, None] * phi * logz]
    if four:
        cols.append(phi)
    cols.append(np.ones_like(phi))
    return f, np.stack(cols, axis=-1)  # (B, n), (B, n, k)


def _levenberg_marquardt(batch: _Batch, start: np.ndarray, max_iter: int) -> tuple[np.ndarray, np.ndarray]:
    """Batched, box-projected Levenberg–Marquardt on weighted squared residuals.

    Args:
        batch: the problems (every step is clipped into :meth:`_Batch.box`).
        start: each problem's starting parameters (log shift, b, [amplitude,] c), shape ``(batch, k)``.
        max_iter: iterations at most.

    Returns:
        ``(parameters, weighted SSE)`` per problem. A problem stops when a step gains nothing, moves
        nothing, its damping runs away or its fit is exact; stopped problems are written back and
        dropped from the working set, so late iterations touch only the slow ones.
    """
    x, y, weights, four, xmin = batch[:5]
    lower, upper = batch.box()
    params = start.copy()
    pred, jac = _model_jac(x, xmin, params, four)
    resid = y - pred
    sse = (weights * resid * resid).sum(-1)
    exact = 1e-26 * (weights * y * y).sum(-1)  # an exact interpolation: nothing left to gain
    out_params, out_sse = params.copy(), sse.copy()
    active = np.flatnonzero(sse > exact)  # indices (into the batch) of the problems still iterating
    p, j, r, s, t, w, floor = (v[active] for v in (params, jac, resid, sse, y, weights, exact))
    damping = np.full(active.size, 1e-3)
    eye = np.eye(params.shape[1])
    for _ in range(max_iter):
        if active.size == 0:
            break
        trial = np.clip(p + _lm_step(j, w, r, damping, eye), lower, upper)
        trial_pred, trial_jac = _model_jac(x, xmin, trial, four)
        trial_resid = t - trial_pred
        trial_sse = (w * trial_resid * trial_resid).sum(-1)
        better = np.isfinite(trial_sse) & (trial_sse <= s)
        gain = np.where(better, s - trial_sse, 0.0)
        moved = np.abs(trial - p).max(-1)
        p[better], j[better], r[better], s[better] = (trial[better], trial_jac[better], trial_resid[better],
                                                      trial_sse[better])
        damping = np.where(better, np.maximum(damping / 3.0, 1e-12), damping * 4.0)
        done = ((better & ((gain <= 1e-15 * (s + 1e-300)) | (moved < 1e-13))) | (damping > 1e12)
                | (s <= floor))
        if done.any():
            out_params[active[done]], out_sse[active[done]] = p[done], s[done]
            keep = ~done
            active, p, j, r, s, t, w, floor, damping = (
                v[keep] for v in (active, p, j, r, s, t, w, floor, damping))
    out_params[active], out_sse[active] = p, s
    return out_params, out_sse


def _lm_step(j: np.ndarray, w: np.ndarray, r: np.ndarray, damping: np.ndarray, eye: np.ndarray) -> np.ndarray:
    """One damped Gauss-Newton step per problem (Marquardt's scaling of the diagonal)."""
    jw = j * w[..., None]
    jtj = np.einsum("bnk,bnl->bkl", jw, j)
    jtr = np.einsum("bnk,bn->bk", jw, r)
    diag = np.einsum("bkk->bk", jtj)
    damp = damping[:, None] * np.maximum(diag, 1e-12 * (1.0 + diag.max(-1, keepdims=True)))
    return np.linalg.solve(jtj + damp[..., None] * eye, jtr[..., None])[..., 0]


def _bound_flags(a: float, b: float, amp: float, x: np.ndarray, law: str) -> tuple[str, ...]:
    scale = max(float(np.max(np.abs(x))), 1e-12)
    shift = (a + float(np.min(x))) / scale
    flags = []
    if b <= 1e-8:
        flags.append("b=0")
    if b >= B_MAX * (1 - 1e-8):
        flags.append("b=max")
    if shift <= SHIFT_RANGE[0] * (1 + 1e-6):
        flags.append("a=min")
    if shift >= SHIFT_RANGE[1] * (1 - 1e-6):
        flags.append("a=max")
    if law == LAW_4P and amp <= 1e-12:
        flags.append("amplitude=0")
    return tuple(flags)


def _fit_from(xa, ya, wa, law, params) -> PowerLawFit:
    a, b, c, amp = params
    span = power_law(np.array([xa.min(), xa.max()]), a, b, c, amp)
    if abs(span[0] - span[1]) <= 1e-12 * (1.0 + abs(span[0])):
        # A vanishing basis (huge a) is the flat law: write it as b = 0 so it reads as such.
        level = float(span.mean())
        b, c = 0.0, level - amp
    pred = power_law(xa, a, b, c, amp)
    res = ya - pred
    wsum = wa.sum()
    return PowerLawFit(
        a=a, b=b, c=c, amplitude=amp, law=law,
        x=tuple(xa.tolist()), y=tuple(ya.tolist()), residuals=tuple(res.tolist()),
        sse=float((wa * res * res).sum()),
        aar=float((wa * np.abs(res) / np.maximum(np.abs(ya), 1e-300)).sum() / wsum),
        n_distinct=int(np.unique(xa[wa > 0]).size),
        dof=int(np.count_nonzero(wa > 0) - _n_params(law)),
        at_bound=_bound_flags(a, b, amp, xa, law),
    )


def _points(x, y, weights) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    xa = np.asarray(x, dtype=np.float64)
    ya = np.asarray(y, dtype=np.float64)
    wa = np.ones_like(ya) if weights is None else np.asarray(weights, dtype=np.float64)
    if ya.shape != xa.shape:
        raise ValueError(f"x and y must have the same length, got {xa.shape} and {ya.shape}")
    return xa, ya, wa


def fit_on_grid(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray, log_shift: np.ndarray,
                b: np.ndarray, *, law: str = DEFAULT_LAW,
                weights: Sequence[float] | np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The best fit with ``a = exp(log_shift) - min(x)`` and ``b`` fixed (arrays of one shape).

    The linear parameters (``c``, and the amplitude for ``"4p"``) are solved in closed form.

    Returns:
        dict of arrays shaped like the inputs: ``a``, ``b``, ``c``, ``amplitude``, ``sse``.
    """
    xa, ya, wa = _points(x, y, weights)
    s_, b_ = np.broadcast_arrays(np.asarray(log_shift, dtype=np.float64), np.asarray(b, dtype=np.float64))
    _, _, phi = _basis(xa, float(np.min(xa)), s_, b_)
    amp, c = _profile(phi, ya, wa, law == LAW_4P)
    r = ya - amp[..., None] * phi - c[..., None]
    return {"a": np.exp(s_) - float(np.min(xa)), "b": b_, "c": c, "amplitude": amp,
            "sse": (wa * r * r).sum(-1)}


def profile_over_b(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray, *,
                   law: str = DEFAULT_LAW,
                   weights: Sequence[float] | np.ndarray | None = None,
                   b_values: Sequence[float] | np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The best fit for every fixed exponent ``b``: the profile of the error over ``b``.

    For each ``b`` the linear parameters are solved in closed form and the offset ``a`` by a grid
    followed by golden-section search, so the profile is deterministic and cheap.

    Returns:
        dict of arrays shaped like ``b_values`` (default: 0 and 120 values from 1e-3 to ``B_MAX``):
        ``b``, ``a``, ``c``, ``amplitude``, ``sse``.
    """
    xa, ya, wa = _points(x, y, weights)
    _validate(xa, ya[None], wa[None], law)
    b = PROFILE_B if b_values is None else np.asarray(b_values, dtype=np.float64)
    if b.ndim != 1 or b.size == 0 or np.any(~np.isfinite(b)) or np.any(b < 0):
        raise ValueError(f"b_values must be a non-empty 1-D array of finite values >= 0, got {b!r}")
    _, s_lo, s_hi = shift_frame(xa)
    grid = np.linspace(s_lo, s_hi, PROFILE_SHIFTS)
    sse = fit_on_grid(xa, ya, grid[:, None], b[None, :], law=law, weights=wa)["sse"]
    i = np.argmin(sse, axis=0)
    lo, hi = grid[np.maximum(i - 1, 0)], grid[np.minimum(i + 1, grid.size - 1)]
    ratio = (np.sqrt(5.0) - 1) / 2
    for _ in range(_GOLDEN_ITERS):  # golden section on each b's bracket, all b at once
        m1, m2 = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
        sse = fit_on_grid(xa, ya, np.stack([m1, m2]), b, law=law, weights=wa)["sse"]
        left = sse[0] <= sse[1]
        hi, lo = np.where(left, m2, hi), np.where(left, lo, m1)
    return fit_on_grid(xa, ya, (lo + hi) / 2, b, law=law, weights=wa)


def local_fits(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray, *, law: str = DEFAULT_LAW,
               weights: Sequence[float] | np.ndarray | None = None) -> list[PowerLawFit]:
    """Every distinct local least-squares fit, best first (ties ordered by the highest floor ``c``).

    Each local minimum of :func:`profile_over_b` is refined (batched Levenberg–Marquardt, the
    best one also by ``least_squares``); fits that coincide are merged. With as many points as
    parameters these are the exact fits through the points (there may be several).
    """
    xa, ya, wa = _points(x, y, weights)
    prof = profile_over_b(xa, ya, law=law, weights=wa)
    sse = prof["sse"]
    interior = np.r_[sse[0] <= sse[1], (sse[1:-1] <= sse[:-2]) & (sse[1:-1] <= sse[2:]), sse[-1] <= sse[-2]]
    idx = np.flatnonzero(interior)
    four = law == LAW_4P
    xmin, s_lo, s_hi = shift_frame(xa)
    cols = [np.clip(np.log(np.maximum(prof["a"][idx] + xmin, 1e-300)), s_lo, s_hi), prof["b"][idx]]
    cols += ([prof["amplitude"][idx]] if four else []) + [prof["c"][idx]]
    ys, ws = np.broadcast_to(ya, (idx.size, ya.size)), np.broadcast_to(wa, (idx.size, ya.size))
    params, out_sse = _levenberg_marquardt(_Batch(xa, ys, ws, four, xmin, s_lo, s_hi), np.stack(cols, axis=1),
                                           200)
    fits: list[PowerLawFit] = []
    for p in params[np.argsort(out_sse, kind="stable")]:
        f = _fit_from(xa, ya, wa, law, (float(np.exp(p[0]) - xmin), float(p[1]), float(p[-1]),
                                        float(p[2]) if four else 1.0))
        if not any(_same_law(f, g) for g in fits):
            fits.append(f)
    if fits[0].sse > 1e-26 * float((wa * ya * ya).sum()):  # the best is not exact: a final polish
        fits[0] = _fit_from(xa, ya, wa, law, _polish(xa, ya, wa, law, fits[0]))
    tie = _TIE_RTOL * float((wa * ya * ya).sum())
    best = min(f.sse for f in fits)
    return sorted(fits, key=lambda f: (0, -f.c) if f.sse <= best + tie else (1, f.sse))


def _same_law(f: PowerLawFit, g: PowerLawFit) -> bool:
    """Two fits that predict the same values over the fitted range and one step beyond it."""
    probe = np.geomspace(min(f.x), 2 * max(f.x), 9)
    pf, pg = f.predict(probe), g.predict(probe)
    return bool(np.all(np.abs(pf - pg) <= 1e-7 * (1 + np.abs(pf))))


def fit_power_law(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray, *, law: str = DEFAULT_LAW,
                  weights: Sequence[float] | np.ndarray | None = None) -> PowerLawFit:
    """Fit ``L(x) = A·(x + a)^(-b) + c`` to one domain's points by bounded multi-start least squares.

    Args:
        x: multipliers (x = 1 at the base run); repeated values (seeds) are all used.
        y: objective values at those multipliers.
        law: ``"3p"`` (A = 1, the paper's law) or ``"4p"`` (A >= 0 fitted; needs 4 distinct x).
        weights: optional per-point weights (default 1).

    Returns:
        The best fit, with residuals, AAR and the parameters that sit at a bound; when several fits
        tie (exact fits of too few points), the one with the highest floor ``c``.

    Raises:
        ValueError: non-finite values, negative multipliers, or fewer distinct multipliers than
            the law has parameters.
    """
    return local_fits(x, y, law=law, weights=weights)[0]


def fit_power_law_paper(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray, *,
                        start: tuple[float, float, float] = PAPER_START,
                        max_evals: int = 10000) -> PowerLawFit:
    """The authors' fit of the 3-parameter law: ``scipy.optimize.curve_fit`` from ``start``, unbounded.

    Levenberg–Marquardt (MINPACK) with no bounds and no restarts, as in their public notebook. Its
    answer for points that several laws pass through exactly is the root nearest the start in
    MINPACK's sense; :func:`fit_power_law` is bounded, multi-start and picks ties by a fixed rule.

    Raises:
        ValueError: bad points, or the fit failed or left the law's domain (``x + a <= 0``).
    """
    xa, ya, wa = _points(x, y, None)
    _validate(xa, ya[None], wa[None], LAW_3P)
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "covariance could not be estimated": expected for exact fits
            (a, b, c), _ = curve_fit(lambda t, a, b, c: np.power(t + a, -b) + c, xa, ya,
                                     p0=list(start), maxfev=int(max_evals))
    except RuntimeError as exc:
        raise ValueError(f"the paper's fit did not converge from {start}: {exc}") from None
    if not (np.isfinite([a, b, c]).all() and xa.min() + a > 0):
        raise ValueError(f"the paper's fit left the law's domain: a={a}, b={b}, c={c} for x={xa.tolist()}")
    return _fit_from(xa, ya, wa, LAW_3P, (float(a), float(b), float(c), 1.0))


def _polish(x, y, w, law, fit: PowerLawFit):
    """Final bounded ``least_squares`` from the batched solution ``fit``; kept only if it is better."""
    a, b, c, amp, sse0 = fit.a, fit.b, fit.c, fit.amplitude, fit.sse
    four = law == LAW_4P
    xmin, s_lo, s_hi = shift_frame(x)
    sw = np.sqrt(w)

    def resid(p):
        amp_ = p[2] if four else 1.0
        return sw * (power_law(x, np.exp(p[0]) - xmin, p[1], p[-1], amp_) - y)

    s0 = float(np.clip(np.log(max(a + xmin, 1e-300)), s_lo, s_hi))
    p0 = [s0, float(np.clip(b, 0.0, B_MAX))] + ([amp] if four else []) + [c]
    lo = [s_lo, 0.0] + ([0.0] if four else []) + [-np.inf]
    hi = [s_hi, B_MAX] + ([np.inf] if four else []) + [np.inf]
    try:
        sol = least_squares(resid, p0, bounds=(lo, hi), method="trf", x_scale="jac",
                            ftol=1e-14, xtol=1e-14, gtol=1e-14, max_nfev=200)
    except (ValueError, FloatingPointError):
        return a, b, c, amp
    if np.isfinite(sol.cost) and 2.0 * sol.cost < sse0:
        p = sol.x
        return float(np.exp(p[0]) - xmin), float(p[1]), float(p[-1]), float(p[2] if four else 1.0)
    return a, b, c, amp
