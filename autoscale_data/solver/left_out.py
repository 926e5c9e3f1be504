"""Optima that leave a domain out, made into a path the projections can follow.

The Theorem-1 path (:func:`~.projection.project`) moves every domain along ``log N*_i``, so it needs
every allocation > 0. Fitted optima often leave a domain out: at 0, or at its ``min_weight`` bound.
The rule (documented in docs/solver.md, "Domains an optimum leaves out"):

* out at every fitted budget: it stays out (its share is held at ``max(min_weight, 1e-6)``);
* out at some budgets only: a trend that starts or ends at a bound is not a trend of the loss, so no
  trend is extrapolated: the domain keeps its share at the largest budget at every budget (floored
  as above when that share is out).

The other domains keep their ratios to each other in what is left of each budget (if the held shares
fill a budget, every share of it is scaled down together).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .allocation_path import as_scales, one_scale

__all__ = ["OUT_FLOOR", "path_scales"]

OUT_FLOOR = 1e-6
"""Share a domain left out at 0 is held at (the path needs allocations > 0)."""


def path_scales(scales: Sequence[Any], min_weight: float = 0.0) -> tuple[list[tuple[float, dict[str, float]]],
                                                                         list[str]]:
    """``(scales, notes)``: the optima of ``scales`` with left-out domains treated as in the module doc.

    Args:
        scales: optimal allocations per budget (as for :func:`~.projection.project`; zeros allowed).
        min_weight: the lower weight bound the optima were fitted with.

    Raises:
        ValueError: as for :func:`~.projection.as_scales` (other than zero allocations).
    """
    items = []
    for k, s in enumerate(scales):
        n, alloc = one_scale(s, k)
        if not (np.isfinite(n) and n > 0):
            raise ValueError(f"scale #{k}: budget_tokens must be > 0, got {n}")
        items.append((n, alloc))
    items.sort(key=lambda it: it[0])
    domains = list(items[0][1])
    floor = max(float(min_weight), OUT_FLOOR)
    shares = np.array([[max(float(a.get(d, 0.0)), 0.0) / n for d in domains] for n, a in items])
    out = shares <= floor * (1 + 1e-6) + 1e-12
    notes: list[str] = []
    if not out.any():  # nothing left out: the optima as they are
        result = [(n, {d: float(a[d]) for d in domains}) for n, a in items]
        as_scales(result)
        return result, notes
    fixed = shares.copy()
    held = np.zeros(len(domains), dtype=bool)
    for j, d in enumerate(domains):
        if out[:, j].all():
            fixed[:, j], held[j] = floor, True
            notes.append(f"{d!r} is left out of the optimum at every budget: it stays out (share {floor:g})")
        elif out[:, j].any():
            keep = max(shares[-1, j], floor)
            fixed[:, j], held[j] = keep, True
            where = ", ".join(f"{n:.4g}" for (n, _), o in zip(items, out[:, j], strict=True) if o)
            notes.append(f"{d!r} is left out of the optimum at {where} tokens only: no trend is extrapolated "
                         f"from a bound, it keeps its share at the largest budget ({keep:.4g})")
    left = 1.0 - fixed[:, held].sum(axis=1, keepdims=True)  # the other domains keep their ratios in the rest
    rest = fixed[:, ~held]
    total = rest.sum(axis=1, keepdims=True)
    ok = (left > 1e-9) & (total > 0)
    fixed[:, ~held] = rest * np.where(ok, left / np.where(total > 0, total, 1.0), 1.0)
    fixed = fixed / fixed.sum(axis=1, keepdims=True)  # held shares that fill a budget: all scaled together
    result = [(n, {d: float(fixed[k, j] * n) for j, d in enumerate(domains)})
              for k, (n, _) in enumerate(items)]
    as_scales(result)  # the remaining checks (budgets increasing, sums)
    return result, notes
