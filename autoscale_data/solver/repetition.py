"""Repeated data in tokens of fresh data: the data-constrained form of Muennighoff et al. (2023).

Training ``D`` tokens drawn in epochs from ``U`` unique tokens is worth the *effective* tokens

    ``D' = U + U R* (1 - exp(-R / R*))``,  ``R = D / U - 1``  (``D' = D`` for ``D <= U``),

where ``R`` counts the repetitions beyond the first epoch and ``R*`` is the number of repetitions
after which repeated data has lost ``1 - 1/e`` of its value ("Scaling Data-Constrained Language
Models", Muennighoff et al., NeurIPS 2023, eq. 5; they fit ``R* = 15.4`` for the data term). So a
few epochs cost little, and the worth of a domain is bounded by ``U (1 + R*)`` however long it is
repeated. :func:`effective_tokens` is the map, :func:`raw_tokens` its inverse (``inf`` beyond that
bound), and :func:`epochs_table` the per-domain view the runner reports for a mix at a budget: the
epochs, the effective tokens, and whether the domain can supply its share within an epoch cap.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._records import Record

__all__ = ["R_STAR", "DomainEpochs", "effective_tokens", "epochs_table", "raw_tokens"]

#: Muennighoff et al. (2023)'s fitted ``R*_D``: repetitions that cost ``1 - 1/e`` of repeated data's worth.
R_STAR = 15.4


def _check(unique: Any, r_star: float) -> np.ndarray:
    u = np.asarray(unique, dtype=np.float64)
    if np.any(~np.isfinite(u)) or np.any(u <= 0):
        raise ValueError(f"unique tokens must be positive and finite, got {unique!r}")
    if not (isinstance(r_star, (int, float)) and math.isfinite(r_star) and r_star > 0):
        raise ValueError(f"r_star must be a positive number, got {r_star!r}")
    return u


def effective_tokens(tokens: Any, unique: Any, r_star: float = R_STAR) -> np.ndarray | float:
    """The fresh-data worth of ``tokens`` drawn in epochs from ``unique`` tokens (elementwise).

    Raises:
        ValueError: negative tokens, non-positive unique tokens or ``r_star``.
    """
    u = _check(unique, r_star)
    d = np.asarray(tokens, dtype=np.float64)
    if np.any(d < 0) or np.any(np.isnan(d)):
        raise ValueError(f"tokens must be >= 0, got {tokens!r}")
    repeats = np.maximum(d / u - 1.0, 0.0)
    out = np.where(d <= u, d, u + u * r_star * -np.expm1(-repeats / r_star))
    return float(out) if out.ndim == 0 else out


def raw_tokens(effective: Any, unique: Any, r_star: float = R_STAR) -> np.ndarray | float:
    """The tokens that give ``effective`` effective tokens from ``unique`` (``inf`` at or past ``U (1 +
    R*)``)."""
    u = _check(unique, r_star)
    e = np.asarray(effective, dtype=np.float64)
    if np.any(e < 0) or np.any(np.isnan(e)):
        raise ValueError(f"effective tokens must be >= 0, got {effective!r}")
    frac = np.clip((e - u) / (u * r_star), 0.0, None)
    with np.errstate(divide="ignore"):
        repeats = np.where(frac < 1.0, -r_star * np.log1p(-np.minimum(frac, 1.0 - 1e-300)), np.inf)
    out = np.where(e <= u, e, np.where(frac < 1.0, u * (1.0 + repeats), np.inf))
    return float(out) if out.ndim == 0 else out


@dataclass(frozen=True)
class DomainEpochs(Record):
    """One domain of a mix at a budget.

    Attributes:
        domain: the domain.
        tokens: its training tokens in the run.
        unique: its unique training tokens (one epoch).
        epochs: ``tokens / unique``.
        effective: :func:`effective_tokens` of ``tokens``.
        cap: the epoch cap (``max_epochs``, 1 without it).
        short: the domain cannot supply ``tokens`` within ``cap`` epochs.
        at_cap: the mix uses the domain up to its cap (a solver bound may have stopped it there).
    """

    domain: str
    tokens: float
    unique: float
    epochs: float
    effective: float
    cap: float
    short: bool
    at_cap: bool


def epochs_table(tokens: Mapping[str, float], unique: Mapping[str, float], max_epochs: float | None = None,
                 r_star: float = R_STAR) -> list[DomainEpochs]:
    """Per domain of ``tokens``: epochs, effective tokens, and whether it can supply its share.

    Raises:
        ValueError: a domain of ``tokens`` missing from ``unique``, or bad values.
    """
    missing = sorted(set(tokens) - set(unique))
    if missing:
        raise ValueError(f"unique tokens are missing for domains {missing}")
    cap = 1.0 if max_epochs is None else float(max_epochs)
    rows = []
    for d, n in tokens.items():
        u = float(unique[d])
        epochs = float(n) / u
        rows.append(DomainEpochs(domain=d, tokens=float(n), unique=u, epochs=epochs,
                                 effective=float(effective_tokens(float(n), u, r_star)), cap=cap,
                                 short=epochs > cap * (1 + 1e-9), at_cap=epochs >= cap * 0.999))
    return rows
