"""Project only what the data support: the geometric path with each domain's share trend shrunk by its
uncertainty.

Between two budgets the optimal allocations move as ``log N*_i(N2) - log N*_i(N1) = L + δ_i`` with
``L = log(N2 / N1)`` (every domain grows with the budget) and ``δ_i = log(w_i(N2) / w_i(N1))``
(domain i's share changes). The geometric projection (:func:`~.projection.project`) extrapolates the
whole of ``δ_i`` to the target; when the fits at the two budgets do not determine the optima, ``δ_i``
is mostly noise and the extrapolation multiplies it (t = 2.9 steps in the 2026-11-25 demo). Here each
trend is kept in proportion to its signal-to-noise::

    κ_i = δ_i² / (δ_i² + σ_i²),   δ'_i = κ_i δ_i

with ``σ_i² = sd_i(N1)² + sd_i(N2)²`` the variance of the share change, each ``sd`` the standard
deviation of a log weight read from the range of the optimum over the fits consistent with the data
(a ``level`` region: ``sd = (log hi - log lo) / (2 z_level)``, weights floored at ``1e-4``). The path
through the N2 optimum with trends ``L + δ'_i`` is then solved for the target exactly as the Theorem-1
path is. ``κ = 1`` everywhere is the plain geometric projection; ``κ = 0`` keeps the N2 optimum's
shares (the fall-back when nothing is determined).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.stats import norm

from .._records import Record
from .allocation_path import as_scales, project
from .ddo import DDOResult
from .identify import Identifiability, JointIdentifiability
from .joint import JointFit, weight_distance
from .vocabulary import ROBUST

__all__ = ["RobustProjection", "log_share_sd", "robust_project"]

_W_FLOOR = 1e-4


def log_share_sd(source: Any, *, level: float = 0.95) -> dict[str, float]:
    """Standard deviation of each domain's log optimal weight, from the range of the optimum over the
    fits consistent with the data.

    Args:
        source: a :class:`~.ddo.DDOResult` or a :class:`~.joint.JointFit` (its identifiability),
            an :class:`~.identify.Identifiability` or :class:`~.identify.JointIdentifiability` (its
            ``weight_range``), either's ``to_json()`` dict, or a mapping ``{domain: (lo, hi)}``.
        level: the level of that range (default 0.95, as the fits' profile region).

    Raises:
        ValueError: no range in ``source``, ``level`` outside (0, 1), a range with lo > hi.
    """
    if not (0.0 < level < 1.0):
        raise ValueError(f"level must be in (0, 1), got {level}")
    ranges = source.identifiability if isinstance(source, (DDOResult, JointFit)) else source
    if isinstance(ranges, (Identifiability, JointIdentifiability)):
        ranges = ranges.weight_range
    if isinstance(ranges, Mapping) and "weight_range" in ranges:
        ranges = ranges["weight_range"]
    if not isinstance(ranges, Mapping) or not ranges:
        raise ValueError(f"no weight range (identifiability) in {type(source).__name__}")
    z = float(norm.ppf(0.5 + level / 2))
    out = {}
    for d, pair in ranges.items():
        lo, hi = (float(v) for v in pair)
        if not (np.isfinite(lo) and np.isfinite(hi)) or lo > hi + 1e-12:
            raise ValueError(f"weight range of {d!r} must be finite with lo <= hi, got {pair}")
        out[str(d)] = float(np.log(max(hi, _W_FLOOR)) - np.log(max(lo, _W_FLOOR))) / (2 * z)
    return out


@dataclass(frozen=True)
class RobustProjection(Record):
    """The shrunk projection and how far it moved from the plain one.

    Attributes:
        weights, allocation_tokens, budget_tokens: the robust mix at the target.
        plain_weights: the plain geometric projection's weights at the target.
        trend: ``δ_i`` per domain (log share change from N1 to N2); ``sd``: ``σ_i``;
        shrink: ``κ_i`` (1 = trend kept, 0 = the N2 share kept).
        moved: ``{"l1", "total_variation", "max_abs"}`` from the plain projection's weights.
        t: the path parameter at the target; warnings: as for the plain projection.
    """

    weights: dict[str, float]
    allocation_tokens: dict[str, float]
    budget_tokens: float
    plain_weights: dict[str, float]
    trend: dict[str, float]
    sd: dict[str, float]
    shrink: dict[str, float]
    moved: dict[str, float]
    t: float
    warnings: list[str]
    method: str = field(init=False, default=ROBUST)
    """Which candidate this is: ``"robust"``."""


def _sigma(sd: Mapping[str, float] | Sequence[Mapping[str, float]] | None,
           domains: Sequence[str]) -> np.ndarray:
    """``σ_i`` per domain from :func:`robust_project`'s ``sd`` (zeros for None)."""
    if sd is None:
        return np.zeros(len(domains))
    sigma2 = np.zeros(len(domains))
    for part in [sd] if isinstance(sd, Mapping) else [sd[0], sd[-1]]:
        missing = [d for d in domains if d not in part]
        if missing:
            raise ValueError(f"sd lacks domains {missing}")
        v = np.array([float(part[d]) for d in domains])
        if np.any(~(v >= 0)):
            raise ValueError(f"sd must be >= 0, got {dict(part)}")
        sigma2 += v * v
    return np.sqrt(sigma2)


def robust_project(scales: Sequence[Any], target_tokens: float,
                   sd: Mapping[str, float] | Sequence[Mapping[str, float]] | None, *,
                   token_caps: Mapping[str, float] | None = None,
                   max_epochs: float | Mapping[str, float] | None = None) -> RobustProjection:
    """The geometric projection from the two largest budgets with each share trend shrunk (module doc).

    Args:
        scales: optimal allocations at two or more budgets (as for :func:`~.projection.project`);
            the smallest and the largest are used.
        sd: ``σ_i`` per domain, or one ``{domain: sd}`` per scale (combined as ``sqrt(Σ sd²)`` over the
            two used), e.g. from :func:`log_share_sd`; None: no uncertainty (the plain projection).
        token_caps, max_epochs: as for :func:`~.projection.project`.

    Raises:
        ValueError: as for :func:`~.projection.project`; ``sd`` missing a domain or negative.
    """
    budgets, domains, alloc = as_scales(scales)
    n1, n2 = float(budgets[0]), float(budgets[-1])
    a1, a2 = alloc[0], alloc[-1]
    w1, w2 = a1 / a1.sum(), a2 / a2.sum()
    delta = np.log(w2) - np.log(w1)
    sigma = _sigma(sd, domains)
    with np.errstate(invalid="ignore", divide="ignore"):
        kappa = np.where(delta * delta > 0, delta * delta / (delta * delta + sigma * sigma), 1.0)
    shrunk = kappa * delta
    plain = project([(n1, dict(zip(domains, a1, strict=True))), (n2, dict(zip(domains, a2, strict=True)))],
                    target_tokens, token_caps=token_caps, max_epochs=max_epochs)
    growth = np.log(n2 / n1)
    a1_shrunk = a2 * np.exp(-(growth + shrunk))
    res = project([(float(a1_shrunk.sum()), dict(zip(domains, a1_shrunk, strict=True))),
                   (n2, dict(zip(domains, a2, strict=True)))], target_tokens, token_caps=token_caps,
                  max_epochs=max_epochs)
    return RobustProjection(
        weights=dict(res.weights), allocation_tokens=dict(res.allocation_tokens),
        budget_tokens=res.budget_tokens,
        plain_weights=dict(plain.weights), trend=dict(zip(domains, delta.tolist(), strict=True)),
        sd=dict(zip(domains, sigma.tolist(), strict=True)),
        shrink=dict(zip(domains, kappa.tolist(), strict=True)),
        moved=weight_distance(res.weights, plain.weights),
        t=res.t, warnings=list(res.warnings))
