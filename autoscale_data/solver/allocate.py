"""Exact bounded minimisation of ``Σ_j β_j (x_j + a_j)^(-b_j)`` subject to ``Σ_j base_j x_j = N``.

Each term is convex for ``b_j >= 0`` and ``x_j + a_j > 0``, so the KKT conditions are sufficient:
with multiplier ``μ`` every free domain satisfies ``β_j b_j (x_j + a_j)^(-b_j-1) = μ base_j``, i.e.
``x_j(μ) = (β_j b_j / (μ base_j))^(1/(b_j+1)) - a_j`` clipped to ``[lo_j, hi_j]``. The budget
``Σ base_j x_j(μ)`` is non-increasing in ``μ``; bisection on ``log μ`` finds it to machine precision.
No step size, no tolerance to tune. Vectorised over a leading batch axis (bootstrap replicates).

Domains whose term is flat (``b_j = 0`` or ``β_j = 0``) stay at their lower bound unless the other
domains are all at their upper bounds; then they share the remaining budget in proportion to their
room (any split is optimal: the answer is then not unique, and the status says so).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["Allocation", "allocate", "kkt_violation", "multiplier_bounds"]

_ITERS = 200


@dataclass(frozen=True)
class Allocation:
    """Result of :func:`allocate` (arrays shaped ``(B, m)`` or ``(m,)`` like the inputs).

    Attributes:
        x: optimal multipliers of the base allocation.
        at_lower, at_upper: boolean masks of domains at a bound.
        degenerate: True where flat domains had to absorb budget (the optimum is not unique).
    """

    x: np.ndarray
    at_lower: np.ndarray
    at_upper: np.ndarray
    degenerate: np.ndarray


def multiplier_bounds(
    base: np.ndarray, budget: float, min_weight: float, max_weight: float, caps: np.ndarray | None,
    names: Sequence[str] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Bounds on the multipliers from weight bounds and per-domain token caps.

    Args:
        base: base allocation in tokens, shape ``(m,)``, all > 0.
        budget: total tokens N.
        min_weight, max_weight: bounds on ``w_j = base_j x_j / N``.
        caps: maximum tokens per domain (tokens available × epoch cap), or None.
        names: the domains' names, for the messages (default ``#0``, ``#1`` …).

    Returns:
        ``(lo, hi)`` multiplier bounds.

    Raises:
        ValueError: bounds outside [0, 1], or no feasible allocation.
    """
    if not (0.0 <= min_weight < 1.0):
        raise ValueError(f"min_weight must be in [0, 1), got {min_weight}")
    if not (0.0 < max_weight <= 1.0) or max_weight < min_weight:
        raise ValueError(f"max_weight must be in (min_weight, 1], got {max_weight} (min_weight={min_weight})")
    if not (np.isfinite(budget) and budget > 0):
        raise ValueError(f"budget must be a positive number of tokens, got {budget}")
    m = base.size
    top = np.full(m, max_weight * budget)
    if caps is not None:
        if np.any(~np.isfinite(caps) & ~np.isposinf(caps)) or np.any(caps < 0):
            raise ValueError(f"token caps must be >= 0, got {caps.tolist()}")
        top = np.minimum(top, caps)
    bottom = np.full(m, min_weight * budget)
    bad = np.flatnonzero(top < bottom * (1 - 1e-12))
    if bad.size:
        label = [repr(n) for n in names] if names is not None else [f"#{j}" for j in range(m)]
        short = ", ".join(f"{label[j]} ({top[j]:,.0f} tokens)" for j in bad)
        raise ValueError(f"min_weight {min_weight:g} x budget {budget:,.0f} = {min_weight * budget:,.0f} "
                         f"tokens per domain, but {len(bad)} domain{'s' if bad.size > 1 else ''} cannot "
                         f"supply that within the epoch cap: {short}; lower min_weight or the budget, or "
                         "allow repetition with max_epochs")
    if bottom.sum() > budget * (1 + 1e-12):
        raise ValueError(f"min_weight {min_weight} x {m} domains exceeds 1: no feasible mix")
    if top.sum() < budget * (1 - 1e-12):
        raise ValueError(
            f"max_weight/caps allow only {top.sum():g} tokens in total, below the budget {budget:g}"
        )
    return bottom / base, top / base


def allocate(beta: np.ndarray, a: np.ndarray, b: np.ndarray, base: np.ndarray, budget: float, lo: np.ndarray,
             hi: np.ndarray) -> Allocation:
    """Minimise ``Σ_j β_j (x_j + a_j)^(-b_j)`` s.t. ``Σ_j base_j x_j = budget``, ``lo <= x <= hi``.

    Args:
        beta, a, b: law parameters, shape ``(m,)`` or ``(B, m)``; ``beta >= 0``, ``b >= 0``.
        base: base tokens per domain, shape ``(m,)``.
        budget: total tokens.
        lo, hi: multiplier bounds, shape ``(m,)`` (see :func:`multiplier_bounds`).

    Returns:
        The optimum (exact up to floating point), with bound masks.

    Raises:
        ValueError: ``hi_j + a_j <= 0`` (no point of the domain's domain of definition is feasible),
            or the bounds cannot meet the budget.
    """
    single = max(np.ndim(beta), np.ndim(a), np.ndim(b)) <= 1
    beta, a, b = np.broadcast_arrays(*(np.atleast_2d(np.asarray(v, dtype=np.float64)) for v in (beta, a, b)))
    if np.any(hi[None, :] + a <= 0):
        raise ValueError("a domain's upper bound lies outside its law's domain (x + a <= 0)")
    if np.dot(base, lo) > budget * (1 + 1e-12) or np.dot(base, hi) < budget * (1 - 1e-12):
        raise ValueError(f"bounds cannot meet the budget {budget:g} tokens")
    flat = ~((beta * b) > 0)
    floor = np.maximum(lo[None, :], -a)  # x + a > 0 keeps a free domain strictly above -a
    with np.errstate(divide="ignore"):
        k = np.where(flat, 0.0, np.log(np.where(flat, 1.0, beta * b)) - np.log(base)[None, :])
        # log μ at which x_j(μ) reaches its floor / its upper bound.
        lm_floor = np.where(flat, -np.inf, k - (b + 1) * np.log(np.maximum(floor + a, 1e-300)))
        lm_top = np.where(flat, np.inf, k - (b + 1) * np.log(hi[None, :] + a))
    all_flat = flat.all(axis=1)
    lm_hi = np.where(all_flat, 0.0, np.max(lm_floor, axis=1) + 1.0)
    lm_lo = np.where(all_flat, 0.0, np.min(lm_top, axis=1) - 1.0)

    def x_at(lm: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore"):
            xf = np.exp((k - lm[:, None]) / (b + 1)) - a
        return np.where(flat, lo[None, :], np.clip(xf, lo[None, :], hi[None, :]))

    for _ in range(_ITERS):
        mid = 0.5 * (lm_lo + lm_hi)
        over = x_at(mid) @ base > budget
        lm_lo = np.where(over, mid, lm_lo)
        lm_hi = np.where(over, lm_hi, mid)
        if np.all(lm_hi - lm_lo <= 1e-15 * np.maximum(1.0, np.abs(lm_hi))):
            break
    x, degenerate = _settle(x_at(0.5 * (lm_lo + lm_hi)), flat, base, budget, lo, hi)
    parts = (x, x <= lo[None, :] * (1 + 1e-9) + 1e-15, x >= hi[None, :] * (1 - 1e-9), degenerate)
    return Allocation(*(v[0] for v in parts)) if single else Allocation(*parts)


def _settle(x: np.ndarray, flat: np.ndarray, base: np.ndarray, budget: float, lo: np.ndarray,
            hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The bisection's ``x`` made to spend the budget, and where the flat domains had to take the surplus that
    the others cannot (all at ``hi``; by their room, arbitrary among them)."""
    surplus = budget - x @ base
    room = np.where(flat, (hi[None, :] - lo[None, :]) * base[None, :], 0.0)
    degenerate = (surplus > budget * 1e-9) & (room.sum(axis=1) > 0)
    share = np.where(degenerate[:, None], room / np.maximum(room.sum(axis=1, keepdims=True), 1e-300), 0.0)
    x = x + share * np.where(degenerate, surplus, 0.0)[:, None] / base[None, :]
    # Remove the last floating-point residue on free domains.
    free = (x > lo[None, :] * (1 + 1e-12) + 1e-300) & (x < hi[None, :] * (1 - 1e-12))
    resid = budget - x @ base
    fsum = (np.where(free, x, 0.0) @ base)
    fix = np.where(fsum > 0, resid / np.where(fsum > 0, fsum, 1.0), 0.0)
    return np.where(free, x * (1 + fix[:, None]), x), degenerate


def kkt_violation(
    beta: np.ndarray, a: np.ndarray, b: np.ndarray, base: np.ndarray, x: np.ndarray,
    lo: np.ndarray, hi: np.ndarray,
) -> float:
    """Largest relative violation of the KKT conditions at ``x`` (one problem, shape ``(m,)``).

    With per-token marginal gains ``g_j = β_j b_j (x_j + a_j)^(-b_j-1) / base_j``: free domains
    share one ``g = μ``, domains at their lower bound have ``g_j <= μ``, at their upper bound
    ``g_j >= μ``. Returns 0 for an exact optimum.
    """
    g = beta * b * np.power(x + a, -b - 1) / base
    rtol = 1e-9
    free = (x > lo * (1 + rtol) + 1e-15) & (x < hi * (1 - rtol))
    if free.any():
        mu = float(np.median(g[free]))
    else:  # μ can be anything between max g(lower) and min g(upper)
        low_g = g[~(x >= hi * (1 - rtol))]
        up_g = g[x >= hi * (1 - rtol)]
        mu = float(low_g.max()) if low_g.size else float(up_g.min())
        if up_g.size and low_g.size and up_g.min() >= low_g.max():
            return 0.0
    if mu <= 0:
        return float(np.max(g[free])) if free.any() else 0.0
    viol = np.where(free, np.abs(g - mu) / mu, 0.0)
    at_lo = ~free & (x <= lo * (1 + rtol) + 1e-15)
    viol = np.where(at_lo, np.maximum(g - mu, 0) / mu, viol)
    viol = np.where(~free & ~at_lo, np.maximum(mu - g, 0) / mu, viol)
    return float(viol.max())
