"""Exact per-domain sequence budgets: weights validated, counts by largest-remainder rounding."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import overload

import numpy as np

from .._checks import check_int, is_int

__all__ = [
    "WEIGHT_SUM_TOLERANCE",
    "allowed_draws",
    "bounded_round",
    "check_supply",
    "largest_remainder",
    "sequence_budget",
    "validate_weights",
]

WEIGHT_SUM_TOLERANCE = 1e-6


def allowed_draws(available: int, max_epochs: float | None) -> int:
    """Sequence draws a domain of ``available`` whole sequences allows: once each, or ``max_epochs`` times."""
    return math.floor((1.0 if max_epochs is None else float(max_epochs)) * available + 1e-9)


def validate_weights(weights: Mapping[str, float], domain_names: Sequence[str]) -> dict[str, float]:
    """``weights`` (name -> weight) as plain floats in ``domain_names`` order, checked to be a probability
    vector over exactly those domains.

    Raises:
        ValueError: unknown or missing domains, a non-finite or negative weight, or a sum that is
            not 1 within ``WEIGHT_SUM_TOLERANCE`` (the message shows the sum).
    """
    if not isinstance(weights, Mapping):
        raise ValueError(f"weights must be a mapping of domain name to weight, got {type(weights).__name__}")
    names = list(domain_names)
    unknown = sorted(set(weights) - set(names))
    missing = sorted(set(names) - set(weights))
    if unknown:
        raise ValueError(f"weights name unknown domain(s) {unknown}; the domains are {names}")
    if missing:
        raise ValueError(f"weights are missing domain(s) {missing}; give every domain a weight (0 to skip "
                         "it)")
    out: dict[str, float] = {}
    for name in names:
        try:
            value = float(weights[name])
        except (TypeError, ValueError) as exc:
            raise ValueError(f"weight of domain {name!r} is not a number: {weights[name]!r}") from exc
        if not math.isfinite(value):
            raise ValueError(f"weight of domain {name!r} is {value}; weights must be finite")
        if value < 0:
            raise ValueError(f"weight of domain {name!r} is negative ({value}); weights must be >= 0")
        out[name] = value
    total = math.fsum(out.values())
    if abs(total - 1.0) > WEIGHT_SUM_TOLERANCE:
        raise ValueError(f"weights must sum to 1 (within {WEIGHT_SUM_TOLERANCE:g}), they sum to {total!r}")
    return out


@overload
def largest_remainder(weights: Mapping[str, float], total: int) -> dict[str, int]: ...


@overload
def largest_remainder(weights: Sequence[float] | np.ndarray, total: int) -> np.ndarray: ...


def largest_remainder(weights: Mapping[str, float] | Sequence[float] | np.ndarray,
                      total: int) -> dict[str, int] | np.ndarray:
    """Integer counts proportional to ``weights`` that sum to ``total`` exactly.

    Each domain gets ``floor(w_i * total)``; the leftover units go to the largest fractional
    remainders (ties broken by the lower index), so ``|count_i - w_i * total| < 1``. ``weights`` (>= 0,
    renormalized) is a vector (counts: an ``int64`` array) or a mapping (counts: ``{name: count}``).
    """
    if isinstance(weights, Mapping):
        counts = largest_remainder([float(v) for v in weights.values()], total)
        return {name: int(c) for name, c in zip(weights, counts, strict=True)}
    w = np.asarray(weights, dtype=np.float64)
    check_int("total", total, minimum=0)
    if w.ndim != 1 or w.size == 0 or not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
        raise ValueError(f"weights must be a non-empty vector of finite non-negative numbers, got {list(w)}")
    total = int(total)
    w = w / w.sum()
    exact = w * total
    counts = np.floor(exact).astype(np.int64)
    counts = np.minimum(counts, total)
    short = int(total - counts.sum())
    if short > 0:
        remainder = exact - counts
        remainder[w == 0] = -1.0  # a zero weight never receives a unit
        order = np.lexsort((np.arange(w.size), -remainder))
        counts[order[:short]] += 1
    elif short < 0:  # float rounding pushed the floors over: take back from the smallest remainders
        remainder = exact - counts
        order = np.lexsort((np.arange(w.size), remainder))
        order = order[counts[order] > 0]
        counts[order[:-short]] -= 1
    return counts


def bounded_round(target: np.ndarray, low: np.ndarray, high: np.ndarray, total: int) -> np.ndarray:
    """Integers ``x`` with ``low <= x <= high`` and ``sum(x) == total``, each near ``target``.

    ``target`` is clipped to the bounds and floored; the missing (or extra) units go to (come from)
    the largest (smallest) fractional parts among the entries with room, in rounds.

    Raises:
        ValueError: ``total`` outside ``[sum(low), sum(high)]``.
    """
    lo, hi = np.asarray(low, dtype=np.int64), np.asarray(high, dtype=np.int64)
    if not int(lo.sum()) <= total <= int(hi.sum()):
        raise ValueError(f"cannot place {total} units between {lo.tolist()} and {hi.tolist()}")
    t = np.clip(np.asarray(target, dtype=np.float64), lo, hi)
    x = np.clip(np.floor(t).astype(np.int64), lo, hi)
    while (short := total - int(x.sum())) != 0:
        frac = t - x
        room = x < hi if short > 0 else x > lo
        order = np.lexsort((np.arange(x.size), -frac if short > 0 else frac))
        order = order[room[order]][: abs(short)]
        x[order] += 1 if short > 0 else -1
    return x


def sequence_budget(weights: Sequence[float], budget_tokens: int, seq_len: int) -> tuple[int, np.ndarray]:
    """Total sequences ``budget_tokens // seq_len`` and their per-domain split.

    Raises:
        ValueError: ``seq_len <= 0``, a negative budget, or a budget smaller than one sequence.
    """
    check_int("seq_len", seq_len)
    if not is_int(budget_tokens):
        raise ValueError(f"budget_tokens must be an integer, got {budget_tokens!r}")
    total = int(budget_tokens) // int(seq_len)
    if total < 1:
        raise ValueError(f"budget_tokens={budget_tokens} is smaller than one sequence of seq_len={seq_len} "
                         "tokens")
    return total, largest_remainder(weights, total)


def check_supply(name: str, needed: int, available: int, seq_len: int, max_epochs: float | None,
                 tokens: int | None = None) -> None:
    """Raise ``ValueError`` when domain ``name`` cannot supply ``needed`` sequences.

    Without ``max_epochs`` each sequence is used at most once; with it, at most
    ``floor(max_epochs * available)`` sequence draws are allowed. ``tokens`` (the domain's
    token count, default ``available * seq_len``) is quoted in the message.
    """
    tokens = available * seq_len if tokens is None else tokens
    if needed <= 0:
        return
    if available <= 0:
        raise ValueError(f"domain {name!r} is empty: it holds {tokens} tokens, not one whole sequence of "
                         f"{seq_len} tokens, but {needed * seq_len} tokens ({needed} sequences) are asked")
    allowed = allowed_draws(available, max_epochs)
    if needed > allowed:
        hint = ("allow repetition with max_epochs" if max_epochs is None
                else f"raise max_epochs above {max_epochs}")
        raise ValueError(
            f"domain {name!r} is too short: it has {tokens} tokens ({available} whole sequences of "
            f"{seq_len}), the budget asks {needed * seq_len} tokens ({needed} sequences, "
            f"{needed / available:.3g} epochs); lower its weight or the budget, or {hint}")
