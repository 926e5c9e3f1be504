"""DDO and the projection in effective tokens: the law knows repetition.

A domain drawn in epochs is worth its *effective* tokens ``D'(D; U)`` (:mod:`.repetition`, Muennighoff
et al. 2023), not its raw tokens ``D``. Here the per-domain laws of DDO are fitted against effective
tokens, so a run that repeats a domain is read as the fresh data it is worth, and every optimisation
keeps its budget in raw tokens, which is what a run trains:

- :func:`effective_table` maps a run table's tokens to effective tokens (each domain against the unique
  tokens its runs drew from: the whole domain, or a repetition-matched proxy's pool); :func:`~.ddo.fit_ddo`
  on it fits ``L_j(x') = (x' + a_j)^(-b_j) + c_j`` in effective multipliers ``x'``.
- :func:`allocate_effective` minimises ``Σ_j β_j (x'_j + a_j)^(-b_j)`` subject to
  ``Σ_j raw(x'_j e_j; U_j) = N`` and raw-token bounds. ``raw`` is convex and increasing in effective
  tokens, the objective convex and decreasing, so the problem is convex and its KKT conditions
  ``β_j b_j (x'_j + a_j)^(-b_j-1) / e_j = λ raw'(x'_j e_j)`` have one solution: each domain's ``x'_j(λ)``
  by Brent's method on a monotone function, then ``λ`` by Brent's method on the monotone raw total.
  :func:`optimize_effective` applies it to a :class:`~.ddo.DDOResult` fitted on effective tokens.
- :func:`project_effective` takes any projection of effective allocations across budgets (the
  per-budget optima's path) and finds the *effective* budget ``E`` whose allocation costs exactly the
  target's raw budget, ``Σ_j min(raw(e_j(E); U_j), cap_j) = T``, with the target's unique tokens ``U_j``;
  the raw allocation gives the weights. A domain the path asks more of than its cap (``max_epochs``) is
  held at the cap and flagged, and the effective budget grows until the others spend the rest.

With unique tokens far above every budget ``raw`` is the identity and each function gives what its
raw-token counterpart gives (:func:`~.allocate.allocate`, the projection at ``T``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import brentq

from .._records import Record
from .repetition import R_STAR, effective_tokens, raw_tokens
from .runs import Run, RunTable

__all__ = ["EffectiveAllocation", "EffectiveOptimum", "EffectiveProjection", "allocate_effective",
           "effective_table", "optimize_effective", "project_effective", "raw_slope"]

_RTOL = 1e-12


def raw_slope(effective: Any, unique: Any, r_star: float = R_STAR) -> np.ndarray:
    """``d raw / d effective``: 1 within the first epoch, ``1 / (1 - (e - U) / (U R*))`` beyond (``inf`` at
    the bound)."""
    e = np.asarray(effective, dtype=np.float64)
    u = np.asarray(unique, dtype=np.float64)
    frac = np.clip((e - u) / (u * r_star), 0.0, 1.0)
    with np.errstate(divide="ignore"):
        return np.where(e <= u, 1.0, 1.0 / (1.0 - frac))


def effective_table(runs: RunTable, unique: Mapping[str, float], r_star: float = R_STAR) -> RunTable:
    """``runs`` with every domain's tokens replaced by its effective tokens against ``unique[domain]``.

    Raises:
        ValueError: a training domain of the runs missing from ``unique``, or bad values.
    """
    out = []
    for run in runs:
        missing = sorted(set(run.tokens) - set(unique))
        if missing:
            raise ValueError(f"unique tokens are missing for domains {missing} (run {run.run_id!r})")
        tokens = {d: float(effective_tokens(float(n), float(unique[d]), r_star))
                  for d, n in run.tokens.items()}
        out.append(Run(run.run_id, tokens=tokens, loss=dict(run.loss), seed=run.seed, label=run.label))
    return RunTable(out)


@dataclass(frozen=True)
class EffectiveAllocation:
    """The optimum of :func:`allocate_effective` (arrays in the order of its inputs).

    Attributes:
        x: effective multipliers of the base effective tokens.
        effective: effective tokens ``x * base``.
        raw: raw tokens (``raw(effective; unique)``); they sum to the budget.
        at_lower, at_upper: the domains held at a raw-token bound.
        lam: the multiplier of the raw budget (0 when degenerate).
        degenerate: flat laws had to take budget no fitted law wanted (the split among them is arbitrary).
    """

    x: np.ndarray
    effective: np.ndarray
    raw: np.ndarray
    at_lower: np.ndarray
    at_upper: np.ndarray
    lam: float
    degenerate: bool


def allocate_effective(amplitude: Sequence[float], a: Sequence[float], b: Sequence[float],
                       base_effective: Sequence[float], unique: Sequence[float], budget: float,
                       raw_lo: Sequence[float], raw_hi: Sequence[float],
                       r_star: float = R_STAR) -> EffectiveAllocation:
    """Minimise ``Σ_j β_j (x_j + a_j)^(-b_j)`` s.t. ``Σ_j raw(x_j e_j; U_j) = budget``, ``lo_j <= raw_j <=
    hi_j``.

    Args:
        amplitude, a, b: each domain's law in effective multipliers (``β >= 0``, ``b >= 0``).
        base_effective: the base run's effective tokens ``e_j`` (> 0).
        unique: unique tokens ``U_j`` the domain is drawn from (> 0).
        budget: raw tokens in all.
        raw_lo, raw_hi: raw-token bounds per domain (``hi`` finite).
        r_star: ``R*`` of :func:`~.repetition.effective_tokens`.

    Raises:
        ValueError: shapes or values out of range, bounds that cannot meet the budget, or an upper bound
            outside a law's domain (``x + a <= 0``).
    """
    arrays = tuple(np.asarray(v, dtype=np.float64)
                   for v in (amplitude, a, b, base_effective, unique, raw_lo, raw_hi))
    _check_problem(arrays, budget)
    beta, aa, bb, eb, u, lo_r, hi_r = arrays
    e_lo, e_hi = _effective_bounds(arrays, budget, r_star)
    law = _Worth(beta, aa, bb, eb, u, e_lo, e_hi, r_star)
    free = np.flatnonzero(~law.flat)
    degenerate = False
    if free.size:
        top = max(law.log_gain(j, e_lo[j]) - float(np.log(raw_slope(e_lo[j], u[j], r_star)))
                  for j in free) + 1.0
        bottom = min(law.log_gain(j, e_hi[j]) - float(np.log(raw_slope(e_hi[j], u[j], r_star)))
                     for j in free) - 1.0
    if free.size == 0 or law.total(bottom) < budget * (1 - _RTOL):
        # the fitted laws want less than the budget (all at their upper bounds): flat laws absorb the rest
        degenerate, lam = True, 0.0
        raw = np.asarray(raw_tokens(law.e_at(bottom) if free.size else e_lo.copy(), u, r_star),
                         dtype=np.float64)
        raw, e = _spread_over_flat(law.flat, raw, hi_r, budget, lambda r: effective_tokens(r, u, r_star))
    else:
        # top: every domain at its lower bound
        log_lam = top if law.total(top) >= budget * (1 - _RTOL) else brentq(
            lambda s: law.total(s) - budget, bottom, top, xtol=1e-14, rtol=4 * np.finfo(float).eps,
            maxiter=500)
        lam = math.exp(log_lam)
        e = law.e_at(log_lam)
        raw = np.asarray(raw_tokens(e, u, r_star), dtype=np.float64)
    at_upper = raw >= hi_r * (1 - 1e-9)
    return EffectiveAllocation(x=e / eb, effective=e, raw=raw,
                               at_lower=(raw <= lo_r * (1 + 1e-9) + 1e-9) & ~at_upper,
                               at_upper=at_upper, lam=float(lam), degenerate=degenerate)


def _effective_bounds(arrays: tuple[np.ndarray, ...], budget: float,
                      r_star: float) -> tuple[np.ndarray, np.ndarray]:
    """The raw bounds in effective tokens, the lower one lifted so that ``x + a > 0`` (log-worth finite)."""
    _, aa, _, eb, u, lo_r, hi_r = arrays
    e_lo = np.asarray(effective_tokens(lo_r, u, r_star), dtype=np.float64).reshape(u.shape)
    e_hi = np.asarray(effective_tokens(hi_r, u, r_star), dtype=np.float64).reshape(u.shape)
    if np.any(e_hi / eb + aa <= 0):
        raise ValueError("a domain's upper bound lies outside its law's domain (x + a <= 0)")
    return np.maximum(e_lo, eb * np.maximum(-aa, 0.0) * (1 + 1e-12) + 1e-12 * budget), e_hi


def _spread_over_flat(flat: np.ndarray, raw: np.ndarray, hi_r: np.ndarray, budget: float,
                      effective: Callable[[np.ndarray], Any]) -> tuple[np.ndarray, np.ndarray]:
    """The fitted laws want less than the budget (all at their upper bounds): the flat laws' domains (every
    domain when they have no room) absorb the rest; the raw and effective allocations."""
    room = np.where(flat, hi_r - raw, 0.0)
    if room.sum() <= 0:
        room = hi_r - raw
    raw = raw + room * (budget - raw.sum()) / room.sum()
    return raw, np.asarray(effective(raw), dtype=np.float64).reshape(raw.shape)


def _check_problem(arrays: tuple[np.ndarray, ...], budget: float) -> None:
    """The ``ValueError`` of :func:`allocate_effective` for shapes or values out of range (``arrays``: its law
    parameters, base tokens, unique tokens and bounds)."""
    beta, aa, bb, eb, u, lo_r, hi_r = arrays
    if any(v.shape != beta.shape for v in arrays) or beta.ndim != 1:
        raise ValueError("law parameters, base tokens, unique tokens and bounds must be 1-D of one length, "
                         f"got {[v.shape for v in arrays]}")
    if np.any(~(eb > 0)) or np.any(~np.isfinite(eb)):
        raise ValueError(f"base effective tokens must be positive and finite, got {eb.tolist()}")
    if np.any(~(beta >= 0)) or np.any(~(bb >= 0)):
        raise ValueError(f"law amplitudes and exponents must be >= 0, got {beta.tolist()} and {bb.tolist()}")
    if np.any(~np.isfinite(hi_r)) or np.any(~(lo_r >= 0)) or np.any(lo_r > hi_r):
        raise ValueError(f"raw bounds must satisfy 0 <= lo <= hi < inf, got {lo_r.tolist()} and "
                         f"{hi_r.tolist()}")
    if not (math.isfinite(budget) and budget > 0):
        raise ValueError(f"budget must be > 0 tokens, got {budget}")
    if lo_r.sum() > budget * (1 + 1e-12) or hi_r.sum() < budget * (1 - 1e-12):
        raise ValueError(f"raw-token bounds (sum {lo_r.sum():g} to {hi_r.sum():g}) cannot meet the budget "
                         f"{budget:g}")


@dataclass(frozen=True)
class _Worth:
    """The laws of :func:`allocate_effective` in effective tokens, and each domain's tokens at a price of raw
    tokens."""

    beta: np.ndarray
    aa: np.ndarray
    bb: np.ndarray
    eb: np.ndarray
    u: np.ndarray
    e_lo: np.ndarray
    e_hi: np.ndarray
    r_star: float

    @property
    def flat(self) -> np.ndarray:
        """The domains whose law gains nothing from tokens."""
        return ~(self.beta * self.bb > 0)

    def log_gain(self, j: int, e: float) -> float:
        """The log of -dL/de: the worth of one more effective token of domain ``j`` at ``e``."""
        return float(np.log(self.beta[j] * self.bb[j]) - (self.bb[j] + 1.0) * np.log(e / self.eb[j] + self.aa[j])
                     - np.log(self.eb[j]))

    def e_at(self, log_lam: float) -> np.ndarray:
        """Each domain's effective tokens where its worth per raw token is ``exp(log_lam)`` (within its
        bounds)."""
        out = self.e_lo.copy()
        for j in np.flatnonzero(~self.flat):
            def h(e: float, j: int = j) -> float:  # decreasing in e: worth falls, raw cost rises
                return self.log_gain(j, e) - log_lam - float(np.log(raw_slope(e, self.u[j], self.r_star)))
            if h(self.e_lo[j]) <= 0:
                out[j] = self.e_lo[j]
            elif h(self.e_hi[j]) >= 0:
                out[j] = self.e_hi[j]
            else:
                out[j] = brentq(h, self.e_lo[j], self.e_hi[j], xtol=1e-15 * self.e_hi[j],
                                rtol=4 * np.finfo(float).eps)
        return out

    def total(self, log_lam: float) -> float:
        """The raw tokens of :meth:`e_at` in all."""
        return float(np.sum(raw_tokens(self.e_at(log_lam), self.u, self.r_star)))


@dataclass(frozen=True)
class EffectiveOptimum(Record):
    """The optimum of a DDO law in effective tokens at one raw budget (:func:`optimize_effective`).

    Attributes:
        budget_tokens: the raw budget ``N``; effective_budget: the optimum's effective tokens in all.
        weights: raw weights (raw tokens over ``N``).
        allocation_tokens: raw tokens per domain; effective_tokens: effective tokens per domain.
        unique: unique tokens each domain was drawn from.
        bounds_hit: ``{domain: "lower" | "upper"}``.
        status: ``"optimal"`` or ``"degenerate"``.
    """

    budget_tokens: float
    effective_budget: float
    weights: dict[str, float]
    allocation_tokens: dict[str, float]
    effective_tokens: dict[str, float]
    unique: dict[str, float]
    bounds_hit: dict[str, str]
    status: str

    def scale(self) -> tuple[float, dict[str, float]]:
        """``(effective budget, effective allocation)``: this optimum as a scale of a projection's path."""
        return self.effective_budget, dict(self.effective_tokens)


def optimize_effective(result: Any, unique: Mapping[str, float], budget_tokens: float | None = None, *,
                       raw_caps: Mapping[str, float] | None = None,
                       r_star: float = R_STAR) -> EffectiveOptimum:
    """The raw-budget optimum of a DDO fit on effective tokens (:func:`effective_table` then
    :func:`~.ddo.fit_ddo`).

    Args:
        result: the :class:`~.ddo.DDOResult` fitted on effective tokens (its ``base_tokens`` are effective;
            its ``min_weight`` / ``max_weight`` bound the raw weights).
        unique: unique tokens per domain the runs drew from.
        budget_tokens: the raw budget (default: the raw total of the base run, ``raw(base; unique)``).
        raw_caps: raw tokens available per domain (tokens x epoch cap), or None.
        r_star: ``R*``.

    Raises:
        ValueError: a domain missing from ``unique`` / ``raw_caps``, infeasible bounds.
    """
    domains = tuple(result.domains)
    missing = sorted(set(domains) - set(unique)) + sorted(set(domains) - set(raw_caps or dict.fromkeys(domains)))
    if missing:
        raise ValueError(f"unique tokens or raw caps are missing for domains {sorted(set(missing))}")
    u = np.array([float(unique[d]) for d in domains])
    eb = np.array([float(result.base_tokens[d]) for d in domains])
    n = float(np.sum(raw_tokens(eb, u, r_star))) if budget_tokens is None else float(budget_tokens)
    lo = np.full(len(domains), float(result.min_weight) * n)
    hi = np.full(len(domains), float(result.max_weight) * n)
    if raw_caps is not None:
        hi = np.minimum(hi, [float(raw_caps[d]) for d in domains])
        lo = np.minimum(lo, hi)
    fits = result.fits
    sol = allocate_effective([fits[d].amplitude for d in domains], [fits[d].a for d in domains],
                             [fits[d].b for d in domains], eb, u, n, lo, hi, r_star)
    return EffectiveOptimum(
        budget_tokens=n, effective_budget=float(sol.effective.sum()),
        weights={d: float(v / n) for d, v in zip(domains, sol.raw, strict=True)},
        allocation_tokens={d: float(v) for d, v in zip(domains, sol.raw, strict=True)},
        effective_tokens={d: float(v) for d, v in zip(domains, sol.effective, strict=True)},
        unique={d: float(v) for d, v in zip(domains, u, strict=True)},
        bounds_hit={d: ("lower" if sol.at_lower[j] else "upper") for j, d in enumerate(domains)
                    if sol.at_lower[j] or sol.at_upper[j]},
        status="degenerate" if sol.degenerate else "optimal")


@dataclass(frozen=True)
class EffectiveProjection(Record):
    """A projection to the target done in effective tokens (:func:`project_effective`).

    Attributes:
        budget_tokens: the target's raw budget ``T``; effective_budget: the effective budget ``E`` whose
            allocation costs ``T`` raw tokens.
        weights: raw weights at the target; allocation_tokens: raw tokens; effective_tokens: effective ones.
        epochs: raw tokens over unique tokens per domain.
        capped: domains held at their cap (the path asked more of them than the data give).
        raw_law_weights: the same projection at ``T`` read as raw tokens (what the raw-token law gives).
        warnings: what the caller should know (a capped domain, a path that needed ``E > T``).
    """

    budget_tokens: float
    effective_budget: float
    weights: dict[str, float]
    allocation_tokens: dict[str, float]
    effective_tokens: dict[str, float]
    epochs: dict[str, float]
    capped: list[str]
    raw_law_weights: dict[str, float]
    warnings: list[str]


def project_effective(project_at: Callable[[float], Mapping[str, float]], target_tokens: float,
                      unique: Mapping[str, float], caps: Mapping[str, float], *,
                      r_star: float = R_STAR) -> EffectiveProjection:
    """The target's raw allocation from a projection of effective allocations (module doc).

    Args:
        project_at: effective budget ``E`` -> effective tokens per domain at ``E`` (a projection's path
            through the per-budget optima in effective tokens; each domain's tokens non-decreasing in ``E``).
        target_tokens: the target's raw budget ``T``.
        unique: the target's unique tokens per domain; r_star: ``R*``.
        caps: raw tokens available per domain at the target (unique x max_epochs; finite).

    Raises:
        ValueError: bad values, a domain missing from ``unique``/``caps``, or ``T`` raw tokens unspent (all
            capped).
    """
    t = float(target_tokens)
    if not (math.isfinite(t) and t > 0):
        raise ValueError(f"target_tokens must be > 0, got {target_tokens}")
    domains = tuple(project_at(t))
    u, cap = _unique_and_caps(domains, unique, caps)
    e_cap = np.asarray(effective_tokens(cap, u, r_star), dtype=np.float64).reshape(u.shape)

    def alloc(e_budget: float) -> np.ndarray:
        got = project_at(e_budget)
        return np.array([float(got[d]) for d in domains])

    # raw tokens of an effective allocation, capped domains at their cap
    def raw_of(e: np.ndarray) -> np.ndarray:
        return np.where(e >= e_cap, cap,
                        np.asarray(raw_tokens(np.minimum(e, e_cap), u, r_star), dtype=np.float64))

    e_budget = _spend(lambda e: raw_of(alloc(e)), t, dict(zip(domains, cap.tolist(), strict=True)))
    asked = alloc(e_budget)
    raw = raw_of(asked)
    raw = raw * (t / raw.sum())  # the root's last ~1e-12
    capped = [d for d, v, c in zip(domains, asked, e_cap, strict=True) if v >= c * (1 - 1e-9)]
    plain = alloc(t)
    warnings = [f"the projection asks more of {capped} than their unique tokens give at the target within "
                "max_epochs: held at the cap, the other domains take the rest"] if capped else []
    return EffectiveProjection(
        budget_tokens=t, effective_budget=float(e_budget),
        weights={d: float(v / t) for d, v in zip(domains, raw, strict=True)},
        allocation_tokens={d: float(v) for d, v in zip(domains, raw, strict=True)},
        effective_tokens={d: float(v) for d, v in zip(domains, np.minimum(asked, e_cap), strict=True)},
        epochs={d: float(v / w) for d, v, w in zip(domains, raw, u, strict=True)},
        capped=capped,
        raw_law_weights={d: float(v / plain.sum()) for d, v in zip(domains, plain, strict=True)},
        warnings=warnings)


def _unique_and_caps(domains: Sequence[str], unique: Mapping[str, float],
                     caps: Mapping[str, float]) -> tuple[np.ndarray, np.ndarray]:
    """``unique`` and ``caps`` as arrays in ``domains``' order, every domain in both and every cap finite, >
    0."""
    missing = sorted(set(domains) - (set(unique) & set(caps)))
    if missing:
        raise ValueError(f"unique tokens or caps are missing for domains {missing}")
    u, cap = (np.array([float(given[d]) for d in domains]) for given in (unique, caps))
    if np.any(~np.isfinite(cap)) or np.any(~(cap > 0)):
        raise ValueError(f"caps must be positive and finite raw tokens, got {dict(caps)}")
    return u, cap


def _spend(cost: Callable[[float], np.ndarray], t: float, caps: Mapping[str, float]) -> float:
    """The effective budget whose allocation costs ``t`` raw tokens (``cost``: per domain), bracketed by
    doubling."""
    lo, hi = t * 1e-6, t  # raw >= effective: at E = T the path costs at least T unless a domain is capped
    grow = 0
    while cost(hi).sum() < t * (1 - _RTOL):
        lo, hi, grow = hi, hi * 2.0, grow + 1
        if grow > 60:
            raise ValueError(f"the projection cannot spend {t:g} raw tokens: the domains it grows are capped "
                             f"({caps} raw tokens available)")
    return t if abs(cost(t).sum() - t) <= _RTOL * t else brentq(
        lambda e: cost(e).sum() - t, lo, hi, xtol=1e-12 * t, rtol=4 * np.finfo(float).eps, maxiter=500)
