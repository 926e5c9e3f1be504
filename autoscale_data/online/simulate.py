"""A loss simulator with known per-domain laws: controllers tested where the best allocation is known.

Domain ``k``'s training loss after ``n`` of its sequences is ``L_k(n) = A_k (n + 1)^(-b_k) + c_k``
(plus optional Gaussian noise per window). The best allocation of ``N`` sequences minimises
``Σ_k L_k(n_k)`` under ``Σ_k n_k = N``: equal marginal gains ``A_k b_k (n_k + 1)^(-b_k - 1)``,
solved by bisection. :func:`simulate` runs a controller through the same exact segments as the
dataset (:func:`~autoscale_data.online.carry.carried_counts`, ``lookahead`` segments decided ahead).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._checks import check_int
from .carry import carried_counts
from .controller import Window, check_proposal

__all__ = ["KnownLaws", "Simulation", "simulate"]


@dataclass(frozen=True)
class KnownLaws:
    """Per-domain laws ``A (n + 1)^(-b) + c`` (each a ``[D]`` sequence)."""

    amplitude: Sequence[float]
    exponent: Sequence[float]
    floor: Sequence[float]

    def __post_init__(self) -> None:
        a, b, c = (np.asarray(v, dtype=np.float64) for v in (self.amplitude, self.exponent, self.floor))
        if not (a.shape == b.shape == c.shape and a.ndim == 1 and a.size) or np.any(a <= 0) or np.any(b <= 0):
            raise ValueError(f"laws need equal-length positive amplitudes and exponents, got {a}, {b}, {c}")
        for name, v in (("amplitude", a), ("exponent", b), ("floor", c)):
            object.__setattr__(self, name, v)

    def loss(self, n: np.ndarray) -> np.ndarray:
        """Per-domain loss after ``n`` sequences of each domain."""
        return self.amplitude * np.power(np.asarray(n, dtype=np.float64) + 1.0, -self.exponent) + self.floor

    def objective(self, n: np.ndarray) -> float:
        """``Σ_k L_k(n_k)``: the mean loss over domains, times their number."""
        return float(self.loss(n).sum())

    def best_allocation(self, total: int) -> np.ndarray:
        """The real-valued ``n`` (summing to ``total``) that minimises :meth:`objective`."""
        a, b = self.amplitude, self.exponent

        def n_at(lam: float) -> np.ndarray:  # the n where each domain's marginal gain equals lam
            return np.maximum((a * b / lam) ** (1.0 / (b + 1.0)) - 1.0, 0.0)

        lo, hi = 1e-300, float((a * b).max())
        for _ in range(400):
            mid = np.sqrt(lo * hi)
            if n_at(mid).sum() > total:
                lo = mid
            else:
                hi = mid
        n = n_at(hi)
        return n * (total / n.sum()) if n.sum() > 0 else np.full(a.size, total / a.size)


@dataclass
class Simulation:
    """A simulated run: per segment the weights proposed and the counts drawn; the final counts."""

    weights: list[list[float]] = field(default_factory=list)
    counts: list[list[int]] = field(default_factory=list)
    seen: np.ndarray | None = None


def simulate(controller: Any, laws: KnownLaws, total: int, segment: int, *, lookahead: int = 1,
             noise: float = 0.0, seed: int = 0, tokens_per_sequence: int = 1) -> Simulation:
    """Run ``controller`` for ``total`` sequences in segments of ``segment``; losses from ``laws``.

    Each update sees the window's per-domain mean loss at the counts reached (plus noise of
    standard deviation ``noise``), the window's tokens, and the counts drawn so far.
    """
    check_int("total", total)
    check_int("segment", segment)
    check_int("lookahead", lookahead)
    names = list(controller.domain_names)
    rng = np.random.default_rng(seed)
    d = len(names)
    sim = Simulation()
    target = np.zeros(d)
    drawn = np.zeros(d, dtype=np.int64)
    segments = -(-total // segment)

    def append(w: np.ndarray) -> None:
        nonlocal target, drawn
        length = min(segment, total - len(sim.counts) * segment)
        target = target + w * length
        c = carried_counts(target, drawn, length)
        drawn = drawn + c
        sim.weights.append(w.tolist())
        sim.counts.append(c.tolist())

    w0 = check_proposal(0, controller.initial_weights(), names)
    for _ in range(min(lookahead, segments)):
        append(w0)
    for u in range(1, segments - lookahead + 1):
        window_counts = np.asarray(sim.counts[u - 1], dtype=np.float64) * tokens_per_sequence
        seen = np.sum(sim.counts[:u], axis=0).astype(np.int64)
        loss = laws.loss(seen) + (rng.normal(0.0, noise, d) if noise else 0.0)
        w = controller.update(Window(step=u, update=u, loss_sums=loss * window_counts, tokens=window_counts,
                                     seen=seen))
        append(check_proposal(u, w, names))
    sim.seen = drawn
    return sim
