"""A small materialized reference of the closed-form mixture stream (for cross-checks on small budgets).

It builds what :class:`~autoscale_data.mixing.MixtureStream` computes per position the way the
library did before the closed form: the whole domain-id stream (each segment's
:func:`~autoscale_data.mixing.interleave`, concatenated), each domain's draws numbered in stream
order (from its ``base`` count) and mapped through its materialized order, then the window shuffle.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from autoscale_data.mixing import domain_order, interleave, window_permutation

__all__ = ["reference_stream"]


def reference_stream(names: Sequence[str], available: Sequence[int], seed: int, starts: Sequence[int],
                     counts: np.ndarray, base: Sequence[int] | None = None,
                     window: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``(domains, sequence ids)`` of positions ``starts[0] .. starts[-1] - 1``, materialized."""
    counts = np.asarray(counts, dtype=np.int64)
    domains = np.concatenate([interleave(row).astype(np.int64) for row in counts])
    assert domains.size == starts[-1] - starts[0]
    base_arr = np.zeros(len(names), dtype=np.int64) if base is None else np.asarray(base, dtype=np.int64)
    sequences = np.zeros(domains.size, dtype=np.int64)
    for d, name in enumerate(names):
        where = np.flatnonzero(domains == d)
        if where.size:
            order = domain_order(name, int(available[d]), int(base_arr[d]) + where.size, seed).astype(np.int64)
            sequences[where] = order[base_arr[d]:]
    if window > 1:
        src = window_permutation(domains.size, window, seed)
        domains, sequences = domains[src], sequences[src]
    return domains, sequences
