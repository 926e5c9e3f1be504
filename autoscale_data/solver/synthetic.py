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

__all__ = ["synthetic_budget_runs", "synthetic_ddo_runs", "synthetic_loss"]


def synthetic_loss(multipliers: np.ndarray, a: np.ndarray, b: np.ndarray, *, floor: float = 2.0,
                   amplitude: np.ndarray | float = 1.0) -> np.ndarray:
    """``floor + Σ_j amplitude_j (x_j + a_j)^(-b_j)`` for multipliers of shape ``(..., m)``."""
    x = np.asarray(multipliers, dtype=np.float64)
    return floor + (np.asarray(amplitude) * np.power(x + a, -b)).sum(axis=-1)


def synthetic_ddo_runs(base_tokens: Mapping[str, float], a: Sequence[float], b: Sequence[float], *,
                       multipliers: Sequence[float] = (3.0, 1 / 3), seeds: int = 1, noise: float = 0.0,
                       floor: float = 2.0, amplitude: Sequence[float] | float = 1.0,
                       rng_seed: int = 0) -> RunTable:
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


def synthetic_budget_runs(budgets: Sequence[float], n0: Sequence[float], gamma: Sequence[float],
                          amplitude: Sequence[float], *, scale: Sequence[float], floor: float = 2.0,
                          base_weights: Sequence[float] | None = None,
                          multipliers: Sequence[float] = (3.0, 1 / 3),
                          seeds: int = 1, noise: float = 0.0, rng_seed: int = 0) -> list[RunTable]:
    """DDO designs at several budgets with losses from one law in tokens (see :mod:`.joint`).

    The loss of a run with tokens ``n`` is ``floor + Σ_i amplitude_i ((n0_i + n_i) / scale_i)^(-gamma_i)``
    plus optional Gaussian noise; domains are ``d0, d1, ...``.

    Args:
        budgets: total tokens of each design's base run.
        n0, gamma, amplitude, scale: the law per domain (tokens, exponent, amplitude, token scale).
        floor: the law's floor.
        base_weights: the base mix (default uniform).
        multipliers, seeds, noise, rng_seed: as in :func:`synthetic_ddo_runs`.

    Returns:
        One :class:`RunTable` per budget, in the order of ``budgets``.

    Raises:
        ValueError: parameter lengths differ.
    """
    params = [np.asarray(v, dtype=np.float64) for v in (n0, gamma, amplitude, scale)]
    m = params[0].size
    if any(v.shape != (m,) for v in params) or m < 2:
        raise ValueError(f"n0, gamma, amplitude and scale need one value per domain (>= 2), got "
                         f"{[v.shape for v in params]}")
    w = np.full(m, 1.0 / m) if base_weights is None else np.asarray(base_weights, dtype=np.float64)
    if w.shape != (m,):
        raise ValueError(f"base_weights needs {m} values, got {w.shape}")
    rng = np.random.default_rng(rng_seed)
    domains = [f"d{i}" for i in range(m)]
    tables = []
    for k, n in enumerate(budgets):
        runs = []
        for i, alloc in enumerate(ddo_runs_plan(dict(zip(domains, float(n) * w / w.sum(), strict=True)),
                                                multipliers)):
            tok = np.array([alloc[d] for d in domains])
            clean = floor + float(np.sum(params[2] * np.power((params[0] + tok) / params[3], -params[1])))
            for s in range(seeds):
                loss = clean + (noise * rng.standard_normal() if noise > 0 else 0.0)
                runs.append(Run(f"b{k}r{i}s{s}", dict(alloc), {"all": loss}, seed=s))
        tables.append(RunTable(runs))
    return tables
