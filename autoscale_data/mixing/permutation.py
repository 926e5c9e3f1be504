"""Seeded orders: each domain's sequences without replacement, and the optional window shuffle."""

from __future__ import annotations

import hashlib

import numpy as np

from .._checks import check_int

__all__ = ["domain_order", "name_seed", "sequence_id_dtype", "window_permutation"]


def name_seed(seed: int, name: str, purpose: str = "order") -> np.random.SeedSequence:
    """A seed sequence from ``(seed, name, purpose)`` that is stable across processes and runs.

    Python's ``hash()`` is salted per process; a SHA-256 of the name is not.
    """
    check_int("seed", seed, minimum=0)
    digest = hashlib.sha256(f"{purpose}\0{name}".encode()).digest()
    return np.random.SeedSequence([int(seed), int.from_bytes(digest[:16], "little")])


def sequence_id_dtype(num_sequences: int) -> np.dtype:
    """``uint32`` when every id fits, else ``uint64``."""
    return np.dtype(np.uint32) if num_sequences <= 1 << 32 else np.dtype(np.uint64)


def domain_order(name: str, available: int, needed: int, seed: int) -> np.ndarray:
    """The ids of the ``needed`` sequences of domain ``name``, in visiting order.

    Epoch ``e`` is a fresh seeded permutation of ``range(available)``; epochs are concatenated and
    the last one is cut short, so no sequence repeats before every sequence has been used. The
    caller checks that the repetition is allowed (see :func:`~autoscale_data.mixing.budget.check_supply`).

    Args:
        name: domain name (part of the seed).
        available: whole sequences the domain holds.
        needed: sequences to draw.
        seed: the dataset seed.

    Returns:
        ``uint32`` (or ``uint64``) array of length ``needed``.
    """
    check_int("needed", needed, minimum=0)
    check_int("available", available, minimum=0)
    dtype = sequence_id_dtype(available)
    if needed == 0:
        return np.zeros(0, dtype=dtype)
    if available == 0:
        raise ValueError(f"domain {name!r} has no sequences but {needed} are needed")
    rng = np.random.default_rng(name_seed(seed, name))
    full, rest = divmod(needed, available)
    out = np.empty(needed, dtype=dtype)
    for epoch in range(full):
        out[epoch * available : (epoch + 1) * available] = rng.permutation(available)
    if rest:
        # choice without replacement avoids materializing a permutation of a huge domain
        out[full * available :] = rng.choice(available, size=rest, replace=False, shuffle=True)
    return out


def window_permutation(total: int, window: int, seed: int) -> np.ndarray:
    """A permutation of ``range(total)`` that only moves positions within windows of ``window``.

    Window ``k`` covers positions ``[k*window, (k+1)*window)`` (the last may be shorter).
    """
    check_int("window", window)
    index_dtype = np.uint32 if total <= 1 << 32 else np.int64
    if window == 1 or total <= 1:
        return np.arange(total, dtype=index_dtype)
    rng = np.random.default_rng(name_seed(seed, "", "window"))
    full = total // window
    out = np.empty(total, dtype=np.int64)
    if full:
        order = np.argsort(rng.random((full, window), dtype=np.float32), axis=1)
        out[: full * window] = (order + np.arange(full, dtype=np.int64)[:, None] * window).ravel()
    tail = total - full * window
    if tail:
        out[full * window :] = full * window + rng.permutation(tail)
    return out.astype(index_dtype) if index_dtype != np.int64 else out

