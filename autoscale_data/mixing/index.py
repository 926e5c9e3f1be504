"""The materialized global stream: one (domain id, sequence id) pair per position.

At 5 bytes per position (``uint8`` domain + ``uint32`` sequence id) plus a small table of
cumulative per-domain counts every ``CHECKPOINT_EVERY`` positions, any position of the stream and
the per-domain counts of any prefix are found in O(1): this is what makes resume instant.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .interleave import interleave
from .permutation import domain_order, sequence_id_dtype, window_permutation

__all__ = ["CHECKPOINT_EVERY", "MixtureIndex", "build_index"]

CHECKPOINT_EVERY = 4096


@dataclass(frozen=True)
class MixtureIndex:
    """The global stream of a mixture.

    Attributes:
        domains: domain id at each global position.
        sequences: the within-domain sequence id at each global position.
        counts: sequences per domain (``int64``), summing to ``len(domains)``.
        checkpoints: ``[k, d]`` = occurrences of domain ``d`` in positions ``[0, k*CHECKPOINT_EVERY)``.
    """

    domains: np.ndarray
    sequences: np.ndarray
    counts: np.ndarray
    checkpoints: np.ndarray

    def __len__(self) -> int:
        return int(self.domains.size)

    @property
    def nbytes(self) -> int:
        """Bytes held by the index arrays."""
        return int(self.domains.nbytes + self.sequences.nbytes + self.checkpoints.nbytes + self.counts.nbytes)

    def domain_counts(self, cursor: int) -> np.ndarray:
        """Per-domain counts of the prefix ``[0, cursor)`` (``int64``)."""
        if not 0 <= cursor <= len(self):
            raise ValueError(f"cursor {cursor} is outside the stream [0, {len(self)}]")
        k = cursor // CHECKPOINT_EVERY
        base = self.checkpoints[k].copy()
        rest = self.domains[k * CHECKPOINT_EVERY : cursor]
        if rest.size:
            base += np.bincount(rest, minlength=self.counts.size)[: self.counts.size]
        return base


def _checkpoints(domains: np.ndarray, num_domains: int) -> np.ndarray:
    total = domains.size
    rows = total // CHECKPOINT_EVERY + 1
    table = np.zeros((rows, num_domains), dtype=np.int64)
    full = (rows - 1) * CHECKPOINT_EVERY
    if rows > 1:
        blocks = domains[:full].reshape(rows - 1, CHECKPOINT_EVERY)
        for d in range(num_domains):
            table[1:, d] = np.cumsum(np.count_nonzero(blocks == d, axis=1))
    return table


def build_index(
    names: Sequence[str],
    counts: Sequence[int],
    available: Sequence[int],
    seed: int,
    *,
    shuffle_window: int = 0,
    stream: np.ndarray | None = None,
) -> MixtureIndex:
    """Build the global stream.

    Args:
        names: domain names (seed the per-domain permutations).
        counts: sequences drawn from each domain.
        available: whole sequences each domain holds (``counts`` may exceed it only when the
            caller allowed repetition; each extra epoch is a fresh permutation).
        seed: dataset seed.
        shuffle_window: if > 1, positions are shuffled (seeded) inside consecutive windows of this
            many positions, after the interleave and before sequence ids are assigned.
        stream: a precomputed domain-id stream (e.g. from the anytime schedule); default: the
            low-discrepancy :func:`~autoscale_data.mixing.interleave.interleave` of ``counts``.
    """
    c = np.asarray(counts, dtype=np.int64)
    domains = interleave(c) if stream is None else np.asarray(stream)
    if domains.size != int(c.sum()) or np.any(np.bincount(domains, minlength=c.size)[: c.size] != c):
        raise ValueError("the domain stream does not match the per-domain counts")
    if shuffle_window and shuffle_window > 1:
        domains = domains[window_permutation(domains.size, shuffle_window, seed)]
    seq_dtype = sequence_id_dtype(max(int(a) for a in available))
    sequences = np.empty(domains.size, dtype=seq_dtype)
    by_domain = np.argsort(domains, kind="stable")
    start = 0
    for name, n, avail in zip(names, c, available, strict=False):
        n = int(n)
        sequences[by_domain[start : start + n]] = domain_order(name, int(avail), n, seed)
        start += n
    del by_domain
    return MixtureIndex(domains, sequences, c, _checkpoints(domains, c.size))
