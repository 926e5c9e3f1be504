"""Synthetic DDO runs from a known additive law, for tests, benchmarks and demos.

The loss of a run with multipliers ``x`` (of the base allocation) on a single validation domain
``"all"`` is ``floor + Σ_j amplitude_j (x_j + a_j)^(-b_j)`` plus optional Gaussian noise, so that
each domain's DDO points follow the law exactly (with ``mean_loss``) and the true optimum is known.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from .design import ddo_runs_plan
from .runs import Run, RunTable

__all__ = ["synthetic_ddo_runs", "synthetic_loss"]


def synthetic_loss(multipliers: np.ndarray, a: np.ndarray, b: np.ndarray, *, floor: float = 2.0,
                   amplitude: np.ndarray | float = 1.0) -> np.ndarray:
    """``floor + Σ_j amplitude_j (x_j + a_j)^(-b_j)`` for multipliers of shape ``(..., m)``."""
    x = np.asarray(multipliers, dtype=np.float64)
    return floor + (np.asarray(amplitude) * np.power(x + a, -b)).sum(axis=-1)


def synthetic_ddo_runs(
    base_tokens: Mapping[str, float],
    a: Sequence[float],
    b: Sequence[float],
    *,
    multipliers: Sequence[float] = (3.0, 1 / 3),
    seeds: int = 1,
    noise: float = 0.0,
    floor: float = 2.0,
    amplitude: Sequence[float] | float = 1.0,
    rng_seed: int = 0,
) -> RunTable:
    """A DDO design (:func:`~autoscale_data.solver.design.ddo_runs_plan`) with losses from the law.

    Args:
        base_tokens: base allocation.
        a, b: true offsets and exponents per domain (``b >= 0``, ``x + a > 0``).
        multipliers: perturbation factors.
        seeds: runs per allocation.
        noise: std of Gaussian noise added to each run's loss (nats).
        floor, amplitude: the law's floor and per-domain amplitude.
        rng_seed: seed of the noise.

    Raises:
        ValueError: parameter lengths differ from the number of domains.
    """
    domains = list(base_tokens)
    a_, b_ = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a_.shape != (len(domains),) or b_.shape != (len(domains),):
        raise ValueError(f"a and b need {len(domains)} values, got {a_.shape} and {b_.shape}")
    base = np.array([float(base_tokens[d]) for d in domains])
    rng = np.random.default_rng(rng_seed)
    runs = []
    for i, alloc in enumerate(ddo_runs_plan(base_tokens, multipliers)):
        x = np.array([alloc[d] for d in domains]) / base
        clean = float(synthetic_loss(x, a_, b_, floor=floor, amplitude=np.asarray(amplitude)))
        for s in range(seeds):
            loss = clean + (noise * rng.standard_normal() if noise > 0 else 0.0)
            runs.append(Run(f"r{i}s{s}", dict(alloc), {"all": loss}, seed=s))
    return RunTable(runs)
