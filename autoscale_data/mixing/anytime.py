"""The anytime schedule: a stream whose every prefix follows the plan's optimal-allocation path.

With a plan exposing ``allocation_for_budget(N) -> {domain: tokens}`` (the optimal tokens per
domain had training stopped at ``N`` tokens; summing to ``N`` and monotone in ``N``), the
cumulative target of domain ``i`` at stream position ``s`` is
``C_i(s) = allocation_for_budget(s * seq_len)[i] / seq_len``. ``C_i`` is evaluated on a grid of
log-spaced positions, interpolated linearly, and domain ``i``'s ``k``-th sequence is placed where
``C_i`` crosses ``k + 0.5``; a stable sort of those places gives the stream. The final counts are
the largest-remainder rounding of the allocation at the full budget, so they are exact.

A plan whose allocation of some domain decreases with the budget (a
:class:`~autoscale_data.solver.MixturePlan` built with ``allow_decreasing=True``; it answers
budgets above its ``min_budget`` only) is followed through its monotone envelope: below
``min_budget`` the mix at ``min_budget`` scaled down; each domain held at the smallest allocation
it has at any later budget up to the full one (so it never runs ahead of what it ends with); the
rows rescaled to sum to ``s`` (and, where that rescaling would make a domain step back, re-indexed
by their own totals). For a monotone plan the envelope is the plan's path itself, and in every case
the path ends at the plan's allocation for the full budget, the fixed schedule's counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .budget import bounded_round, largest_remainder

__all__ = ["GRID_POINTS", "allocation_path", "anytime_counts_and_stream", "anytime_segments",
           "anytime_stream",
           "path_deviation"]

GRID_POINTS = 256


def allocation_path(plan: Any, names: Sequence[str], total: int, seq_len: int,
                    points: int = GRID_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """Grid positions ``s`` (0 .. total) and the cumulative sequence targets ``C[s, i]`` (monotone).

    Raises:
        ValueError: the plan returns unknown/missing domains or non-finite/negative tokens.
    """
    grid = np.unique(np.concatenate([[0.0], np.geomspace(1.0, float(total), points), [float(total)]]))
    # tokens; the plan answers above it
    lowest = float(getattr(plan, "min_budget", 0.0) or 0.0) * (1.0 + 1e-6)
    targets = np.zeros((grid.size, len(names)))
    for row, s in enumerate(grid[1:], start=1):
        budget = max(float(s) * seq_len, lowest)
        alloc = plan.allocation_for_budget(budget)
        if set(alloc) != set(names):
            raise ValueError(f"allocation_for_budget returned domains {sorted(alloc)}, expected "
                             f"{sorted(names)}")
        v = np.asarray([float(alloc[n]) for n in names])
        if not np.all(np.isfinite(v)) or np.any(v < 0) or v.sum() <= 0:
            raise ValueError(f"allocation_for_budget({budget:g}) returned invalid tokens {v.tolist()}")
        targets[row] = v / v.sum() * s  # in sequences, summing to s
    # the monotone envelope (a no-op for a monotone plan): hold each domain at its smallest later
    # value, rescale the rows to sum to s, restore monotonicity the rescaling may break without going
    # past the final counts, and index the rows by their own totals (a slight warp of s where needed)
    final = targets[-1].copy()
    envelope = np.minimum.accumulate(targets[::-1], axis=0)[::-1]
    sums = envelope.sum(axis=1)
    envelope *= np.divide(grid, sums, out=np.zeros_like(grid), where=sums > 0)[:, None]
    envelope = np.minimum(np.maximum.accumulate(envelope, axis=0), final)
    position = envelope.sum(axis=1)
    position[-1] = grid[-1]
    keep = np.concatenate([[True], np.diff(position) > 0])
    return position[keep], envelope[keep]


def anytime_stream(grid: np.ndarray, targets: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Domain-id stream holding exactly ``counts[i]`` of domain ``i``, following ``targets``."""
    places = []
    ids = []
    ramp = np.arange(grid.size) * 1e-9  # strictly increasing for interpolation
    for d, n in enumerate(counts.tolist()):
        if n == 0:
            continue
        path = targets[:, d].copy()
        path[-1] = n  # end exactly at the rounded final count
        path = np.maximum.accumulate(path) + ramp
        places.append(np.interp(np.arange(n) + 0.5, path, grid))
        ids.append(np.full(n, d, dtype=np.uint16))
    key = np.concatenate(places)
    dom = np.concatenate(ids)
    order = np.lexsort((dom, key))
    out_dtype = np.uint8 if counts.size <= 256 else np.uint16
    return dom[order].astype(out_dtype)


def anytime_segments(plan: Any, names: Sequence[str], total: int,
                     seq_len: int) -> tuple[np.ndarray, np.ndarray]:
    """The anytime path as many short phases: segment starts (``J + 1``) and counts ``[J, D]``.

    Segment boundaries are the path's grid positions rounded to whole sequences; the cumulative
    count of each domain at a boundary is the path's target there, rounded (monotone, summing to
    the boundary, never past the final counts, see :func:`~autoscale_data.mixing.budget.bounded_round`).
    The final counts are those of :func:`anytime_counts_and_stream`.
    """
    grid, targets = allocation_path(plan, names, total, seq_len)
    final = targets[-1]
    counts = largest_remainder(final / final.sum(), total)
    bounds = np.unique(np.clip(np.round(grid), 0, total).astype(np.int64))
    bounds = np.unique(np.concatenate([[0], bounds, [total]]))
    at = np.zeros(counts.size, dtype=np.int64)
    rows = []
    for b in bounds[1:].tolist():
        target = np.asarray([np.interp(b, grid, targets[:, d]) for d in range(counts.size)])
        nxt = counts.copy() if b == total else bounded_round(target, at, counts, b)
        rows.append(nxt - at)
        at = nxt
    return bounds, np.asarray(rows, dtype=np.int64).reshape(-1, counts.size)


def anytime_counts_and_stream(plan: Any, names: Sequence[str], total: int,
                              seq_len: int) -> tuple[np.ndarray, np.ndarray]:
    """Final per-domain counts and the anytime stream for a plan with ``allocation_for_budget``."""
    grid, targets = allocation_path(plan, names, total, seq_len)
    final = targets[-1]
    counts = largest_remainder(final / final.sum(), total)
    return counts, anytime_stream(grid, targets, counts)


def path_deviation(stream: np.ndarray, grid: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Per domain, the largest ``|count_i(t) - C_i(t)|`` over every prefix ``t`` (``C`` interpolated)."""
    t = np.arange(1, stream.size + 1, dtype=np.float64)
    out = np.zeros(targets.shape[1])
    for d in range(targets.shape[1]):
        cum = np.cumsum(stream == d, dtype=np.int64)
        out[d] = np.max(np.abs(cum - np.interp(t, grid, targets[:, d])))
    return out
