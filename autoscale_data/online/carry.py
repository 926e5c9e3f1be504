"""Exact counts of segments decided one at a time, the rounding residual carried from each to the next.

An online run appends segments whose weights are only known when they are decided. Segment ``j``
of ``len_j`` positions at weights ``w_j`` gets integer per-domain counts chosen so that the
*cumulative* counts ``C_j`` stay within one sequence of the cumulative targets
``T_j = sum_{i <= j} w_i len_i`` (the residual of one segment's rounding is carried into the
next), never decrease, and fill the segment exactly: each domain gets ``floor(T)`` or ``ceil(T)``
and the units left over go to the largest remaining deficits ``T - C`` (ties to the lower index).
"""

from __future__ import annotations

import numpy as np

from ..mixing import largest_remainder

__all__ = ["carried_counts"]


def carried_counts(target: np.ndarray, drawn: np.ndarray, length: int) -> np.ndarray:
    """The next segment's per-domain counts (``int64``, summing to ``length``).

    Args:
        target: the cumulative targets ``T_j`` after this segment (``[D]``, float).
        drawn: the cumulative counts ``C_{j-1}`` before it (``[D]``, int).
        length: the segment's positions (``sum(target) == sum(drawn) + length`` up to rounding).

    Returns:
        ``C_j - C_{j-1}``: non-negative, summing to ``length``, with ``|T_j - C_j| < 1`` whenever
        ``|T_{j-1} - C_{j-1}| < 1`` (each count is the floor or the ceiling of its target when the
        earlier draws allow it; else the units go by largest remainder of the deficits).
    """
    t = np.asarray(target, dtype=np.float64)
    c = np.asarray(drawn, dtype=np.int64)
    total = int(c.sum()) + int(length)
    lo = np.maximum(np.floor(t).astype(np.int64), c)
    hi = np.maximum(np.ceil(t).astype(np.int64), lo)
    need = total - int(lo.sum())
    if 0 <= need <= int((hi - lo).sum()):
        out = lo.copy()
        if need:
            room = np.flatnonzero(hi > lo)
            order = room[np.argsort(-(t[room] - lo[room]), kind="stable")]
            out[order[:need]] += 1
        return out - c
    deficit = np.maximum(t - c, 0.0)
    if deficit.sum() <= 0:
        deficit = np.ones_like(deficit)
    return largest_remainder(deficit, int(length))
