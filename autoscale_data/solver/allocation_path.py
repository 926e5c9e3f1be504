"""AutoScale's optimal-mix projection (Theorem 1): the optimal allocations of all budgets lie on
``N*(t) = N*(N1) · (N*(N2) / N*(N1))^t`` (elementwise); for a target budget, solve ``Σ N*(t) = N``.

With two budgets the path goes through both allocations. With three or more, the line in log space
``log N*(t) = p0 + t·d`` is fitted by least squares (first principal direction of the centred log
allocations; t = 0 at the smallest budget, t = 1 at the largest) and its residual is reported.
Budgets below the smallest one use the same path (t < 0). :mod:`.projections` sets this projection beside the
other candidates (joint fit, robust, observed) and chooses among them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.optimize import brentq

from .._records import Record, omitted
from .ddo import token_caps_array

__all__ = ["AllocationPath", "Projection", "as_scales", "fit_path", "one_scale", "project"]

_SUM_RTOL = 1e-6
_FLAT = 1e-12  # a log-allocation trend this small relative to the largest one is no growth


def _logsumexp(z: np.ndarray, axis: int | None = None, b: np.ndarray | None = None,
               return_sign: bool = False):
    """Stable ``log Σ b·exp(z)`` (numpy only; scipy's version is slow on tiny arrays)."""
    z = np.asarray(z, dtype=np.float64)
    mx = np.max(z, axis=axis, keepdims=True)
    e = np.exp(z - mx) if b is None else b * np.exp(z - mx)
    tot = np.sum(e, axis=axis, keepdims=True)
    with np.errstate(divide="ignore"):  # a signed sum can cancel exactly: log 0 = -inf is the answer
        out = np.log(np.abs(tot)) + mx
    out = np.squeeze(out, axis=axis) if axis is not None else out.reshape(())
    if return_sign:
        sign = np.sign(tot)
        return out, (np.squeeze(sign, axis=axis) if axis is not None else sign.reshape(()))
    return out


def one_scale(item: Any, k: int = 0) -> tuple[float, dict[str, float]]:
    """``(budget_tokens, {domain: tokens})`` of one scale: a DDO result, a mapping with ``budget_tokens``
    and ``allocation_tokens`` or ``weights``, or a ``(budget, allocation)`` pair (``k`` names it in
    errors)."""
    if hasattr(item, "budget_tokens") and hasattr(item, "allocation_tokens"):
        return float(item.budget_tokens), dict(item.allocation_tokens)
    if isinstance(item, Mapping):
        if "budget_tokens" not in item:
            raise ValueError(f"scale #{k}: missing 'budget_tokens'")
        n = float(item["budget_tokens"])
        if "allocation_tokens" in item:
            return n, {str(d): float(v) for d, v in item["allocation_tokens"].items()}
        if "weights" in item:
            w = {str(d): float(v) for d, v in item["weights"].items()}
            s = sum(w.values())
            if not (np.isfinite(s) and s > 0):
                raise ValueError(f"scale #{k}: weights sum to {s}")
            return n, {d: v / s * n for d, v in w.items()}
        raise ValueError(f"scale #{k}: needs 'weights' or 'allocation_tokens'")
    try:
        n, alloc = item
    except (TypeError, ValueError):
        raise ValueError(f"scale #{k}: expected (budget_tokens, allocation) or a DDO result, got "
                         f"{item!r}") from None
    return float(n), {str(d): float(v) for d, v in dict(alloc).items()}


def as_scales(scales: Sequence[Any]) -> tuple[np.ndarray, tuple[str, ...], np.ndarray]:
    """Validate scales and return ``(budgets (K,), domains, allocations (K, m))``.

    Each scale is ``(budget_tokens, {domain: tokens})``, a dict with ``budget_tokens`` and
    ``weights`` or ``allocation_tokens``, or an object with ``budget_tokens``/``allocation_tokens``
    (a :class:`~autoscale_data.solver.ddo.DDOResult`).

    Raises:
        ValueError: fewer than 2 scales, budgets not strictly increasing, mismatched domains,
            zero/negative/non-finite allocations, allocations that do not sum to the budget.
    """
    items = [one_scale(s, k) for k, s in enumerate(scales)]
    if len(items) < 2:
        raise ValueError(f"projection needs allocations at >= 2 budgets, got {len(items)}")
    domains = tuple(items[0][1])
    if not domains:
        raise ValueError("scale #0 has no domains")
    for k, (n, alloc) in enumerate(items):
        if set(alloc) != set(domains):
            raise ValueError(
                f"scale #{k} domains {sorted(alloc)} differ from scale #0 domains {sorted(domains)}"
            )
        if not (np.isfinite(n) and n > 0):
            raise ValueError(f"scale #{k}: budget_tokens must be > 0, got {n}")
        for d, v in alloc.items():
            if not (np.isfinite(v) and v > 0):
                raise ValueError(f"scale #{k}: allocation of {d!r} is {v}; allocations must be > 0")
        s = sum(alloc.values())
        if abs(s - n) > _SUM_RTOL * n:
            raise ValueError(f"scale #{k}: allocations sum to {s:g} tokens but budget_tokens is {n:g}")
    budgets = np.array([n for n, _ in items])
    for k in range(1, len(items)):
        if budgets[k] <= budgets[k - 1]:
            raise ValueError(
                f"budgets must increase: scale #{k - 1} has {budgets[k - 1]:g} >= scale #{k} {budgets[k]:g}"
            )
    allocs = np.array([[alloc[d] for d in domains] for _, alloc in items])
    return budgets, domains, allocs


@dataclass(frozen=True)
class AllocationPath:
    """The Theorem-1 path ``log N*(t) = log_origin + t · direction``.

    Attributes:
        domains: domain order of the arrays.
        log_origin: log allocation at t = 0 (the smallest budget).
        direction: log growth per unit t (t = 1 at the largest budget).
        residual: RMS distance (log units) of the given allocations from the line (0 for two).
        budgets: the budgets the path was fitted on.
        t_min: left end of the branch on which the total grows with t (-inf when all d >= 0).
    """

    domains: tuple[str, ...]
    log_origin: np.ndarray
    direction: np.ndarray
    residual: float
    budgets: tuple[float, ...]
    t_min: float = field(default=-np.inf)

    def to_json(self) -> dict[str, Any]:
        """The line a :class:`~autoscale_data.solver.MixturePlan` file keeps (reading refits it from the
        plan's scales): hand-written, as the arrays are numpy's and the rest follows from them."""
        return {"log_origin": self.log_origin.tolist(), "direction": self.direction.tolist(),
                "residual": self.residual}

    @property
    def flat(self) -> list[str]:
        """Domains whose allocation does not grow with the budget (within rounding)."""
        scale = max(float(np.max(np.abs(self.direction))), 1e-300)
        return [d for d, v in zip(self.domains, self.direction, strict=True) if abs(v) <= _FLAT * scale]

    @property
    def decreasing(self) -> list[str]:
        """Domains whose allocation falls as the budget grows (impossible under Theorem 1)."""
        return [d for d, v in zip(self.domains, self.direction, strict=False) if v < 0]

    @property
    def min_total(self) -> float:
        """The smallest total on the path: 0 when every domain grows with the budget (the path reaches every
        budget); the tokens of the domains that do not grow when none decreases (the path's limit as
        ``t -> -inf``, never reached); the total at ``t_min`` when some domain decreases."""
        if np.isfinite(self.t_min):
            return float(np.exp(_logsumexp(self.log_origin + self.t_min * self.direction)))
        flat = self.direction <= _FLAT * max(float(np.max(np.abs(self.direction))), 1e-300)
        return float(np.exp(self.log_origin[flat]).sum())

    def allocation_at_t(self, t: np.ndarray | float) -> np.ndarray:
        """Allocations at path parameter(s) ``t``, shape ``(..., m)``."""
        t = np.asarray(t, dtype=np.float64)
        return np.exp(self.log_origin + t[..., None] * self.direction)

    def solve_t(self, budgets: np.ndarray | float) -> np.ndarray:
        """Path parameter(s) t with ``Σ_j N*_j(t) = budget`` (vectorised Newton from the right).

        Raises:
            ValueError: non-positive budgets, or budgets below the path's smallest total.
        """
        nb = np.atleast_1d(np.asarray(budgets, dtype=np.float64))
        if np.any(~np.isfinite(nb)) or np.any(nb <= 0):
            raise ValueError(f"target budget must be > 0 tokens, got {nb[~(nb > 0) | ~np.isfinite(nb)][0]}")
        p0, d = self.log_origin, self.direction
        logn = np.log(nb)
        low = nb <= self.min_total
        if low.any():
            why = ("a domain's allocation decreases between the budgets" if np.isfinite(self.t_min) else
                   f"the allocation of {self.flat} does not grow between the budgets, so the path never "
                   "gives it fewer tokens than at the smallest budget")
            raise ValueError(
                f"target {nb[low][0]:g} tokens is below the smallest total on this path "
                f"({self.min_total:.4g}): {why}; use a target above it, or the smallest budget's mix as is"
            )
        pos = d > 0
        if not pos.any():
            raise ValueError("no domain's allocation grows with the budget: the path cannot reach larger "
                             "totals")
        t = np.max((logn[:, None] - p0[pos]) / d[pos], axis=1)
        t = np.maximum(t, self.t_min)
        for _ in range(200):  # move right until the total is >= the target
            h = _logsumexp(p0 + t[:, None] * d, axis=1) - logn
            if np.all(h >= 0):
                break
            t = np.where(h < 0, t + 1.0 + np.abs(t), t)
        for _ in range(200):
            z = p0 + t[:, None] * d
            h = _logsumexp(z, axis=1) - logn
            e = np.exp(z - np.max(z, axis=1, keepdims=True))
            dh = (e / e.sum(axis=1, keepdims=True) * d).sum(axis=1)  # softmax(z) · d
            step = h / dh
            t = t - step
            if np.all(np.abs(step) <= 1e-15 * (1.0 + np.abs(t))):
                break
        if not np.all(np.isfinite(t)):
            raise ValueError(f"no point of this path has {nb[~np.isfinite(t)][0]:g} tokens in all (smallest "
                             f"total {self.min_total:g}); use a target above it")
        return t if np.ndim(budgets) else t[:1]

    def allocations(self, budgets: np.ndarray | float) -> np.ndarray:
        """Allocations (tokens) for budget(s), shape ``(len, m)``; each row sums to its budget."""
        nb = np.atleast_1d(np.asarray(budgets, dtype=np.float64))
        alloc = self.allocation_at_t(self.solve_t(nb))
        return alloc * (nb / alloc.sum(axis=1))[:, None]


def _branch_min(p0: np.ndarray, d: np.ndarray) -> float:
    if np.all(d >= 0):
        return -np.inf

    def slope(t: float) -> float:
        val, sign = _logsumexp(p0 + t * d, b=d, return_sign=True)
        return float(sign * np.exp(val - _logsumexp(p0 + t * d)))

    hi = 1.0
    lo = 0.0
    while slope(lo) > 0:
        lo = lo - 1.0 - abs(lo)
    while slope(hi) < 0:
        hi = hi + 1.0 + abs(hi)
    return float(brentq(slope, lo, hi, xtol=1e-14))


def fit_path(scales: Sequence[Any]) -> AllocationPath:
    """Fit the Theorem-1 path through optimal allocations at two or more budgets (see :func:`as_scales`)."""
    budgets, domains, allocs = as_scales(scales)
    logs = np.log(allocs)
    if len(budgets) == 2:
        p0, d, resid = logs[0], logs[1] - logs[0], 0.0
    else:
        mean = logs.mean(axis=0)
        _, _, vt = np.linalg.svd(logs - mean, full_matrices=False)
        u = vt[0]
        s = (logs - mean) @ u
        if s[-1] < s[0]:
            u, s = -u, -s
        p0 = mean + s[0] * u
        d = (s[-1] - s[0]) * u
        resid = float(np.sqrt(np.mean(np.sum((logs - mean - s[:, None] * u) ** 2, axis=1))))
    return AllocationPath(domains=domains, log_origin=p0, direction=d, residual=resid,
                          budgets=tuple(budgets.tolist()), t_min=_branch_min(p0, d))


@dataclass(frozen=True)
class Projection(Record):
    """Projected optimal mix at a target budget.

    A record (:mod:`autoscale_data._records`): its JSON (the CLI's ``--json`` object) has one key per
    field; ``direct_weights`` and ``disagreement`` are written when there is a direct answer.

    Attributes:
        weights, allocation_tokens: the mix and its tokens (sum = budget_tokens).
        budget_tokens: the target.
        t: path parameter (0 at the smallest fitted budget, 1 at the largest).
        residual: log-space residual of the path fit (0 with two budgets).
        warnings: human-readable warnings (caps exceeded, decreasing domains, t < 0).
        direct_weights: the fitted law optimised at the target (when a DDO fit was given).
        disagreement: ``{"max_abs": ..., "total_variation": ...}`` between the two answers.
    """

    weights: dict[str, float]
    budget_tokens: float
    allocation_tokens: dict[str, float]
    t: float
    residual: float
    warnings: list[str]
    direct_weights: dict[str, float] | None = omitted(default=None)
    disagreement: dict[str, float] | None = omitted(default=None)


def cap_warnings(domains: Sequence[str], alloc: np.ndarray, caps: np.ndarray | None) -> list[str]:
    """Warnings for domains whose allocation exceeds their cap (tokens × epoch cap)."""
    if caps is None:
        return []
    return [f"domain {d!r} needs {v:.4g} tokens but only {c:.4g} are available (within the epoch cap)"
            for d, v, c in zip(domains, alloc, caps, strict=False) if v > c * (1 + 1e-9)]


def project(scales: Sequence[Any], target_tokens: float, *, token_caps: Mapping[str, float] | None = None,
            max_epochs: float | Mapping[str, float] | None = None, fit: Any = None) -> Projection:
    """Project optimal allocations at two or more budgets to ``target_tokens``.

    Args:
        scales: ``(budget_tokens, {domain: optimal tokens})`` per budget, increasing budgets
            (or DDO results / dicts, see :func:`as_scales`).
        target_tokens: the target budget (> 0; below the smallest budget the path runs backwards).
        token_caps: tokens available per domain; with ``max_epochs`` (default 1) a warning is given
            for each domain the projection needs more of.
        max_epochs: epoch cap (number or per domain).
        fit: optional DDO result whose fitted law is also optimised at the target (direct route);
            its weights and the disagreement with the projection are reported.

    Raises:
        ValueError: see :func:`as_scales`; target <= 0; target below a decreasing path's minimum.
    """
    target = float(target_tokens)
    if not (np.isfinite(target) and target > 0):
        raise ValueError(f"target_tokens must be > 0, got {target_tokens}")
    path = fit_path(scales)
    t = float(path.solve_t(target)[0])
    alloc = path.allocation_at_t(t)
    alloc = alloc * (target / alloc.sum())
    warnings = []
    if path.decreasing:
        warnings.append(f"allocation of {path.decreasing} decreases as the budget grows: not a Theorem-1 "
                        "path")
    if target < path.budgets[0] * (1 - 1e-12):
        warnings.append(f"target {target:g} is below the smallest budget {path.budgets[0]:g}: path "
                        "extrapolated backwards")
    caps = token_caps_array(path.domains, token_caps, max_epochs)
    warnings += cap_warnings(path.domains, alloc, caps)
    weights = {d: float(v / target) for d, v in zip(path.domains, alloc, strict=False)}
    direct = dis = None
    if fit is not None:
        if set(fit.domains) != set(path.domains):
            raise ValueError(f"fit domains {sorted(fit.domains)} differ from the scales' "
                             f"{sorted(path.domains)}")
        da = fit.optimize_at(target)
        direct = {d: float(da[d] / target) for d in path.domains}
        diff = np.array([direct[d] - weights[d] for d in path.domains])
        dis = {"max_abs": float(np.max(np.abs(diff))), "total_variation": float(0.5 * np.abs(diff).sum())}
    return Projection(
        weights=weights, budget_tokens=target,
        allocation_tokens={d: float(v) for d, v in zip(path.domains, alloc, strict=False)},
        t=t, residual=path.residual, warnings=warnings, direct_weights=direct, disagreement=dis,
    )
