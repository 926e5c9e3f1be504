"""The global stream in closed form: position -> (domain id, sequence id) computed on demand.

The stream ``[origin, end)`` is cut into *segments* (a phase, or one step of the anytime path),
each with exact per-domain counts; inside a segment the domains follow the low-discrepancy
:class:`~autoscale_data.mixing.interleave.InterleaveTree` of its counts. The ``k``-th occurrence
of domain ``d`` in the whole stream (counting from the per-domain ``base`` counts of a continued
run) is draw ``k`` of the domain's :class:`~autoscale_data.mixing.permutation.DomainOrders`, so
each domain's order continues across segments. With a shuffle window, position ``p`` shows the
content of a keyed permutation of its window (windows start at ``origin``).

Memory is O(segments x domains) (a few KB), whatever the budget: nothing per position is stored.
Per-domain counts of any prefix are closed form too (a walk down one tree), which makes resume
O(1) (O(window) with a shuffle window).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from .interleave import InterleaveTree
from .permutation import DomainOrders, window_sources
from .pool import PooledOrders

__all__ = ["MixtureStream"]


class MixtureStream:
    """The global stream of a mixture, evaluated per position.

    Args:
        names, available, seed: the domains, their whole sequences and the dataset seed (the orders' keys).
        starts: ``J + 1`` increasing positions: segment ``j`` is ``[starts[j], starts[j+1])``;
            ``starts[0]`` is the stream's origin (0, or the cursor a run was continued from).
        counts: ``[J, D]`` per-domain counts of each segment (rows sum to the segment lengths).
        base: per-domain counts of the prefix before ``origin`` (default zeros).
        shuffle_window: if > 1, positions are shuffled inside windows of this many positions.
        phases: the phase index of each segment (default: segment ``j`` is phase ``j``).
        pools: name -> pool size in sequences: those domains draw in epochs over a seeded subset
            of their sequences (:class:`~autoscale_data.mixing.pool.PooledOrders`).

    Raises:
        ValueError: inconsistent shapes, or counts that do not fill their segments.
    """

    def __init__(self, names: Sequence[str], available: Sequence[int], seed: int, starts: Sequence[int],
                 counts: np.ndarray, *, base: Sequence[int] | None = None, shuffle_window: int = 0,
                 phases: Sequence[int] | None = None, pools: Mapping[str, int] | None = None) -> None:
        self.starts = np.asarray(starts, dtype=np.int64)
        self.counts = np.asarray(counts, dtype=np.int64).reshape(self.starts.size - 1, len(names))
        if np.any(np.diff(self.starts) <= 0) or np.any(self.counts < 0) or not np.array_equal(
                self.counts.sum(axis=1), np.diff(self.starts)):
            raise ValueError("segment counts must be non-negative and fill their (non-empty) segments")
        base_arr = np.zeros(len(names), dtype=np.int64) if base is None else np.asarray(base, dtype=np.int64)
        self.offsets = np.vstack([base_arr, base_arr + np.cumsum(self.counts, axis=0)])
        self.origin, self.end = int(self.starts[0]), int(self.starts[-1])
        self.shuffle_window = int(shuffle_window) if shuffle_window and shuffle_window > 1 else 0
        self.seed = int(seed)
        self.phases = np.arange(self.counts.shape[0]) if phases is None else np.asarray(phases, dtype=np.int64)
        self.trees = [InterleaveTree(row) for row in self.counts]
        sizes = [int(a) for a in available]
        self.orders = (PooledOrders(list(names), sizes, seed, pools) if pools
                       else DomainOrders(list(names), sizes, seed))

    # ------------------------------------------------------------------ sizes
    def __len__(self) -> int:
        return self.end

    @property
    def totals(self) -> np.ndarray:
        """Per-domain draws up to the end of the stream (including ``base``)."""
        return self.offsets[-1].copy()

    @property
    def nbytes(self) -> int:
        """Bytes of the stream's tables (segment bounds, counts, offsets and split trees)."""
        tree_bytes = sum(40 * (len(t.nodes) + 1) + t.counts.nbytes for t in self.trees)
        return int(self.starts.nbytes + self.counts.nbytes + self.offsets.nbytes + self.phases.nbytes + tree_bytes
                   + self.orders.available.nbytes + self.orders.keys.nbytes)

    # ---------------------------------------------------------------- lookup
    def _check(self, p: np.ndarray) -> None:
        if p.size and (int(p.min()) < self.origin or int(p.max()) >= self.end):
            raise ValueError(f"positions must lie in the stream [{self.origin}, {self.end})")

    def _locate(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Domain and stream-wide draw number (``int64``) at each position (after the window shuffle)."""
        p = np.asarray(positions, dtype=np.int64).reshape(-1)
        self._check(p)
        if self.shuffle_window:
            p = window_sources(p, self.origin, self.end, self.shuffle_window, self.seed)
        if len(self.trees) == 1:
            d, r = self.trees[0].locate(p - self.origin)
            return d, r + self.offsets[0][d]
        seg = np.searchsorted(self.starts, p, side="right") - 1
        first, last = int(seg.min(initial=0)), int(seg.max(initial=0))
        if first == last:
            d, r = self.trees[first].locate(p - self.starts[first])
            return d, r + self.offsets[first][d]
        d = np.empty(p.size, dtype=np.int64)
        r = np.empty(p.size, dtype=np.int64)
        for j in np.unique(seg).tolist():
            sel = np.flatnonzero(seg == j)
            dj, rj = self.trees[j].locate(p[sel] - self.starts[j])
            d[sel], r[sel] = dj, rj + self.offsets[j][dj]
        return d, r

    def lookup(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(domain ids, sequence ids)`` (``int64``, ``uint64``) at positions in ``[origin, end)``."""
        d, k = self._locate(positions)
        return d, self.orders(d, k)

    def __getitem__(self, position: int) -> tuple[int, int]:
        d, s = self.lookup(np.asarray([position]))
        return int(d[0]), int(s[0])

    def domain_counts(self, cursor: int) -> np.ndarray:
        """Per-domain draws (``int64``) of the prefix ``[0, cursor)`` (``base`` included)."""
        if not self.origin <= cursor <= self.end:
            raise ValueError(f"cursor {cursor} is outside the stream [{self.origin}, {self.end}]")
        if not self.trees:  # an empty stream (a run continued at its very end)
            return self.offsets[0].copy()
        w = self.shuffle_window
        edge = cursor if not w else self.origin + (cursor - self.origin) // w * w
        j = min(int(np.searchsorted(self.starts, edge, side="right")) - 1, len(self.trees) - 1)
        out = self.offsets[j] + self.trees[j].prefix_counts(edge - int(self.starts[j]))
        if edge < cursor:  # inside a shuffled window: count its first positions
            d = self._locate(np.arange(edge, cursor, dtype=np.int64))[0]
            out += np.bincount(d, minlength=out.size)[: out.size]
        return out

    def phase_at(self, cursor: int) -> int:
        """The phase of position ``cursor`` (the last phase at the end of the stream)."""
        j = int(np.searchsorted(self.starts, cursor, side="right")) - 1
        return int(self.phases[min(max(j, 0), self.phases.size - 1)]) if self.phases.size else 0

