"""Seeded random-access orders: each domain's sequences without replacement, and the window shuffle.

Both are keyed bijections of ``[0, n)`` evaluated per index in O(1) memory: a Feistel network on
the mixed radix ``Z_a x Z_b`` with ``a = ceil(sqrt(n))``, ``b = ceil(n / a)`` (so ``a b - n < a``):
``x = L b + R``; a round maps ``(L, R)`` to ``(R, (L + F(R)) mod |L|)``, the sizes swapping each
round (6 rounds, two more than Luby-Rackoff's strong pseudo-random permutation needs; ``F`` a
splitmix64-style hash of ``R`` and the round key, reduced to ``[0, |L|)`` by a multiply-shift).
An output ``>= n`` is encrypted again until it falls inside (cycle-walking), which happens to
fewer than ``1 / b ~ 1 / sqrt(n)`` of the indices. Every function here is vectorized over numpy
arrays whose elements may each have their own ``n`` and key.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import numpy as np

from .._checks import check_int

__all__ = [
    "FEISTEL_ROUNDS",
    "DomainOrders",
    "domain_order",
    "feistel_permute",
    "name_key",
    "window_permutation",
    "window_sources",
]

FEISTEL_ROUNDS = 6
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31, _S32 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(32)
_ONE = np.uint64(1)
_ROUND_CONSTANTS = [np.uint64((r + 1) * 0x9E3779B97F4A7C15 % (1 << 64)) for r in range(FEISTEL_ROUNDS)]


def name_key(seed: int, name: str, purpose: str = "order") -> int:
    """A 64-bit key from ``(seed, name, purpose)``, stable across processes and runs.

    Python's ``hash()`` is salted per process; a SHA-256 of the name is not.
    """
    check_int("seed", seed, minimum=0)
    digest = hashlib.sha256(f"{purpose}\0{name}".encode()).digest()
    sequence = np.random.SeedSequence([int(seed), int.from_bytes(digest[:16], "little")])
    return int(sequence.generate_state(1, np.uint64)[0])


def _mix(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finalizer (a bijective 64-bit mixer), elementwise on ``uint64`` arrays."""
    x = x ^ (x >> _S30)
    x = x * _M1
    x = x ^ (x >> _S27)
    x = x * _M2
    return x ^ (x >> _S31)


def _mix_int(x: int) -> int:
    """:func:`_mix` of one Python integer (no numpy scalar overflow warnings)."""
    mask = (1 << 64) - 1
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & mask
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & mask
    return x ^ (x >> 31)


def _radix(n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per element, ``(a, b)`` with ``a = ceil(sqrt(n))`` and ``b = ceil(n / a)`` (``uint64``)."""
    n = np.asarray(n, dtype=np.uint64)
    a = np.ceil(np.sqrt(n.astype(np.float64))).astype(np.uint64)
    a = np.maximum(a, _ONE)
    a = a + (a * a < n) - ((a > _ONE) & ((a - _ONE) * (a - _ONE) >= n))  # exact near squares
    b = (n + a - _ONE) // a
    return a, np.maximum(b, _ONE)


def _round_keys(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``FEISTEL_ROUNDS`` round keys per distinct key: ``(table [rounds, distinct], which [size])``."""
    if keys.size and keys.strides == (0,):  # one key for every element
        distinct, which = keys[:1], np.zeros(keys.size, dtype=np.intp)
    else:
        distinct, which = np.unique(keys, return_inverse=True)
    table = np.stack([_mix(distinct + c) for c in _ROUND_CONSTANTS])
    return table, which.reshape(-1)


def _encrypt(x: np.ndarray, a: Any, b: Any, round_keys: Any) -> np.ndarray:
    """One pass of the mixed-radix Feistel network on ``[0, a b)`` (see the module docstring).

    ``a``, ``b`` and each ``round_keys[r]`` are scalars or arrays like ``x``.
    """
    left = x // b
    right = x - left * b
    size_left = a
    for r in range(FEISTEL_ROUNDS):
        f = (right ^ round_keys[r]) * _M1
        f ^= f >> _S31
        f *= _M2
        f = ((f >> _S32) * size_left) >> _S32  # in [0, size_left)
        s = left + f
        s -= size_left * (s >= size_left)
        left, right, size_left = right, s, (b if size_left is a else a)
    return left * b + right  # an even number of rounds: back to (Z_a, Z_b)


def _cycle_walk(out: np.ndarray, limit: Any,
                encrypt: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
    """Cycle-walking: re-encrypt (``encrypt(values, their indices)``) every entry of ``out`` at or above its
    ``limit`` (a scalar or an array like ``out``) until it falls inside."""
    todo = np.flatnonzero(out >= limit)
    while todo.size:
        y = encrypt(out[todo], todo)
        out[todo] = y
        todo = todo[y >= (limit[todo] if np.ndim(limit) else limit)]
    return out


def feistel_permute(index: np.ndarray, n: np.ndarray | int, keys: np.ndarray | int) -> np.ndarray:
    """Image (``uint64``) of ``index`` under the keyed bijection of ``[0, n)``; ``n`` (> 0) and the 64-bit
    ``keys`` are scalars or arrays like ``index``."""
    x = np.asarray(index).astype(np.uint64, copy=True).reshape(-1)
    size = x.size
    if np.ndim(n) == 0 and np.ndim(keys) == 0:  # one size and key: scalar operands throughout
        n_int = int(n)
        if size and int(x.max()) >= n_int:
            raise ValueError("feistel_permute: an index is outside [0, n)")
        a_arr, b_arr = _radix(np.asarray([n_int]))
        a, b = a_arr[0], b_arr[0]
        round_keys: Any = [np.uint64(_mix_int((int(keys) + int(c)) % (1 << 64))) for c in _ROUND_CONSTANTS]
        out = _cycle_walk(_encrypt(x, a, b, round_keys), np.uint64(n_int),
                          lambda v, _: _encrypt(v, a, b, round_keys))
        return out.reshape(np.shape(index))
    n_arr = np.broadcast_to(np.asarray(n, dtype=np.uint64), (size,))
    key_arr = np.broadcast_to(np.asarray(keys, dtype=np.uint64), (size,))
    if size and np.any(x >= n_arr):
        raise ValueError("feistel_permute: an index is outside [0, n)")
    a_all, b_all = _radix(n_arr)
    table, which = _round_keys(key_arr)
    out = _cycle_walk(_encrypt(x, a_all, b_all, table[:, which]), n_arr,
                      lambda v, t: _encrypt(v, a_all[t], b_all[t], table[:, which[t]]))
    return out.reshape(np.shape(index))


def _epoch_keys(base: np.ndarray, epoch: np.ndarray) -> np.ndarray:
    return _mix(base ^ _mix(epoch.astype(np.uint64) + _GOLDEN))


class DomainOrders:
    """Each domain's visiting order: draw ``k`` of domain ``d`` is a sequence id, in O(1) memory.

    Epoch ``e = k // available[d]`` is a fresh keyed permutation of ``range(available[d])``, so no
    sequence repeats before every sequence of the domain has been used once. The key is the dataset
    ``seed`` and the domain's name; ``available`` holds each domain's whole sequences.
    """

    def __init__(self, names: list[str], available: list[int], seed: int) -> None:
        self.available = np.asarray([int(a) for a in available], dtype=np.int64)
        self.keys = np.asarray([name_key(seed, n) for n in names], dtype=np.uint64)
        self._a, self._b = _radix(np.maximum(self.available, 1).astype(np.uint64))  # per domain
        first = _epoch_keys(self.keys, np.zeros(self.keys.size, dtype=np.int64))
        self._first_epoch = np.stack([_mix(first + c) for c in _ROUND_CONSTANTS], axis=1)  # [D, rounds]

    def _encrypt(self, x: np.ndarray, d: np.ndarray, keys: np.ndarray) -> np.ndarray:
        """:func:`_encrypt` with each element's radix from the per-domain table; ``keys [n, rounds]``."""
        return _encrypt(x, self._a[d], self._b[d], [keys[:, r] for r in range(FEISTEL_ROUNDS)])

    def __call__(self, domains: np.ndarray, draws: np.ndarray) -> np.ndarray:
        """Sequence ids (``uint64``) of draw ``draws[i]`` of domain ``domains[i]``."""
        d = np.asarray(domains, dtype=np.intp).reshape(-1)
        k = np.asarray(draws, dtype=np.int64).reshape(-1)
        if not d.size:
            return np.zeros(np.shape(draws), dtype=np.uint64)
        avail = self.available[d]
        if np.any(avail <= 0):
            raise ValueError("a draw was asked of a domain with no sequences")
        epoch = k // avail
        if int(epoch.max()) == 0:
            table, row = self._first_epoch, d
        else:  # a table of round keys for every (domain, epoch) this chunk touches
            table, row = self._epoch_table(d, epoch)
        x = (k - epoch * avail).astype(np.uint64)
        out = _cycle_walk(self._encrypt(x, d, table[row]), avail.astype(np.uint64),
                          lambda v, t: self._encrypt(v, d[t], table[row[t]]))
        return out.reshape(np.shape(draws))

    def _epoch_table(self, d: np.ndarray, epoch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Round keys ``[T, rounds]`` of the (domain, epoch) pairs in a chunk, and each draw's row."""
        count = self.keys.size
        low = np.full(count, np.iinfo(np.int64).max, dtype=np.int64)
        high = np.full(count, -1, dtype=np.int64)
        np.minimum.at(low, d, epoch)
        np.maximum.at(high, d, epoch)
        span = np.where(high >= 0, high - low + 1, 0)
        start = np.concatenate([[0], np.cumsum(span)[:-1]])
        dom = np.repeat(np.arange(count), span)
        ep = low[dom] + np.arange(int(span.sum())) - start[dom]
        keys = _epoch_keys(self.keys[dom], ep)
        table = np.stack([_mix(keys + c) for c in _ROUND_CONSTANTS], axis=1)
        return table, start[d] + epoch - low[d]


def domain_order(name: str, available: int, needed: int, seed: int) -> np.ndarray:
    """The ids (``uint32`` when every id fits, else ``uint64``) of the first ``needed`` draws of domain
    ``name`` holding ``available`` sequences (a materialized :class:`DomainOrders`)."""
    check_int("needed", needed, minimum=0)
    check_int("available", available, minimum=0)
    dtype = np.dtype(np.uint32) if available <= 1 << 32 else np.dtype(np.uint64)
    if needed == 0:
        return np.zeros(0, dtype=dtype)
    if available == 0:
        raise ValueError(f"domain {name!r} has no sequences but {needed} are needed")
    orders = DomainOrders([name], [available], seed)
    return orders(np.zeros(needed, dtype=np.intp), np.arange(needed, dtype=np.int64)).astype(dtype)


def window_sources(positions: np.ndarray, origin: int, end: int, window: int, seed: int) -> np.ndarray:
    """Where each position of a window-shuffled stream takes its content from (``int64``).

    Windows of ``window`` positions start at ``origin`` (the last one, up to ``end``, may be
    shorter); window ``k`` is a keyed permutation of its own positions.
    """
    p = np.asarray(positions, dtype=np.int64)
    if window <= 1 or p.size == 0:
        return p.copy()
    rel = p - origin
    k = rel // window
    start = k * window
    size = np.minimum(window, end - origin - start)
    base = np.uint64(name_key(seed, "", "window"))
    keys = _epoch_keys(np.full(p.shape, base, dtype=np.uint64), k)
    return origin + start + feistel_permute(rel - start, size.astype(np.uint64), keys).astype(np.int64)


def window_permutation(total: int, window: int, seed: int) -> np.ndarray:
    """A permutation of ``range(total)`` that only moves positions within windows of ``window``.

    Window ``k`` covers positions ``[k*window, (k+1)*window)`` (the last may be shorter); position
    ``p`` of the result holds ``window_sources(p)``.
    """
    check_int("window", window)
    return window_sources(np.arange(total, dtype=np.int64), 0, total, window, seed)
