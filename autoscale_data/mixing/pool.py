"""Domain pools: a seeded subset of a domain's sequences, drawn in epochs, in O(1) memory.

Member ``j`` of a pool of ``P`` of a domain's ``n`` sequences is the image of ``j`` under a keyed
bijection of ``range(n)`` (keyed by ``(seed, name, "pool")``), and draw ``k`` is member
``order_e(k mod P)`` of the domain's usual order of epoch ``e = k // P`` over ``P`` items: two keyed
bijections per draw (docs/dataset.md, "Domain pools"). A pool of the whole domain is no pool.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from .permutation import DomainOrders, feistel_permute, name_key

__all__ = ["PoolArg", "PooledOrders", "pool_members", "resolve_pools"]

#: A pool per domain name: a fraction of its sequences (float in (0, 1]) or a token count (int).
PoolArg = Mapping[str, float | int]


def resolve_pools(pool: PoolArg | None, names: Sequence[str], available: Sequence[int],
                  seq_len: int) -> dict[str, int]:
    """Whole sequences in each pooled domain's pool (only domains whose pool is smaller than the domain),
    from ``pool``: name -> fraction (``float`` in ``(0, 1]``) or tokens (``int`` >= ``seq_len``), or None.

    Raises:
        ValueError: an unknown domain name, a value that is neither a fraction nor a token count, a
            pool with no whole sequence, or a pool larger than its domain.
    """
    if pool is None:
        return {}
    if not isinstance(pool, Mapping):
        raise ValueError(f"pool must be a mapping domain -> fraction (float in (0, 1]) or tokens (int), "
                         f"got {type(pool).__name__}")
    unknown = sorted(set(pool) - set(names), key=str)
    if unknown:
        raise ValueError(f"pool names unknown domain(s) {unknown}; the domains are {list(names)}")
    out: dict[str, int] = {}
    for name, have in zip(names, available, strict=True):
        if name not in pool:
            continue
        value = pool[name]
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise ValueError(f"pool for domain {name!r} must be a fraction (float in (0, 1]) or a token "
                             f"count (int), got {value!r}")
        if isinstance(value, (float, np.floating)):
            if math.isnan(value) or not 0.0 < value <= 1.0:
                raise ValueError(f"pool fraction for domain {name!r} must be in (0, 1], got {value!r}")
            size, what = math.floor(float(value) * have + 1e-9), f"{float(value):g} of {have} sequences"
        else:
            if value <= 0:
                raise ValueError(f"pool for domain {name!r} must be a positive token count, got {value!r}")
            if value > have * seq_len:
                raise ValueError(f"pool for domain {name!r} is larger than the domain: {int(value):,} tokens "
                                 f"asked, it holds {have * seq_len:,} tokens in whole sequences of {seq_len} "
                                 f"({have} "
                                 "sequences)")
            size, what = int(value) // seq_len, f"{int(value):,} tokens"
        if size < 1:
            raise ValueError(f"pool for domain {name!r} ({what}) holds no whole sequence of {seq_len} tokens")
        if size < have:
            out[name] = int(size)
    return out


def pool_members(name: str, available: int, size: int, seed: int, members: np.ndarray) -> np.ndarray:
    """Sequence ids (``uint64``) of pool members ``members`` (each in ``[0, size)``) of domain ``name``."""
    m = np.asarray(members, dtype=np.int64)
    if m.size and (int(m.min()) < 0 or int(m.max()) >= size):
        raise ValueError(f"pool members must lie in [0, {size})")
    if not 0 < size <= available:
        raise ValueError(f"a pool of {size} sequences of a domain of {available} is impossible")
    return feistel_permute(m, available, name_key(seed, name, "pool"))


class PooledOrders(DomainOrders):
    """:class:`DomainOrders` whose draws of pooled domains run in epochs over their pool (``pools``: name
    -> pool size in sequences; domains not named draw from all their sequences).

    :attr:`available` holds the pool sizes (what one epoch is); :attr:`domain_sizes` the full ones.
    """

    def __init__(self, names: list[str], available: list[int], seed: int, pools: Mapping[str, int]) -> None:
        sizes = [int(pools.get(n, a)) for n, a in zip(names, available, strict=True)]
        super().__init__(names, sizes, seed)
        self.domain_sizes = np.asarray([int(a) for a in available], dtype=np.int64)
        self.pooled = [d for d, n in enumerate(names) if n in pools and pools[n] < available[d]]
        self._pool_keys = {d: name_key(seed, names[d], "pool") for d in self.pooled}

    def __call__(self, domains: np.ndarray, draws: np.ndarray) -> np.ndarray:
        """Sequence ids (``uint64``) of draw ``draws[i]`` of domain ``domains[i]``."""
        ids = super().__call__(domains, draws)
        if not self.pooled:
            return ids
        d = np.asarray(domains, dtype=np.intp).reshape(ids.shape)
        for dom in self.pooled:
            sel = d == dom
            if sel.any():
                ids[sel] = feistel_permute(ids[sel], int(self.domain_sizes[dom]), self._pool_keys[dom])
        return ids
